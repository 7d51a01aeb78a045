"""The `tail` compaction strategy: older tool results hidden on the wire, no summary (001).

Cheaper than a summary: no model call. A tail compaction records a hide point (the first
message it keeps, `compaction.tail`); every request from then on sends each tool result of a
message *before* that point as `HIDDEN_RESULT` (the call, its id and its error flag stay, so
tool pairing holds). The stored transcript is untouched: the hiding happens only when a request
is built (`build_request` reads the hide point from the request's `tail` section), so a receipt
names the hide point and rebuilds the exact request it sent, and `wakeful debug prompt` shows
the stubs.

Invariant: the hide point only moves forward, at a compaction; between compactions every request
hides the same results, so the provider's cached prefix holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import IdentityMemo, Message, ToolResultBlock

TAIL_SECTION = "tail"  # the request section whose content is the hide point (a message id)
HIDDEN_RESULT = (
    "[older tool result hidden to save context (compaction strategy tail); "
    "run the tool again if you need it]"
)


def _hide(message: Message) -> Message:
    if not any(isinstance(b, ToolResultBlock) for b in message.blocks):
        return message
    blocks = tuple(
        ToolResultBlock(call_id=b.call_id, output=HIDDEN_RESULT, is_error=b.is_error)
        if isinstance(b, ToolResultBlock)
        else b
        for b in message.blocks
    )
    return message.model_copy(update={"blocks": blocks})


# Once per message object: a turn sends the same hidden messages step after step.
hide_results: IdentityMemo[Message, Message] = IdentityMemo(_hide)
"""`message` with each tool result replaced by `HIDDEN_RESULT` (the same object when it has none)."""


def hidden_results(message: Message) -> int:
    """How many tool results `message` holds (what hiding it hides)."""
    return sum(isinstance(b, ToolResultBlock) for b in message.blocks)


def apply_tail(history: Sequence[Message], hide_before_id: str) -> list[Message]:
    """`history` with the tool results of every message before `hide_before_id` hidden; the
    history as it is when that message is not in it (a later summary replaced it, a rewind hid
    it)."""
    for i, message in enumerate(history):
        if message.id == hide_before_id:
            return [*(hide_results(m) for m in history[:i]), *history[i:]]
    return list(history)
