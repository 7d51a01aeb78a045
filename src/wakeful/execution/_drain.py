"""One drain: claim a session, recover what an earlier process left, run turns until the inbox
has nothing deliverable, release the claim.

The claim is write-ahead and fenced (invariant 5): a heartbeat renews its lease; losing it stops
the drain without another write. Success, failure and user interruption release the claim; a
shutdown interrupt and a crash leave it for recovery.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ClaimLostError
from ..runner import Compactor, RunContext, TurnResult, TurnRunner
from ..store import Claim, ClaimToken, SqlStore, fence
from ._owner import current_owner, owner_is_dead
from ._recovery import continue_or_fail, heal_running_tools, open_turn

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
    token = fence(claim)
    start_seq = store.high_water(session_id)
    beat = asyncio.ensure_future(_heartbeat(store, claim, opts.lease_ms))
    release = True
    watch: asyncio.Future[None] | None = None
    try:
        ctx = make_context(token)
        watch = asyncio.ensure_future(_watch_interrupts(store, session_id, start_seq, ctx, opts))
        await _recover(store, session_id, claim, ctx, opts, result)
        await _turns(store, session_id, ctx, result)
        release = not (ctx.interrupt.is_set() and opts.shutdown.is_set())
    except ClaimLostError:
        result.claim_lost = True
        release = False
    finally:
        for task in (beat, watch):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
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
    heal_running_tools(store, sid, token)
    turn_id = open_turn(store, sid)
    if turn_id is None:
        return
    if continue_or_fail(store, sid, turn_id, token, claim.attempts, opts.max_recovery_attempts):
        result.turns.append(await TurnRunner(ctx, sid).run(turn_id=turn_id))


async def _turns(store: SqlStore, sid: str, ctx: RunContext, result: DrainResult) -> None:
    if result.turns and result.turns[-1].outcome in STOP_OUTCOMES:
        return
    while True:
        delivered = store.promote(sid, idle=True, claim=ctx.claim)
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
        turn = await TurnRunner(ctx, sid).run(inputs)
        result.turns.append(turn)
        if turn.outcome in STOP_OUTCOMES:
            return


async def _heartbeat(store: SqlStore, claim: Claim, lease_ms: int) -> None:
    period = max(lease_ms / 3000, 0.05)
    while True:
        await asyncio.sleep(period)
        claim = await asyncio.to_thread(store.renew_claim, claim, lease_ms)


async def _watch_interrupts(
    store: SqlStore, sid: str, after_seq: int, ctx: RunContext, opts: DrainOptions
) -> None:
    """Turn an interrupt requested through the store (by any process) into the local event."""
    while not ctx.interrupt.is_set():
        await asyncio.sleep(opts.poll_interval_ms / 1000)
        if await asyncio.to_thread(store.interrupt_requested, sid, after_seq):
            ctx.interrupt.set()
