"""One drain: claim a session, recover what an earlier process left, run turns until the inbox
has nothing deliverable, release the claim.

The claim is write-ahead and fenced (invariant 5): a heartbeat renews its lease; losing it stops
the drain without another write. Success, failure and user interruption release the claim; a
shutdown interrupt and a crash leave it for recovery.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ClaimLostError, UsageError
from ..events import SessionError
from ..runner import Compactor, Interrupted, RunContext, TurnResult, TurnRunner, crash_point
from ..store import Claim, ClaimToken, SqlStore, fence
from ._owner import current_owner, owner_is_dead
from ._recovery import heal_running_tools, heal_unstarted_calls, open_turn, plan_recovery

STOP_OUTCOMES = frozenset({"paused", "blocked", "interrupted"})


@dataclass
class DrainOptions:
    """Lease length, recovery bound, and whether this drain ends as a shutdown."""

    lease_ms: int = 30_000
    max_recovery_attempts: int = 3
    poll_interval_ms: int = 250
    shutdown: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class DrainResult:
    """What a drain did: turns run, or `busy` when another live driver holds the claim."""

    session_id: str
    turns: list[TurnResult] = field(default_factory=list)
    busy: bool = False
    claim_lost: bool = False
    shutdown: bool = False


async def drain(
    store: SqlStore,
    session_id: str,
    make_context: Callable[[ClaimToken], RunContext],
    options: DrainOptions | None = None,
) -> DrainResult:
    """Drive `session_id` until nothing is deliverable; see the module docstring."""
    opts = options or DrainOptions()
    result = DrainResult(session_id)
    claim = store.acquire_claim(session_id, current_owner(), opts.lease_ms, owner_is_dead)
    if claim is None:
        result.busy = True
        return result
    crash_point("drain.claimed")
    beat: asyncio.Future[None] | None = None
    # Only a drain that ran to its end releases; a shutdown, a lost claim, a cancellation or an
    # unexpected error keeps the claim, so the session is recovered like after a crash.
    release = False
    try:
        ctx = make_context(fence(claim))
    except UsageError as err:  # a permanent configuration error (e.g. the model cannot be built)
        store.append(
            session_id, [SessionError(error=f"cannot drive the session: {err}")], fence(claim)
        )
        store.release_claim(claim)  # inputs stay pending for a fixed configuration
        raise
    try:
        beat = asyncio.ensure_future(_heartbeat(store, claim, opts.lease_ms, ctx))
        await _recover(store, session_id, claim, ctx, opts, result)
        await _turns(store, session_id, ctx, result)
        release = True
    except Interrupted:  # a shutdown interrupt: the open turn stays for the next driver
        result.shutdown = True
    except ClaimLostError:
        result.claim_lost = True
    finally:
        if beat is not None:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
        if release:
            store.release_claim(claim)
    return result


async def _recover(
    store: SqlStore,
    sid: str,
    claim: Claim,
    ctx: RunContext,
    opts: DrainOptions,
    result: DrainResult,
) -> None:
    token = fence(claim)
    if claim.taken_over:  # only an unclean end leaves calls running or unanswered
        heal_running_tools(store, sid, token)
        heal_unstarted_calls(store, sid, token)
        crash_point("drain.healed")
    turn = open_turn(store, sid)
    if turn is None:
        return
    runner = TurnRunner(ctx, sid)
    plan = plan_recovery(store, sid, turn, token, opts.max_recovery_attempts)
    if plan.end is not None:  # settled without another model request
        result.turns.append(
            runner.settle(turn.turn_id, plan.end, plan.final_text, plan.error, plan.error_kind)
        )
    else:
        result.turns.append(await runner.run(turn_id=turn.turn_id))


async def _turns(store: SqlStore, sid: str, ctx: RunContext, result: DrainResult) -> None:
    if result.turns and result.turns[-1].outcome in STOP_OUTCOMES:
        return
    while True:
        if ctx.shutdown is not None and ctx.shutdown.is_set():
            return  # leave pending input for the next driver rather than start a turn
        tid = f"turn_{secrets.token_hex(8)}"
        delivered = store.promote(sid, idle=True, claim=ctx.claim, start_turn=tid)
        if not delivered:
            return
        inputs = [d.item.input_id for d in delivered if d.message is not None]
        if not inputs:  # a control item is delivered alone; a compaction runs here, idle
            for d in delivered:
                if d.item.kind == "compaction":
                    await Compactor(ctx, sid).control(d.item, in_turn=False)
            if ctx.interrupt.is_set():
                return
            continue
        turn = await TurnRunner(ctx, sid).run(inputs, turn_id=tid)
        result.turns.append(turn)
        if turn.outcome == "interrupted":
            ctx.interrupt.clear()  # an interrupt stops one turn; the next one starts clean
        if turn.outcome in STOP_OUTCOMES:
            return


async def _heartbeat(store: SqlStore, claim: Claim, lease_ms: int, ctx: RunContext) -> None:
    """Renew the lease every third of it; a lost claim stops the turn (its writes would fail)."""
    period = max(lease_ms / 3000, 0.05)
    while True:
        await asyncio.sleep(period)
        try:
            claim = await asyncio.to_thread(store.renew_claim, claim, lease_ms)
        except ClaimLostError:
            ctx.interrupt.set()
            return
