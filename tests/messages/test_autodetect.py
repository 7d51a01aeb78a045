"""auto_detect picks the right reader for each format, and the reader's errors come through."""

from __future__ import annotations

import json

import pytest

from wakeful.errors import InvalidMessageError
from wakeful.messages import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderReasoningBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    auto_detect,
    dump_message,
)


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ({"role": "user", "content": "hi"}, Message(role="user", blocks=(TextBlock(text="hi"),))),
        (
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "t", "signature": "s"}],
            },
            Message(role="assistant", blocks=(ThinkingBlock(text="t", signature="s"),)),
        ),
        (
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AA"},
                    }
                ],
            },
            Message(role="user", blocks=(ImageBlock(media_type="image/png", data="AA"),)),
        ),
        (
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
            Message(role="user", blocks=(ToolResultBlock(call_id="c", output="ok"),)),
        ),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            Message(role="assistant", blocks=(ToolCallBlock(id="c", name="f"),)),
        ),
        (
            {"role": "assistant", "content": "x", "reasoning_details": [1]},
            Message(
                role="assistant",
                blocks=(
                    ProviderReasoningBlock(provider="openrouter", data={"reasoning_details": [1]}),
                    TextBlock(text="x"),
                ),
            ),
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}
                ],
            },
            Message(role="user", blocks=(AudioBlock(media_type="audio/wav", data="AA"),)),
        ),
        (
            {
                "role": "user",
                "content": [
                    {
                        "type": "input_file",
                        "file_data": "data:application/pdf;base64,AA",
                        "filename": "a.pdf",
                    }
                ],
            },
            Message(
                role="user",
                blocks=(DocumentBlock(media_type="application/pdf", data="AA", name="a.pdf"),),
            ),
        ),
        (
            {"type": "function_call_output", "call_id": "c", "output": "ok"},
            Message(role="user", blocks=(ToolResultBlock(call_id="c", output="ok"),)),
        ),
        (
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            Message(role="assistant", blocks=(ToolCallBlock(id="c", name="f"),)),
        ),
    ],
)
def test_each_format_is_read_by_its_own_reader(wire: dict[str, object], expected: Message) -> None:
    got = auto_detect(wire)
    assert (got.role, got.blocks) == (expected.role, expected.blocks)


def test_our_own_format_goes_through_the_codec() -> None:
    m = Message(id="msg_1", role="user", blocks=(TextBlock(text="x"),), lane="run_1")
    assert auto_detect(json.loads(dump_message(m))) == m


@pytest.mark.parametrize(
    ("wire", "field"),
    [
        ({"role": "user", "content": [{"type": "sparkle"}]}, "content[0].type"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"type": "computer_call"}, "items[0].type"),
        ({"role": "user", "blocks": [{"type": "sparkle"}]}, "blocks.0"),
    ],
)
def test_errors_of_the_chosen_reader_come_through(wire: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        auto_detect(wire)
    assert info.value.field == field


def test_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidMessageError):
        auto_detect(["role", "user"])  # type: ignore[arg-type]
