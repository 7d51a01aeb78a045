"""Hiding instruction prose: a system message's text is what carries it into a transcript.

Every reader that shows a transcript without the sensitive view (the server's responses and
streams) builds its messages through `redact_system`, and `wakeful session show`, which reads
plain message dumps, through `redact_plain`; both ask `is_instruction` (`_plain.py`), so what is
hidden is decided once. A system message wakeful writes about the session itself (a move's
record: `metadata.kind` in `PLAIN_KINDS`) holds no instruction prose and is shown as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._plain import MOVE_RECORD, PLAIN_KINDS, is_instruction

if TYPE_CHECKING:
    from ._blocks import Message

__all__ = ["MOVE_RECORD", "PLAIN_KINDS", "redact_system"]


def redact_system(message: Message, marker: str) -> Message:
    """A system message's text blocks replaced by `marker`; other messages, and the system
    messages of `PLAIN_KINDS`, unchanged."""
    from ._blocks import TextBlock

    if not is_instruction(message.role, message.metadata):
        return message
    blocks = tuple(
        TextBlock(text=marker) if isinstance(b, TextBlock) else b for b in message.blocks
    )
    return message.model_copy(update={"blocks": blocks})
