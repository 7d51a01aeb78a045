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

from ..messages import (
    AudioBlock,
    DocumentBlock,
    IdentityMemo,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    VideoBlock,
)

TAIL_SECTION = "tail"  # the request section whose content is the hide point (a message id)
HIDDEN_RESULT = (
    "[older tool result hidden to save context (compaction strategy tail); "
    "run the tool again if you need it]"
)
# A hide point that also hides media ends with this (`CompactionTail.media`; issue 37 item 20):
# the section's content says which rendering a receipt was built with, so older receipts,
# whose hide points hid tool results only, still rebuild to their digests.
MEDIA_MARK = "+media"
_MEDIA = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)


def hide_point(hide_before_id: str, media: bool) -> str:
    """The content of a `tail` section: the first message kept, marked when media is hidden."""
    return f"{hide_before_id}{MEDIA_MARK}" if media else hide_before_id


def _hide_media(message: Message) -> Message:
    hidden = _hide(message)
    if not any(isinstance(b, _MEDIA) for b in hidden.blocks):
        return hidden
    blocks = tuple(
        TextBlock(
            text=f"[older {b.type} {b.name or ''} ({b.media_type}) hidden to save context]".replace(
                " ()", ""
            ).replace("  ", " ")
        )
        if isinstance(b, _MEDIA)
        else b
        for b in hidden.blocks
    )
    return hidden.model_copy(update={"blocks": blocks})


hide_media: IdentityMemo[Message, Message] = IdentityMemo(_hide_media)
"""`hide_results`, and each media block replaced by a label saying it was hidden."""


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


def apply_tail(history: Sequence[Message], point: str) -> list[Message]:
    """`history` with the tool results (and, for a `hide_point` marked so, the media) of every
    message before the hide point hidden; the history as it is when that message is not in it
    (a later summary replaced it, a rewind hid it)."""
    media = point.endswith(MEDIA_MARK)
    hide_before_id = point.removesuffix(MEDIA_MARK)
    hide = hide_media if media else hide_results
    for i, message in enumerate(history):
        if message.id == hide_before_id:
            return [*(hide(m) for m in history[:i]), *history[i:]]
    return list(history)
