"""One drain: claim a session, recover what an earlier process left, run turns until the inbox
has nothing deliverable, release the claim.

The claim is write-ahead and fenced (invariant 5): it is taken in the same transaction that
delivers the first inputs and starts their turn (`SqlStore.start_drain`), so a crash can leave a
claim with a started turn but never a claim or a delivery without one. A takeover claims first,
then heals and resumes (the earlier driver's turn is already open). The process's `LeaseKeeper`
renews the lease; losing the claim stops the drain without another write. Success, failure and
user interruption release the claim; a shutdown interrupt and a crash leave it for recovery.

Store calls run in a worker thread (`asyncio.to_thread`), so one session's commit or database
round trip does not stall the other sessions this process drives.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import ClaimLostError, UsageError
from ..events import SessionError
from ..runner import Compactor, Interrupted, RunContext, TurnResult, TurnRunner, crash_point
from ..store import Claim, Delivered, SqlStore, fence
from ._leases import LeaseKeeper
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


def new_turn_id() -> str:
    """A fresh turn id: ``turn_`` + 16 hex characters."""
    return f"turn_{secrets.token_hex(8)}"


async def drain(
    store: SqlStore,
    session_id: str,
    make_context: Callable[[], RunContext],
    leases: LeaseKeeper,
    options: DrainOptions | None = None,
    claim: Claim | None = None,
) -> DrainResult:
    """Drive `session_id` until nothing is deliverable; see the module docstring.

    `claim`, when given, was already taken (a worker's batch takeover); otherwise the drain
    takes it with its first turn.
    """
    opts = options or DrainOptions()
    result = DrainResult(session_id)
    try:
        ctx = make_context()  # before any claim: a configuration error must not start a turn
    except UsageError as err:  # a permanent configuration error (e.g. the model cannot be built)
        await asyncio.to_thread(_report_unbuildable, store, session_id, opts, err, claim)
        raise
    first: tuple[str, Sequence[Delivered]] | None = None
    if claim is None:
        tid = new_turn_id()
        start = await asyncio.to_thread(
            store.start_drain, session_id, current_owner(), opts.lease_ms, owner_is_dead,
            start_turn=tid,
        )  # fmt: skip
        if start.claim is None:
            result.busy = start.busy
            return result
        claim = start.claim
        if start.delivered:
            first = (tid, start.delivered)
    crash_point("drain.claimed")
    ctx.claim = fence(claim)
    leases.hold(claim, ctx.interrupt.set)
    # Only a drain that ran to its end releases; a shutdown, a lost claim, a cancellation or an
    # unexpected error keeps the claim, so the session is recovered like after a crash.
    release = False
    try:
        if first is None:
            await _recover(store, session_id, claim, ctx, opts, result)
        await _turns(store, session_id, ctx, result, first)
        release = True
    except Interrupted:  # a shutdown interrupt: the open turn stays for the next driver
        result.shutdown = True
    except ClaimLostError:
        result.claim_lost = True
    finally:
        leases.drop(claim)
        if release:
            await asyncio.to_thread(store.release_claim, claim)
    return result


def _report_unbuildable(
    store: SqlStore, sid: str, opts: DrainOptions, err: UsageError, claim: Claim | None
) -> None:
    """Record why the session cannot be driven, under a claim; inputs stay pending."""
    claim = claim or store.acquire_claim(sid, current_owner(), opts.lease_ms, owner_is_dead)
    if claim is None:  # a live driver elsewhere: it is the one to report
        return
    store.append(sid, [SessionError(error=f"cannot drive the session: {err}")], fence(claim))
    store.release_claim(claim)


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
        await asyncio.to_thread(heal_running_tools, store, sid, token)
        await asyncio.to_thread(heal_unstarted_calls, store, sid, token)
        crash_point("drain.healed")
    turn = await asyncio.to_thread(open_turn, store, sid)
    if turn is None:
        return
    runner = TurnRunner(ctx, sid)
    plan = await asyncio.to_thread(
        plan_recovery, store, sid, turn, token, opts.max_recovery_attempts
    )
    if plan.end is not None:  # settled without another model request
        result.turns.append(
            runner.settle(turn.turn_id, plan.end, plan.final_text, plan.error, plan.error_kind)
        )
    else:
        result.turns.append(await runner.run(turn_id=turn.turn_id))


async def _turns(
    store: SqlStore,
    sid: str,
    ctx: RunContext,
    result: DrainResult,
    first: tuple[str, Sequence[Delivered]] | None,
) -> None:
    """Run turns until nothing is deliverable; `first` was delivered with the claim."""
    if result.turns and result.turns[-1].outcome in STOP_OUTCOMES:
        return
    while True:
        if first is not None:
            (tid, delivered), first = first, None
        else:
            if ctx.shutdown is not None and ctx.shutdown.is_set():
                return  # leave pending input for the next driver rather than start a turn
            tid = new_turn_id()
            delivered = await asyncio.to_thread(
                store.promote, sid, idle=True, claim=ctx.claim, start_turn=tid
            )
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
