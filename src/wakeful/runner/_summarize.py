"""`summarize_messages`: one summary call over a list of messages, without a runtime or port
(the seed's `compactConversation()`; issue 37 item 18).

The same prompt as a compaction's separate summary request (`_summary.py`), shrunk to fit the
same way (`_summary_call._fitting_drop`, then after each provider overflow), and the same typed
errors: `NothingToCompactError` when nothing is older than the turns to keep,
`CompactionPromptTooLongError` when the request stays too long, `CompactionError` for a reply
without text. Nothing is stored: there is no session, so there is no receipt either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import (
    CompactionError,
    ContextOverflowError,
    NothingToCompactError,
    UsageError,
)
from ..messages import Message, ToolResultBlock
from ..providers import Provider, Usage
from ._stream import stream_to_finish
from ._summary import render_messages
from ._summary_call import (
    MAX_SHRINK_RETRIES,
    SUMMARY_MAX_OUTPUT,
    _fitting_drop,
    shrunk_drop,
    summary_request,
)


@dataclass(frozen=True, slots=True)
class MessagesSummary:
    """A summary of `replaced` messages (the oldest ones; `kept` stayed word for word): its
    text, the usage of the call, and how many of the replaced messages the request left out
    to fit (`dropped`)."""

    text: str
    usage: Usage
    replaced: int
    kept: int
    dropped: int
    model: str


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """The indices of the messages that start a turn: a user message that is not only tool
    results (those answer the assistant message before them)."""
    return [
        i
        for i, m in enumerate(messages)
        if m.role == "user" and not all(isinstance(b, ToolResultBlock) for b in m.blocks)
    ]


async def summarize_messages(
    messages: Sequence[Message],
    provider: Provider,
    *,
    keep_turns: int = 0,
    previous: str | None = None,
    interrupt: asyncio.Event | None = None,
) -> MessagesSummary:
    """Summarize `messages` but their last `keep_turns` turns with one call to `provider`.

    `previous`: an earlier summary the new one folds in. Raises `NothingToCompactError` (no
    provider call) when nothing is older than the turns kept, `CompactionPromptTooLongError`
    when the request stays too long for the model, `CompactionError` when the reply holds no
    text, a `ProviderError` when the call fails, and `CompactionError` when `interrupt` is set
    before it finishes.
    """
    if keep_turns < 0:
        raise UsageError(f"keep_turns must be at least 0, not {keep_turns}")
    starts = turn_starts(messages)
    cut = (
        len(messages)
        if keep_turns == 0
        else (starts[-keep_turns] if len(starts) >= keep_turns else 0)
    )
    replaced = list(messages[:cut])
    if not replaced:
        turns = f"the last {keep_turns} turn(s) hold every message" if messages else "no messages"
        raise NothingToCompactError(f"nothing to summarize: {turns}")
    entries = render_messages(replaced)
    max_out = min(provider.max_output_tokens, SUMMARY_MAX_OUTPUT)

    request = summary_request(provider, previous, entries, "", max_out)
    drop = _fitting_drop(request, len(entries), provider.context_window, max_out)
    for attempt in range(1, MAX_SHRINK_RETRIES + 2):
        _, req = request(drop, attempt)
        try:
            finish = await stream_to_finish(provider, req, interrupt or asyncio.Event())
        except ContextOverflowError as err:
            drop = shrunk_drop(err, attempt, len(entries), drop)
            continue
        if finish is None:
            raise CompactionError("the summary was interrupted")
        text = finish.message.text().strip()
        if not text:
            raise CompactionError("the summary reply held no text")
        return MessagesSummary(
            text, finish.usage, len(replaced), len(messages) - cut, drop, provider.model
        )
    raise AssertionError("unreachable: the loop returns or raises")
