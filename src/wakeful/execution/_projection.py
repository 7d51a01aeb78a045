"""The session's context (issue 37 item 27): the active history the next request carries.

The transcript (`messages`) holds everything; the context is what a model is sent of it now:
from the newest compaction still visible (its summary first, then the retained tail and what
followed), the tool results of messages before the `tail` strategy's hide point as their stub,
without aborted output (`to_wire` leaves it out of every request). The same rules the runner
applies, read through the same code (`runner.ActiveHistory`, `runner._tail.apply_tail`), not
restated: the projection cannot drift from what requests hold. Instruction sections, the
work-state note and tools are not messages and are not part of it (`wakeful debug prompt`
shows a whole request).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from ..events import CompactionEnded, CompactionTail
from ..messages import Message
from ..runner._active import ActiveHistory
from ..runner._tail import apply_tail, hide_point
from ._reads import Reads

T = TypeVar("T")


class _Source:
    """`ActiveHistory`'s source over a store; its methods never suspend."""

    def __init__(self, reads: Reads, session_id: str) -> None:
        self.reads, self.sid = reads, session_id

    async def compaction_boundary(self) -> int:
        ended = self.reads.live_compactions(self.sid)
        last = ended[-1].event if ended else None
        return last.through_seq if isinstance(last, CompactionEnded) else 0

    async def messages_after(self, seq: int) -> list[tuple[int, Message]]:
        return self.reads.messages_with_seq(self.sid, seq)


def _done(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (`_Source`) to its result, without an event loop
    (a caller may already run one)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise AssertionError("the context's source suspended")


def session_context(reads: Reads, session_id: str) -> list[Message]:
    """The session's context in request order (the module docstring); `NotFoundError` for an
    unknown session."""
    reads.get_session(session_id)
    history = ActiveHistory(_Source(reads, session_id))
    _done(history.refresh())
    messages = history.messages()
    tails = reads.events(session_id, types=["compaction.tail"])
    tail = tails[-1].event if tails else None
    if isinstance(tail, CompactionTail):
        messages = apply_tail(messages, hide_point(tail.hide_before_id, tail.media))
    return [m for m in messages if not m.aborted]
