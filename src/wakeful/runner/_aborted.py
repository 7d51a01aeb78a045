"""Output cut short by an interrupt or a shutdown, kept in the transcript (001).

What streamed before the cut (reasoning and text) is persisted as an assistant message with
`aborted = True`: the transcript shows it, `to_wire` leaves it out of every request, so the
model never sees it and the step is asked again when the session goes on. The usage the
provider reported before the cut is recorded with it (the tokens were spent). Invariant: an
aborted message is never a reply the turn acts on: it has no tool calls and ends no step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from ..events import MessageAdded, SessionEvent
from ..messages import Block, Message, TextBlock, ThinkingBlock
from ..providers import Usage
from ._pricing import PriceTable, usage_event

AbortCause = Literal["interrupt", "shutdown"]


@dataclass
class Streamed:
    """What one attempt streamed so far: its text and reasoning, the usage last reported, and
    the receipt it was sent under (None before its receipt was durable). Local to the attempt:
    it fills while the reply streams, and is what an interrupt keeps."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    usage: Usage | None = None
    receipt_id: str | None = None


def aborted_events(
    *,
    turn_id: str,
    step: int,
    message_id: str,
    model: str,
    text: list[str],
    streamed: Streamed,
    cause: AbortCause,
    receipt_id: str | None,
    prices: PriceTable | None = None,
) -> list[SessionEvent]:
    """The events keeping an attempt's streamed output as an aborted message (none when nothing
    streamed): the message, then the reported usage, if any."""
    blocks: list[Block] = []
    if streamed.reasoning:
        blocks.append(ThinkingBlock(text="".join(streamed.reasoning)))
    if text:
        blocks.append(TextBlock(text="".join(text)))
    if not blocks:
        return []
    meta: dict[str, JsonValue] = {
        "turn_id": turn_id,
        "step": step,
        "model": model,
        "aborted_by": cause,
    }
    message = Message(
        id=message_id, role="assistant", blocks=tuple(blocks), metadata=meta, aborted=True
    )
    events: list[SessionEvent] = [MessageAdded(message=message, turn_id=turn_id)]
    if streamed.usage is not None:
        events.append(usage_event(model, streamed.usage, receipt_id, prices))
    return events
