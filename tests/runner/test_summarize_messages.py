"""`summarize_messages` (issue 37 items 18, 19): one summary call over a list of messages, with
no runtime, store or port; nothing to summarize is the typed `NothingToCompactError` (the seed's
`CompactInvalidInputError`), raised before any provider call. On main neither existed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wakeful.errors import CompactionError, CompactionPromptTooLongError, NothingToCompactError
from wakeful.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from wakeful.providers import make_provider
from wakeful.runner import summarize_messages

SUMMARY = {"match": "^Summarize the conversation below", "replies": [{"text": "## Objective\n- x"}]}


def provider(tmp_path: Path, rules: list[dict[str, object]], **top: object):  # type: ignore[no-untyped-def]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": rules, **top}))
    return make_provider(f"scripted:{path}")


def say(role: str, text: str) -> Message:
    return Message(role=role, blocks=(TextBlock(text=text),))  # type: ignore[arg-type]


CALL = ToolCallBlock(id="c1", name="read_file", input={"path": "a.py"})
HISTORY = [
    say("user", "first"),
    Message(role="assistant", blocks=(CALL,)),
    Message(role="user", blocks=(ToolResultBlock(call_id="c1", output="print(1)"),)),
    say("assistant", "read it"),
    say("user", "second"),
    say("assistant", "two"),
    say("user", "third"),
    say("assistant", "three"),
]


async def test_it_summarizes_all_but_the_turns_kept(tmp_path: Path) -> None:
    done = await summarize_messages(HISTORY, provider(tmp_path, [SUMMARY]), keep_turns=1)
    assert done.text == "## Objective\n- x"
    assert (done.replaced, done.kept, done.dropped) == (6, 2, 0)  # a tool result is no turn
    assert done.usage.input_tokens > 0 and done.usage.output_tokens > 0
    everything = await summarize_messages(HISTORY, provider(tmp_path, [SUMMARY]))
    assert (everything.replaced, everything.kept) == (8, 0)


@pytest.mark.parametrize(("messages", "keep"), [([], 0), (HISTORY, 3), (HISTORY, 5)])
async def test_nothing_to_summarize_is_a_typed_error_without_a_call(
    tmp_path: Path, messages: list[Message], keep: int
) -> None:
    silent = provider(tmp_path, [])  # any request would fail: no rule matches
    with pytest.raises(NothingToCompactError, match="nothing to summarize"):
        await summarize_messages(messages, silent, keep_turns=keep)
    assert issubclass(NothingToCompactError, CompactionError)


async def test_a_request_that_cannot_fit_and_an_empty_reply_are_typed(tmp_path: Path) -> None:
    tiny = provider(tmp_path, [SUMMARY], context_window=200, max_output_tokens=100)
    with pytest.raises(CompactionPromptTooLongError):
        await summarize_messages(HISTORY, tiny)
    empty = provider(tmp_path, [{"match": "^Summarize", "replies": [{"text": ""}]}])
    with pytest.raises(CompactionError, match="no text"):
        await summarize_messages(HISTORY, empty)
