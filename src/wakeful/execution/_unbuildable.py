"""A session whose stored agent or model can no longer be built here (a scripted file deleted,
an API key removed, an agent no longer configured): its next turn ends `blocked`.

Invariant: such a drain consumes exactly the input a normal drain would have delivered and ends
its turn `blocked` with the reason, under a fenced claim that it then releases, so the input is
settled once and never retried by every later worker; inputs after it stay pending.
"""

from __future__ import annotations

from .._ids import new_turn_id
from ..errors import UsageError
from ..events import SessionError, TurnEnded
from ..providers import Usage
from ..runner import TurnResult
from ..store import Claim, LocalStore, fence
from ._owner import current_owner, owner_is_dead
from ._recovery import heal_running_tools, heal_unstarted_calls, open_turn
from ._writes import promote_idle, start_drain

BLOCKED_KIND = "configuration"


def block_unbuildable(
    store: LocalStore, sid: str, lease_ms: int, err: UsageError, claim: Claim | None
) -> tuple[list[TurnResult], bool]:
    """End the session's next (or open) turn `blocked` with `err` as its reason.

    Returns the turn ended (none when nothing was deliverable) and whether a live driver
    elsewhere holds the session (then nothing is written: that driver reports it).
    """
    reason = f"cannot drive the session: {err}"
    started: str | None = None
    tid = new_turn_id()
    reserved = claim is not None and not claim.taken_over  # a worker's: nothing delivered yet
    if claim is None:
        start = start_drain(store, sid, current_owner(), lease_ms, owner_is_dead, start_turn=tid)
        if start.claim is None:
            return [], start.busy
        claim = start.claim
        if any(d.message is not None for d in start.delivered):
            started = tid
    token = fence(claim)
    try:
        if claim.taken_over:  # the earlier driver's calls end as after any crash
            heal_running_tools(store, sid, token)
            heal_unstarted_calls(store, sid, token)
        elif reserved:  # deliver as `start_drain` would have
            heal_running_tools(store, sid, token)
            delivered = promote_idle(store, sid, token, start_turn=tid)
            if any(d.message is not None for d in delivered):
                started = tid
        if started is None and (turn := open_turn(store, sid)) is not None:
            started = turn.turn_id
        if started is None:  # only a control item was due: the reason is recorded, no turn
            store.append(sid, [SessionError(error=reason)], token)
            return [], False
        end = TurnEnded(turn_id=started, outcome="blocked", error=reason, error_kind=BLOCKED_KIND)
        store.append(sid, [end], token)
        return [TurnResult(started, "blocked", 0, Usage(0, 0), reason, BLOCKED_KIND)], False
    finally:
        store.claims.release(claim)
