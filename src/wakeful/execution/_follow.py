"""Following one input to the end of its turn, wherever the session is driven.

A caller that admitted an input and wants its outcome (`wakeful run`, `Runtime.run`) may find
the session held by another live driver: that driver delivers the input, not this process. The
caller then waits for the turn that took the input and reports it as stored, instead of
reporting a drain that ran nothing as if it had completed. Reads only; the take-over of a dead
driver's claim happens in the caller's next drain.
"""

from __future__ import annotations

import asyncio
from typing import cast

from ..events import MessageAdded, Outcome, ReceiptRecorded
from ..providers import Usage
from ..runner import TurnResult
from ..store import LocalStore, TurnRow
from ._coordinator import Coordinator
from ._off_loop import off_loop

RECHECK_S = 1.0  # how often a follower tries to drive the session itself (its driver may be gone)


def _settling_seq(store: LocalStore, session_id: str, input_id: str) -> tuple[int, str] | None:
    """(seq, how) of the event that settled the input: `delivered`, or `rejected: REASON`."""
    item = store.input(session_id, input_id)
    if item.status == "pending":
        return None
    types = ["inbox.delivered", "inbox.rejected"]
    for stored in store.events(session_id, after=item.seq, types=types):
        event = stored.event
        if getattr(event, "input_id", None) == input_id:
            reason = getattr(event, "reason", None)
            return stored.seq, "delivered" if reason is None else f"rejected: {reason}"
    return None


def _turn_at(turns: list[TurnRow], seq: int) -> TurnRow | None:
    """The turn running when the event at `seq` was written, else the first one started after
    it (a turn starts in the transaction that delivers its first inputs)."""
    for turn in turns:
        if turn.started_seq <= seq and (turn.ended_seq is None or turn.ended_seq > seq):
            return turn
    return next((t for t in turns if t.started_seq > seq), None)


def input_outcome(store: LocalStore, session_id: str, input_id: str) -> TurnResult | None:
    """The ended turn that took `input_id`, as a `TurnResult` (its usage is not kept per turn
    and reads as zero); None while the input is pending or its turn still runs. A rejected
    input reads as a `failed` turn without an id."""
    settled = _settling_seq(store, session_id, input_id)
    if settled is None:
        return None
    seq, how = settled
    if how != "delivered":
        return TurnResult("", "failed", 0, Usage(0, 0), error=f"input {input_id} {how}")
    turn = _turn_at(store.turns(session_id), seq)
    if turn is None or turn.status == "running":
        return None
    types = ["message.added", "receipt.recorded", "turn.ended"]
    events = store.events(session_id, after=turn.started_seq - 1, types=types)
    steps: set[int] = set()
    final = ""
    kind: str | None = None
    for stored in events:
        event = stored.event
        if isinstance(event, ReceiptRecorded) and event.turn_id == turn.turn_id:
            steps.add(event.step)
        elif isinstance(event, MessageAdded) and event.turn_id == turn.turn_id:
            if event.message.role == "assistant":
                final = event.message.text()
        elif getattr(event, "turn_id", None) == turn.turn_id:  # its turn.ended
            kind = getattr(event, "error_kind", None)
    outcome = cast(Outcome, turn.status)
    return TurnResult(turn.turn_id, outcome, len(steps), Usage(0, 0), turn.error, kind, final)


async def drive_input(coordinator: Coordinator, session_id: str, input_id: str) -> list[TurnResult]:
    """Drive the session until `input_id` is settled: the turns run here, or, while another
    live process holds the session, the turn it ran for the input once that turn ended. The
    session is tried again every `RECHECK_S`, so a driver that died is taken over."""
    store = coordinator.store
    poll_s = coordinator.options.poll_interval_ms / 1000
    loop = asyncio.get_running_loop()
    while True:
        results = await coordinator.resume(session_id)
        turns = [t for r in results for t in r.turns]
        if turns or not any(r.busy for r in results):
            return turns
        deadline = loop.time() + max(RECHECK_S, poll_s)
        while loop.time() < deadline:
            outcome = await off_loop(input_outcome, store, session_id, input_id)
            if outcome is not None:
                return [outcome]
            await asyncio.sleep(poll_s)
