"""One drain: claim a session, recover what an earlier process left, run turns until the inbox
has nothing deliverable, release the claim.

The claim is write-ahead and fenced (invariant 5): it is taken in the same transaction that
delivers the first inputs and starts their turn (`_writes.start_drain`), so a crash can leave a
claim with a started turn but never a claim or a delivery without one. A takeover claims first,
then heals and resumes (the earlier driver's turn is already open). The process's `LeaseKeeper`
renews the lease; losing the claim stops the drain without another write. Success, failure and
user interruption release the claim; a shutdown interrupt and a crash leave it for recovery.

Store calls run in a worker thread (`off_loop`), so one session's commit or database round
trip does not stall the other sessions this process drives; turns reach the store only through
the `StorePort` the drain opens with its claim (one per claim, shared by its turns).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from .._defaults import LEASE_MS, MAX_RECOVERY_ATTEMPTS, POLL_INTERVAL_MS
from .._ids import new_turn_id
from ..errors import ClaimLostError, CommitUnknownError, LocationUnavailableError, UsageError
from ..instructions import InstructionSync
from ..runner import (
    APPROVAL_TYPES,
    LOOKBACK_EVENTS,
    Interrupted,
    ReceiptChain,
    TurnResult,
    TurnRunner,
    crash_point,
)
from ..store import Claim, ClaimToken, Delivered, InstructionState, LocalStore, fence
from ._first_writes import FirstWrites
from ._leases import LeaseKeeper
from ._move import rebind
from ._off_loop import off_loop
from ._owner import current_owner, owner_is_dead
from ._port import Opened, SessionSetup, StorePort
from ._recovery import (
    Recovered,
    heal_running_tools,
    heal_unstarted_calls,
    open_turn,
    plan_recovery,
)
from ._unbuildable import block_unbuildable
from ._writes import OpeningAhead, end_and_release, promote_or_release, start_drain

STOP_OUTCOMES = frozenset({"paused", "blocked", "interrupted"})


@dataclass
class DrainOptions:
    """Lease length, recovery bound, and whether this drain ends as a shutdown."""

    lease_ms: int = LEASE_MS
    max_recovery_attempts: int = MAX_RECOVERY_ATTEMPTS
    poll_interval_ms: int = POLL_INTERVAL_MS
    shutdown: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class DrainResult:
    """What a drain did: turns run, or `busy` when another live driver holds the claim."""

    session_id: str
    turns: list[TurnResult] = field(default_factory=list)
    busy: bool = False
    claim_lost: bool = False
    shutdown: bool = False
    waiting_for: str | None = None  # the session's location is not served here: not run
    delivered: bool = False  # some input (or a decision, a control item) was delivered
    pending: bool | None = None  # input pending as the claim was released (None: not looked)
    released: bool = False  # released by the drain's last promotion (`promote_or_release`)


async def drain(
    store: LocalStore,
    session_id: str,
    make_context: Callable[[], SessionSetup],
    leases: LeaseKeeper,
    options: DrainOptions | None = None,
    claim: Claim | None = None,
    recovered: Recovered | None = None,
) -> DrainResult:
    """Drive `session_id` until nothing is deliverable; see the module docstring.

    `claim`, when given, was already taken (a worker's batch takeover, or its reservation of
    a ready session); otherwise the drain takes it with its first turn. `recovered`: the batch
    also healed the session and planned its open turn (`recover_batch`; for a reservation,
    nothing to recover), so the drain goes straight to that turn, or to the next delivery.
    """
    opts = options or DrainOptions()
    result = DrainResult(session_id)
    reserved = claim is not None and not claim.taken_over  # a worker's: nothing delivered yet
    setup = await _setup(store, session_id, make_context, leases, opts, claim, result)
    if setup is None:
        return result
    ctx = setup.ctx
    first: tuple[str, Sequence[Delivered]] | None = None
    sync, ahead, opening = _reads_ahead(store, session_id, setup, recovered)
    if claim is None:
        claim, first = await _claim(store, session_id, setup, opts, result, sync, ahead, opening)
        if claim is None:
            return result
    state = ahead if recovered is not None and recovered.turn is None else None
    crash_point("drain.claimed")
    opened, first_writes = (recovered.opening, recovered.first) if recovered else (None, None)
    port = _port(store, session_id, fence(claim), setup, sync, opened, first_writes)
    port.read_ahead(opening)
    held = _Held(claim, port)
    leases.hold(claim, held.on_lost(ctx.interrupt.set))
    port.publish("session_start", {"taken_over": claim.taken_over})
    # Only a drain that ran to its end releases; a shutdown, a lost claim, a cancellation or an
    # unexpected error keeps the claim, so the session is recovered like after a crash.
    release = False
    receipts = ReceiptChain()  # the drain's turns record each receipt against the one before
    try:
        if first is None:
            await _recover(claim, setup, port, opts, result, recovered, receipts)
        await _turns(setup, port, result, first, make_context, receipts, held, state)
        release = True
    except Interrupted:  # a shutdown interrupt: the open turn stays for the next driver
        result.shutdown = True
    except ClaimLostError:
        result.claim_lost = True
    except Exception as err:
        await _free_unused(store, claim, reserved and not result.delivered, err)
        raise
    finally:
        port.leave_batch()  # (a drive that never committed alone: its batch waits no more)
        leases.drop(claim)
        await _close(store, claim, held.port, result, release)
    return result


def _reads_ahead(
    store: LocalStore, session_id: str, setup: SessionSetup, recovered: Recovered | None
) -> tuple[InstructionSync, InstructionState | None, OpeningAhead]:
    """The drain's turns' sync (a batch recovery read the state it plans from first), the
    instruction state the context's read saw (for the first delivery's delta, when nothing
    the drain writes comes first), and what asks the unit delivering the first turn's input
    to read that turn's opening."""
    known = recovered.instructions if recovered is not None else None
    sync = InstructionSync(store, session_id, setup.ctx.instruction_sources, known)
    own = recovered is None or recovered.drive is None  # (a batch's was read before its write)
    ahead = setup.read.instructions if setup.read is not None and own else None
    return sync, ahead, OpeningAhead(APPROVAL_TYPES, LOOKBACK_EVENTS)


async def _close(
    store: LocalStore, claim: Claim, port: StorePort, result: DrainResult, release: bool
) -> None:
    """The drain's end on `port` (the one it ends with: a move rebinds it): the release, when
    the drain ran to its end and its last promotion did not release (`_release`); a turn end
    left unwritten (an error) is dropped, the turn stays open for recovery; `session_end`."""
    if release and not result.released:  # and look at the inbox in its transaction
        await _release(store, claim, port, result)
    port.drop_end()
    port.publish("session_end", session_end_data(result))


async def _release(store: LocalStore, claim: Claim, port: StorePort, result: DrainResult) -> None:
    """Release the claim of a drain that stopped before its last promotion, and look at the
    inbox in the same unit (`result.pending`); a completed turn's end the port held goes
    first in it (`end_and_release`)."""
    ended = port.ended
    if not ended:
        _, result.pending = await off_loop(store.claims.release_and_look, claim)
        return
    try:
        _, result.pending = await off_loop(end_and_release, store, claim.session_id, claim, ended)
    except ClaimLostError:
        result.claim_lost = True
        return
    port.end_written()


async def _free_unused(store: LocalStore, claim: Claim, unused: bool, err: Exception) -> None:
    """Release a worker's reservation whose drain failed before delivering anything
    (`unused`): it has no turn to recover, as a failed `start_drain` takes no claim. Not
    after a commit whose outcome is unknown (that delivery may be durable); a release that
    fails leaves the claim to lapse, as any claim kept."""
    if unused and not isinstance(err, CommitUnknownError):
        with contextlib.suppress(Exception):
            await off_loop(store.claims.release, claim)


def _port(
    store: LocalStore,
    session_id: str,
    claim: ClaimToken | None,
    setup: SessionSetup,
    sync: InstructionSync | None = None,
    opened: Opened | None = None,
    first: FirstWrites | None = None,
) -> StorePort:
    """The session's port under `claim`, for the context and hooks of `setup`; its turns'
    instruction sync is `sync` (the one that planned the claim's prelude) when given, its
    first turn's opening `opened` when a batch recovery read it, and `first` the batch whose
    first commits its own first commit joins."""
    sources = setup.ctx.instruction_sources
    return StorePort(
        store,
        session_id,
        claim,
        sources=sources,
        hooks=setup.hooks,
        known=setup.known,
        sync=sync,
        opened=opened,
        hold_end=True,  # a completed turn's end goes with the drain's next unit
        first=first,
    )


async def _setup(
    store: LocalStore,
    session_id: str,
    make_context: Callable[[], SessionSetup],
    leases: LeaseKeeper,
    opts: DrainOptions,
    claim: Claim | None,
    result: DrainResult,
) -> SessionSetup | None:
    """The session's context, built before any claim is taken (a configuration error must not
    start a turn; off the loop: it reads the store and may start MCP servers, `_toolbox.py`).
    None ends the drain: the location is not served here (`result.waiting_for`; not run, not
    failed: it waits, `docs/locations.md`), or the configuration cannot run (a blocked turn)."""
    try:
        return await off_loop(make_context)
    except LocationUnavailableError as err:
        if claim is not None:  # taken over for nothing: it lapses for a worker serving it
            leases.drop(claim)
            if not claim.taken_over:  # reserved by a worker: no turn to recover, free it now
                await off_loop(store.claims.release, claim)
        await off_loop(store.claims.note_waits, {session_id: err.location})
        result.waiting_for = err.location
        return None
    except UsageError as err:  # a permanent configuration error (e.g. the model cannot be built)
        turns, busy = await off_loop(
            block_unbuildable, store, session_id, opts.lease_ms, err, claim
        )
        if claim is not None:
            leases.drop(claim)
        result.turns.extend(turns)
        result.busy = busy
        return None


async def _claim(
    store: LocalStore,
    session_id: str,
    setup: SessionSetup,
    opts: DrainOptions,
    result: DrainResult,
    sync: InstructionSync,
    state: InstructionState | None,
    opening: OpeningAhead,
) -> tuple[Claim | None, tuple[str, Sequence[Delivered]] | None]:
    """Take the claim with the first delivery and the turn it starts (`start_drain`): the
    claim (None: nothing to do, or `result.busy`) and that turn's id with what it delivered.
    `sync` plans the prelude (from `state`, read with the context, when given) and learns
    whether it was written (a session's first delta: the turn's first step then renders it
    without reading it back); `opening` gets the turn's opening, read last in the unit."""
    tid = new_turn_id()
    # The instruction delta goes before the delivery, in its transaction (003).
    prelude = await off_loop(sync.prelude, 0, state)
    start = await off_loop(
        start_drain,
        store,
        session_id,
        current_owner(),
        opts.lease_ms,
        owner_is_dead,
        start_turn=tid,
        prelude=prelude,
        opening=opening,
    )
    if setup.known is not None:
        setup.known.noticed(start.facts)
    if prelude is not None and start.wrote_prelude:
        sync.wrote(prelude)
    if start.claim is None:
        result.busy = start.busy
        return None, None
    return start.claim, ((tid, start.delivered) if start.delivered else None)


def session_end_data(result: DrainResult) -> dict[str, JsonValue]:
    """The `session_end` hook's data: the status the run left and the turns it ran."""
    if result.shutdown or result.claim_lost:
        status = "shutdown" if result.shutdown else "claim_lost"
    elif not result.turns or result.turns[-1].outcome == "completed":
        status = "idle"
    else:
        status = result.turns[-1].outcome
    turns = [t.turn_id for t in result.turns]
    return {
        "status": status,
        "turns": len(turns),
        "first_turn_id": turns[0] if turns else None,
        "last_turn_id": turns[-1] if turns else None,
    }


async def _recover(
    claim: Claim,
    setup: SessionSetup,
    port: StorePort,
    opts: DrainOptions,
    result: DrainResult,
    recovered: Recovered | None,
    receipts: ReceiptChain,
) -> None:
    store, sid, token = port.store, port.session_id, fence(claim)
    if recovered is not None:  # healed and planned with its batch (`recover_batch`)
        turn, plan = recovered.turn, recovered.plan
    else:
        # A call still `running` here has no owner left (this drain holds the claim and ran
        # nothing yet): after a takeover, or after a driver released the claim without saving
        # its result.
        healed = await off_loop(heal_running_tools, store, sid, token)
        if claim.taken_over:  # only a crash between a reply and its calls leaves calls unanswered
            healed += await off_loop(heal_unstarted_calls, store, sid, token)
        if claim.taken_over or healed:
            crash_point("drain.healed")
        turn, plan = await off_loop(open_turn, store, sid), None
    if turn is None:
        return
    runner = TurnRunner(setup.ctx, port, receipts)
    if plan is None:
        plan = await off_loop(plan_recovery, store, sid, turn, token, opts.max_recovery_attempts)
    if plan.end is not None:  # settled without another model request
        ended = await runner.settle(
            turn.turn_id, plan.end, plan.final_text, plan.error, plan.error_kind
        )
        result.turns.append(ended)
    else:
        result.turns.append(await runner.run(turn_id=turn.turn_id))


async def _turns(
    setup: SessionSetup,
    port: StorePort,
    result: DrainResult,
    first: tuple[str, Sequence[Delivered]] | None,
    make_context: Callable[[], SessionSetup],
    receipts: ReceiptChain,
    held: _Held,
    state: InstructionState | None = None,
) -> None:
    """Run turns until nothing is deliverable; `first` was delivered with the claim. A move
    (delivered between turns) rebinds the session to the new location (a new context and
    port, under the same claim), or ends the drain when this process does not serve it.
    `state`: the instruction state read with the context, for the first idle delivery's
    delta when no turn ran before it (a worker's reservation)."""
    if result.turns and result.turns[-1].outcome in STOP_OUTCOMES:
        return
    store, sid, ctx = port.store, port.session_id, setup.ctx
    while True:
        if result.turns and result.turns[-1].outcome == "failed":
            # A turn that failed on a store fault may leave calls `running` (a reply committed
            # although its commit reported a lost connection): settle them before new input.
            await off_loop(heal_running_tools, store, sid, port.claim)
        if first is not None:
            (tid, delivered), first = first, None
        else:
            if ctx.shutting_down():
                return  # leave pending input for the next driver rather than start a turn
            tid = new_turn_id()
            delivered = await _promote_idle(port, tid, setup, held, result, state)
        state = None  # a turn writes: what was read ahead is stale from now on
        if not delivered:
            return
        result.delivered = True
        inputs = [d.item.input_id for d in delivered if d.message is not None]
        for input_id in inputs:
            port.publish("input_delivered", {"input_id": input_id, "delivery": "turn"})
        if any(d.item.kind == "approval" for d in delivered):  # they started the turn
            turn = await TurnRunner(ctx, port, receipts).run(turn_id=tid, decisions=True)
            result.turns.append(turn)
            if turn.outcome in STOP_OUTCOMES:
                return
            continue
        if not inputs:  # a control item is delivered alone; a compaction runs here, idle
            rebound = await _control(delivered, setup, port, result, make_context, receipts)
            if rebound is None:
                return
            setup, port = rebound
            held.port, ctx = port, setup.ctx
            if ctx.interrupt.is_set():
                return
            continue
        turn = await TurnRunner(ctx, port, receipts).run(inputs, turn_id=tid)
        result.turns.append(turn)
        if turn.outcome == "interrupted":
            ctx.interrupt.clear()  # an interrupt stops one turn; the next one starts clean
        if turn.outcome in STOP_OUTCOMES:
            return


@dataclass(slots=True)
class _Held:
    """The drain's claim, and whether the drain is releasing it (`_promote_idle`): a lease
    renewal that finds it released then must not interrupt the context's next turn; and the
    drain's port now (a move rebinds it), whose held turn end the drain's last unit writes."""

    claim: Claim
    port: StorePort
    releasing: bool = False

    def on_lost(self, interrupt: Callable[[], None]) -> Callable[[], None]:
        """What the lease keeper calls when a renewal finds the claim gone: `interrupt`,
        unless the drain itself is releasing it."""

        def lost() -> None:
            if not self.releasing:
                interrupt()

        return lost


async def _promote_idle(
    port: StorePort,
    turn_id: str,
    setup: SessionSetup,
    held: _Held,
    result: DrainResult,
    state: InstructionState | None = None,
) -> list[Delivered]:
    """The next delivery between turns and the turn `turn_id` it starts, after the instruction
    delta the port's sync plans (from `state` when given); with nothing deliverable, the claim's release and the last
    look at the inbox in the same unit (`promote_or_release`: `result.released`, `.pending`).
    The lease keeper keeps renewing the claim meanwhile (a short lease must not lapse while
    the unit waits for a thread); a renewal that finds it released by the unit is no loss."""
    prelude = await off_loop(port.prelude, 0, state)
    held.releasing = True
    opening = port.opening_ahead()  # the next turn's opening, read last in the unit
    idle = await off_loop(
        promote_or_release,
        port.store,
        port.session_id,
        port.claim,
        first=port.ended,
        start_turn=turn_id,
        prelude=prelude,
        known=setup.known,
        opening=opening,
    )
    port.end_written()  # (the turn's `turn_end` and what followed it go out now)
    port.read_ahead(opening)
    if idle.delivered:
        held.releasing = False
        if prelude is not None and idle.wrote_prelude:  # (a worker's first delivery, too)
            port.prelude_written(prelude)
    else:
        result.released, result.pending = idle.released, idle.pending
    return idle.delivered


async def _control(
    delivered: Sequence[Delivered],
    setup: SessionSetup,
    port: StorePort,
    result: DrainResult,
    make_context: Callable[[], SessionSetup],
    receipts: ReceiptChain,
) -> tuple[SessionSetup, StorePort] | None:
    """Run the control items delivered alone between turns: a compaction runs here, idle; a
    move rebinds the session to its new location (a new context and port, under the same
    claim). The setup and port to go on with, or None when the session moved to a location not
    served here (it waits there: `result.waiting_for`)."""
    store, sid = port.store, port.session_id
    for d in delivered:
        if d.item.kind == "compaction":
            await TurnRunner(setup.ctx, port, receipts).compact(d.item)
        elif d.item.kind == "move":
            try:
                setup = await off_loop(rebind, store, sid, port.claim, make_context)
            except LocationUnavailableError as err:  # served elsewhere: it waits there
                await off_loop(store.claims.note_waits, {sid: err.location})
                result.waiting_for = err.location
                return None
            port = _port(store, sid, port.claim, setup)
    return setup, port
