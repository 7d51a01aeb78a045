"""Which writes share a transaction, and why: every composition of the store's units of work.

The store offers one fenced unit of work per session (`LocalStore.write` -> `SessionWrite`:
append, promote, admit, take or release the claim, all committed together or not at all) and
one batched read (`LocalStore.read` -> `SessionRead`). What goes into one unit is execution's
policy, and it all lives here, so a newcomer reads in one place why each group is atomic:

- `start_drain`: the claim and the first delivery with the turn it starts. A crash can leave
  a claim with a started turn, never a claim without one, nor a delivered input without a turn
  to answer it.
- `promote_step`: at a step boundary, the held reply (`first`), the instruction delta before
  delivered steers (`prelude`), the steers, and, only when none was delivered, the next step's
  receipt (`then`): one commit per step, and a receipt never lands after input it did not see.
- `promote_idle`: between turns, the next delivery and the turn it starts (with its prelude).
- `promote_or_release`: `promote_idle`, or with nothing deliverable the claim's release and a
  last look at the inbox, in the one unit that ends a drain.
- `end_child`: a background child's `turn.ended` and its report in the parent's inbox; no
  crash can lose the report or deliver it twice.
- `turn_opening`: the reads a turn makes before its first step, one snapshot, one call
  (`turn_opening_and_history`: with the step's history read too).
- `drive_reads`: what a drive's context is built from (row, facts, `/mcp` state), one read.

Across sessions, a worker's recovery batch heals its sessions in one write
(`_recovery.recover_batch`) and writes its drives' first commits in one more
(`_first_writes.FirstWrites`), each session fenced by its own claim.

Every function here is synchronous and runs in a worker thread (`off_loop`): no transaction
ever spans an `await`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..events import CompactionEnded
from ..messages import Message
from ..store import (
    Admission,
    Claim,
    ClaimToken,
    Delivered,
    DrainStart,
    DriveReads,
    LocalStore,
    Prelude,
    TurnOpening,
    fence,
)

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..events import InputKind, SessionEvent, StoredEvent, TurnEnded
    from ..store import SessionRead, SessionWrite
    from ..store._claims import IsDead
    from ._refresh import KnownFacts


Opening = tuple[TurnOpening, int, list[tuple[int, Message]]]
"""What a turn reads before its first step: its `TurnOpening`, the compaction boundary and
the transcript after it (`turn_opening_and_history`)."""


@dataclass(slots=True)
class OpeningAhead:
    """Asks a unit that delivers a turn's input (`start_drain`, `promote_or_release`) to read
    that turn's opening last in it, as it leaves the session, answered with its commit
    (`read`, once the unit has ended; None: no turn started, or the session has a compaction
    and the turn reads its opening itself): a read of its own after the commit before (issue
    36 item 1)."""

    approval_types: Sequence[str]
    usage_window: int
    _sent: Callable[[], TurnOpening | None] | None = None
    _read: Opening | None = None

    def take(self, w: SessionWrite) -> None:
        """Send the opening's read through `w`, last in it (`read` reads it once it ended)."""
        self._sent = w.opening(self.approval_types, self.usage_window)

    @property
    def read(self) -> Opening | None:
        """The opening the unit read (None: not read, or the session has a compaction)."""
        if self._sent is not None:
            opening, self._sent = self._sent(), None
            if opening is not None and opening.history is not None:  # (boundary 0)
                self._read = opening, 0, opening.history
        return self._read


@dataclass(frozen=True, slots=True)
class StepWrite:
    """What a step boundary's unit did (`promote_step`): the items it delivered, whether it
    wrote the next step's receipt (`then`), and the transcript after `read_after` as it left
    it (None: not read)."""

    delivered: list[Delivered]
    wrote: bool
    history: list[tuple[int, Message]] | None = None


def start_drain(
    store: LocalStore,
    session_id: str,
    owner: str,
    lease_ms: int,
    is_dead: IsDead | None = None,
    *,
    start_turn: str,
    prelude: Prelude | None = None,
    opening: OpeningAhead | None = None,
) -> DrainStart:
    """Claim the session and start its next turn, in one unit.

    - A live driver holds the claim: nothing is written, `busy=True`.
    - The claim is free and nothing is deliverable: nothing is written (`claim=None`).
    - The claim is free: it is taken, the next inputs are promoted (steers, or one queued
      item: the session is idle) and, if they produced messages, `start_turn` starts with
      them (after `prelude`, an instruction delta planned before).
    - The claim is an orphan (expired lease, dead owner): it is taken over and nothing is
      promoted, because the earlier driver's calls and turn must be healed first.
    - The claim is free but a tool call is still `running` (its driver released the claim, or
      died after a release: nobody will settle it): the claim is taken, deliverable input or
      not, and nothing is promoted, so the drain settles the call before any new input.

    With `opening`, a delivery's turn has its opening read last in the unit (`OpeningAhead`).
    """
    with store.write(session_id) as w:
        state = w.claim_state()  # (the facts with it, under the lock: one round trip)
        facts = w.facts()  # (what the drive's `KnownFacts` compares)
        if not state.held and not state.running_call and not state.deliverable:
            return DrainStart(None, facts=facts)
        claim = w.take_claim(owner, lease_ms, is_dead)
        if claim is None:
            return DrainStart(None, busy=True, facts=facts)
        if claim.taken_over or state.running_call:  # heal first, deliver after
            return DrainStart(claim, facts=facts)
        delivered = w.promote(idle=True, start_turn=start_turn, prelude=prelude)
        if opening is not None and delivered:
            opening.take(w)
    wrote = _wrote(prelude, w)
    return DrainStart(claim, delivered=tuple(delivered), facts=facts, wrote_prelude=wrote)


def _wrote(prelude: Prelude | None, w: SessionWrite) -> bool:
    """Whether the ended unit `w` wrote `prelude` (its events are written as planned, the very
    objects, before a delivery at the seq it was planned at: `_inbox.plan_promotion`)."""
    return prelude is not None and any(s.event is prelude.events[0] for s in w.stored)


def promote_step(
    store: LocalStore,
    session_id: str,
    claim: ClaimToken | None,
    *,
    first: Sequence[SessionEvent] = (),
    first_blobs: Sequence[bytes] = (),
    prelude: Prelude | None = None,
    then: Sequence[SessionEvent] = (),
    then_blobs: Sequence[bytes] = (),
    known: KnownFacts | None = None,
    read_after: int | None = None,
) -> StepWrite:
    """A step boundary's one unit: `first` (the driver's held reply, with `first_blobs`:
    a pending first instruction delta's values), then the pending
    steers (after `prelude`, when they produce messages), then `then` (the next step's
    receipt, with `then_blobs`) only when nothing was delivered and the session's facts are
    still those `known` holds (`_refresh.py`: the agent, model or host entries the receipt was
    built for). `known` is given the facts the unit read with its lock; with `read_after`,
    the transcript after that seq is read last in the unit (`StepWrite.history`: the next
    step's history read, which would cost a transaction of its own after the commit).

    With nothing to write first or last and no pending item, nothing is locked or written:
    one read says so (on PostgreSQL the session lock alone would cost a commit and its WAL
    flush at every step boundary). An item admitted after that read is the next boundary's,
    as it would be had this one run a moment earlier."""
    if not first and not then:
        with store.read(session_id) as r:
            if known is None:
                pending = r.any_pending()
            else:
                pending, facts = r.pending_facts()
                known.noticed(facts)
            if not pending:
                return StepWrite([], False)
    with store.write(session_id, claim) as w:
        same = known.noticed(w.facts()) if known is not None else True
        w.append(first, first_blobs)
        delivered = w.promote(idle=False, prelude=prelude)
        wrote = bool(then) and not delivered and same
        if wrote:
            w.append(then, then_blobs)
        history = None if read_after is None else w.messages_after(read_after)
    return StepWrite(delivered, wrote, None if history is None else history())


def promote_idle(
    store: LocalStore,
    session_id: str,
    claim: ClaimToken | None,
    *,
    start_turn: str | None = None,
    prelude: Prelude | None = None,
) -> list[Delivered]:
    """Between turns: the next delivery (steers, or one queued item) and, when it produced
    messages or decisions, the turn `start_turn` it starts, after `prelude`; one unit. With no
    pending item, nothing is locked or written: one read says so (a write transaction would
    cost a commit). A drain ends through `promote_or_release` instead."""
    with store.read(session_id) as r:
        if not r.any_pending():
            return []
    with store.write(session_id, claim) as w:
        return w.promote(idle=True, start_turn=start_turn, prelude=prelude)


@dataclass(frozen=True, slots=True)
class IdleEnd:
    """What `promote_or_release` did: the items it delivered, or (none) whether it released
    the claim and whether an item is still pending (not deliverable now)."""

    delivered: list[Delivered]
    released: bool = False
    pending: bool = False
    wrote_prelude: bool = False  # the prelude went before the delivery (planned at its seq)


def promote_or_release(
    store: LocalStore,
    session_id: str,
    claim: ClaimToken | None,
    *,
    first: Sequence[SessionEvent] = (),
    start_turn: str | None = None,
    prelude: Prelude | None = None,
    known: KnownFacts | None = None,
    opening: OpeningAhead | None = None,
) -> IdleEnd:
    """Between turns, `first` (the turn that just completed: its end, with the reply held
    for it), then the drain's next delivery and the turn it starts (as `promote_idle`),
    or, when nothing is deliverable, the claim's release and a last look at the inbox: one
    unit either way. The end of a drain cost a read (nothing pending) and the release's own
    transaction, and the turn's end a commit of its own; the session lock the unit takes
    first keeps an admission out until it commits, as `claims.release_and_look` does, so an
    input admitted meanwhile is either delivered here or finds the claim free. With
    `opening`, the turn a delivery starts has its opening read last in the unit."""
    with store.write(session_id, claim) as w:
        # With nothing to write first (a worker's first delivery), the facts go with the lock
        # and the pending items: a promotion changes none of them, and read after it they
        # were a round trip of their own. After `first` they are read as it leaves them.
        facts = w.facts() if known is not None and not first else None
        w.append(first)  # (a prelude planned at the seq before it still goes: `promote`)
        delivered = w.promote(idle=True, start_turn=start_turn, prelude=prelude)
        look = None if delivered else w.release_and_look()  # the drain ends: no turn follows
        if delivered and known is not None:  # (the turn starting here is built from these)
            known.noticed(facts if facts is not None else w.facts())
        if delivered and opening is not None:
            opening.take(w)
    if look is not None:
        released, pending = look()
        return IdleEnd([], released, pending)
    return IdleEnd(delivered, wrote_prelude=_wrote(prelude, w))


def end_and_release(
    store: LocalStore, session_id: str, claim: Claim, first: Sequence[SessionEvent]
) -> tuple[bool, bool]:
    """A drain that stops before its last promotion (a shutdown between turns): `first`
    (the completed turn's end its port held) and the claim's release with a last look at the
    inbox, in one unit (`claims.release_and_look` with the end's write in it): whether it was
    released and whether an item waits. The end's append locks the session first."""
    with store.write(session_id, fence(claim)) as w:
        w.append(first)
        look = w.release_and_look()
    return look()


def end_child(
    store: LocalStore,
    child_id: str,
    end: TurnEnded,
    claim: ClaimToken | None,
    *,
    parent_id: str,
    input_id: str,
    kind: InputKind,
    payload: dict[str, JsonValue],
) -> Admission:
    """A background child's end: its `turn.ended` (fenced by its claim) and its report in
    the parent's inbox, in one unit, so no crash can lose the report. Admission is
    idempotent by `input_id` as usual; `NotFoundError` when the parent is gone."""
    with store.write(child_id, claim) as w:
        w.append([end])
        return w.admit(input_id, kind, payload, into=parent_id)


def turn_opening(
    store: LocalStore, session_id: str, approval_types: Sequence[str], usage_window: int
) -> TurnOpening:
    """What a turn reads before its first step (`TurnOpening`), in one read."""
    with store.read(session_id) as r:
        return r.opening(approval_types, usage_window)


def turn_opening_and_history(
    store: LocalStore, session_id: str, approval_types: Sequence[str], usage_window: int
) -> Opening:
    """`turn_opening`, and in the same read the transcript after the newest live compaction's
    boundary (`compaction_boundary`): what a turn's first step reads next, a read of its own
    before (issue 36 item 1); for a session without compactions in the opening's own round
    trip (`TurnOpening.history`). Returns the opening, the boundary and the messages after it."""
    with store.read(session_id) as r:
        return _opening(r, approval_types, usage_window)


def _opening(r: SessionRead, approval_types: Sequence[str], usage_window: int) -> Opening:
    """`turn_opening_and_history` through `r`."""
    opening = r.opening(approval_types, usage_window, history=True)
    boundary = compaction_boundary(opening.compactions)
    if opening.history is not None:  # no compaction: read with the rest (boundary 0)
        return opening, boundary, opening.history
    return opening, boundary, r.messages_after(boundary)


def compaction_boundary(compactions: Sequence[StoredEvent]) -> int:
    """The newest of the live `compaction.ended` events' `through_seq` (0: none): where a
    turn's active history starts."""
    last = compactions[-1].event if compactions else None
    return last.through_seq if isinstance(last, CompactionEnded) else 0


def drive_reads(store: LocalStore, session_id: str) -> DriveReads:
    """What a drive's context is built from (`DriveReads`: the row and the facts, the `/mcp`
    switches among them), in one read."""
    with store.read(session_id) as r:
        return r.drive()
