"""`StorePort`: the session port over the store, opened by a drain with its claim.

Every store call runs in a worker thread (`off_loop`, `_off_loop.py`), never on the event loop: the
store is synchronous (SQLite, and psycopg's pooled connections on PostgreSQL), and one
session's fsync or round trip must not stall the other sessions this process drives, nor the
lease keeper (`docs/port.md` has the measurements behind this choice). Writes carry the
drain's claim (fenced, invariant 5); the held events go first in the next write; section
blobs are sent once per port; live events go to the runtime's listener; a background child's
end commits with its report (`settle`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from ..errors import NotFoundError, StoreError
from ..events import (
    CompactionEnded,
    CompactionTail,
    SessionEvent,
    StoredEvent,
    ToolCallEnded,
    TurnEnded,
    UsageRecorded,
)
from ..instructions import Baseline, InstructionSync, Source, epoch_snapshot
from ..messages import Message
from ..runner import (
    APPROVAL_TYPES,
    LOOKBACK_EVENTS,
    ApprovalLog,
    HeldEvents,
    LiveEvent,
    LiveKind,
    LiveListener,
    RunContext,
    TurnResult,
    fold_approvals,
)
from ..runner._tail import hide_point
from ..store import (
    ClaimToken,
    Delivered,
    DriveReads,
    InboxItem,
    InstructionState,
    LocalStore,
    Prelude,
    RetryState,
    TurnOpening,
)
from ._first_writes import FirstWrites
from ._off_loop import off_loop
from ._refresh import KnownFacts
from ._writes import (
    OpeningAhead,
    compaction_boundary,
    promote_step,
    turn_opening_and_history,
)

Opened = tuple[TurnOpening, int, list[tuple[int, Message]]]
"""A turn's opening read ahead (a worker's batch recovery): the opening, the compaction
boundary and the transcript's messages after it (`_writes.turn_opening_and_history`)."""

Settle = Callable[[TurnEnded, TurnResult, ClaimToken | None], Awaitable[None]]
"""Writes a turn's `turn.ended` (fenced by the claim it is given) together with what must
commit with it (a background child's report to its parent)."""


@dataclass(frozen=True, slots=True)
class PortHooks:
    """What a driver's port does besides the store: publish live events, settle a turn."""

    listener: LiveListener | None = None
    settle: Settle | None = None


@dataclass(frozen=True, slots=True)
class SessionSetup:
    """How a driver runs a session here: the turn's dependencies, its port's hooks, and what
    the drive knows of the session's agent, model and host entries (`_refresh.KnownFacts`,
    kept current by the drive's units of work), and the read the context was built from
    (`DriveReads`: the drain plans its first instruction delta from its instruction state,
    the coordinator starts its interrupt watching at its newest event id)."""

    ctx: RunContext
    hooks: PortHooks = PortHooks()
    known: KnownFacts | None = None
    read: DriveReads | None = None  # what the context was built from (None: not told)


class StorePort(HeldEvents):
    """The `SessionPort` of one session over `store`, under `claim` (see the module docstring)."""

    def __init__(
        self,
        store: LocalStore,
        session_id: str,
        claim: ClaimToken | None,
        *,
        sources: Sequence[Source] = (),
        hooks: PortHooks | None = None,
        known: KnownFacts | None = None,
        sync: InstructionSync | None = None,
        opened: Opened | None = None,
        hold_end: bool = False,
        first: FirstWrites | None = None,
    ) -> None:
        self.store = store
        self.claim = claim
        self._sid = session_id
        self._hooks = hooks or PortHooks()
        # A completed turn's end (with the reply held for it) is kept for the drain's next
        # unit (`hold_end`: the drain's port; `ended`), and the live events published
        # meanwhile wait for it to commit: a hook or a stream that reads the store on
        # `turn_end` finds the turn ended (`end_written`).
        self._hold_end = hold_end
        self._end: list[SessionEvent] = []
        self._queued: list[LiveEvent] = []
        self._known = known  # given the facts each step boundary's unit reads
        self._sync = sync or InstructionSync(store, session_id, sources)
        super().__init__()
        self._stored_blobs: set[str] = set()  # digests this port already stored
        # A session's first instruction delta, planned by this port's sync and written first
        # in the port's next write (`instructions`); unlike held events, never dropped.
        self._delta: tuple[list[SessionEvent], list[bytes]] | None = None
        # Reads made ahead, each handed out once and dropped at this port's next write (a read
        # ahead of a write would miss it): the transcript's next read, made by a step
        # boundary's promotion (`_promote`: (after, messages)), and what `approvals` read with
        # the turn's other opening reads (`_writes.turn_opening`), by the read it answers.
        self._next_after: int | None = None  # the `after` of the history's next read
        self._ahead: tuple[int, list[tuple[int, Message]]] | None = None
        self._opening: dict[str, object] = {}
        self._read_opening = opened  # the first turn's opening, read ahead (`approvals`)
        # A recovery batch's drive: its first commit goes with the batch's (`FirstWrites`).
        self._first = first

    @property
    def session_id(self) -> str:
        """The session this port serves."""
        return self._sid

    # -- writes -------------------------------------------------------------------------------

    async def commit(
        self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes] | None = None
    ) -> None:
        """Write the held events, then `events` and `blobs` (by SHA-256 digest) not stored by
        this port yet, in one fenced transaction."""
        fresh = {d: b for d, b in (blobs or {}).items() if d not in self._stored_blobs}
        if not (self.holding or events or fresh or self._delta or self._end):
            return
        self._drop_reads_ahead()
        blob_list = [*self._delta_blobs(), *fresh.values()]
        if self._first is not None:  # with the first commits of its recovery batch
            first, self._first = self._first, None
            await first.write(self._sid, self._with_held(events), self.claim, blob_list)
        else:
            await off_loop(
                self.store.append, self._sid, self._with_held(events), self.claim, blobs=blob_list
            )
        self._written_held()
        self._flush_queued()
        self._stored_blobs.update(fresh)
        if any(isinstance(e, CompactionEnded) for e in events):
            self._sync.forget()  # a new epoch: its baseline is read from the store

    async def recommit(
        self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes] | None = None
    ) -> None:
        """`commit` again, unless an earlier try committed after all (its calls ended)."""
        ended = {(e.message_id, e.call_id) for e in events if isinstance(e, ToolCallEnded)}
        calls = await off_loop(self.store.tool_calls, self._sid)
        if any((c.message_id, c.call_id) in ended and c.status != "running" for c in calls):
            self._written_held()  # they went with it
            return
        await self.commit(events, blobs)

    async def promote_steers(self, epoch: int) -> list[Delivered]:
        """Held events, the instruction delta and the pending steers, in one transaction; in
        the same thread hop, the transcript's next read is made ahead (`messages_after`)."""
        return (await self.promote_steers_then(epoch, (), {}))[0]

    async def promote_steers_then(
        self, epoch: int, then: Sequence[SessionEvent], then_blobs: Mapping[str, bytes]
    ) -> tuple[list[Delivered], bool]:
        """`promote_steers`, with `then` (the next step's receipt) last in its transaction
        when nothing is delivered and the instruction sources read as at the last sync."""
        self._drop_reads_ahead()
        self.leave_batch()
        fresh = {d: b for d, b in then_blobs.items() if d not in self._stored_blobs}
        delivered, wrote = await off_loop(self._promote, epoch, then, list(fresh.values()))
        self._flush_queued()
        if wrote:
            self._stored_blobs.update(fresh)
        return delivered, wrote

    def prelude(self, epoch: int = 0, state: InstructionState | None = None) -> Prelude | None:
        """The instruction delta to write before the next idle delivery (`InstructionSync.prelude`
        of this port's sync, blocking: the drain runs it `off_loop`; `state`: planned from it,
        read ahead). The drain's turns and its idle promotions share the one sync, so a delta
        the turn's last sync found (or not) is not planned again from the store when the
        sources still read the same."""
        return self._sync.prelude(epoch, state)

    def prelude_written(self, prelude: Prelude) -> None:
        """`prelude` (from `prelude`) was written with a delivery: a session's first delta
        is then rendered by the next step without being read back (`InstructionSync.wrote`)."""
        self._sync.wrote(prelude)

    def _promote(
        self, epoch: int, then: Sequence[SessionEvent], then_blobs: list[bytes]
    ) -> tuple[list[Delivered], bool]:
        if then and self._sync.unchanged(epoch) is not None:
            prelude = None  # the sources read as at the last sync: no delta (`prelude` agrees)
        else:  # a source changed: the next step is built after the delta, not ahead
            then, then_blobs = (), []
            prelude = self._sync.prelude(epoch)
        after = self._next_after  # the step's history read comes next: made in the unit
        done = promote_step(
            self.store,
            self._sid,
            self.claim,
            first=self._with_held(()),
            first_blobs=self._delta_blobs(),
            prelude=prelude,
            then=then,
            then_blobs=then_blobs,
            known=self._known,
            read_after=after,
        )
        self._written_held()
        if after is not None and done.history is not None:
            self._ahead = (after, done.history)
        elif after is not None:  # nothing was written: read it now (a hop saved, not a read)
            with contextlib.suppress(StoreError):  # (else read when asked)
                self._ahead = (after, self.store.messages_with_seq(self._sid, after))
        return done.delivered, done.wrote

    async def end(self, end: TurnEnded, result: TurnResult) -> None:
        """The held events, then the turn's end (through `settle` when the driver has one).
        A completed turn's, on a port that holds ends (the drain's), is kept with the held
        events for the drain's next unit (`ended`): one commit per drive less."""
        self._drop_reads_ahead()
        self.leave_batch()  # (its end is written through the drain's next unit, or settled)
        if self._hooks.settle is None and self._hold_end and end.outcome == "completed":
            self._end = self._with_held([end])
            super()._written_held()  # (now in `_end`; the delta too, if any was pending)
            self._delta = None
            return
        if self._hooks.settle is None:
            await self.commit([end])
            return
        await self.commit([])
        await self._hooks.settle(end, result, self.claim)

    def leave_batch(self) -> None:
        """This port's next write is not a plain commit (or none comes): its recovery batch's
        other first commits stop waiting for it (`FirstWrites.leave`)."""
        if self._first is not None:
            first, self._first = self._first, None
            first.leave(self._sid)

    @property
    def ended(self) -> list[SessionEvent]:
        """A completed turn's end held by `end` (with the events held for it), for the
        drain's next unit to write first; call `end_written` once it committed. Empty: none."""
        return list(self._end)

    def end_written(self) -> None:
        """The unit carrying `ended` committed: the live events held back since go out."""
        self._end = []
        self._flush_queued()

    def drop_end(self) -> None:
        """Forget a held turn end that will not be written (the drain stops on an error: the
        turn stays open for recovery), and the live events held back for it."""
        self._end, self._queued = [], []

    def _flush_queued(self) -> None:
        """Publish the live events held back for a turn end that has committed (on the loop)."""
        if self._end or not self._queued:
            return
        queued, self._queued = self._queued, []
        for event in queued:
            self._emit(event)

    def _with_held(self, events: Sequence[SessionEvent]) -> list[SessionEvent]:
        """What a write sends: a held turn end, the pending first delta, the held events,
        then `events`."""
        delta = self._delta[0] if self._delta else ()
        return [*self._end, *delta, *super()._with_held(events)]

    def _written_held(self) -> None:
        """A write carrying the held events (and the pending delta, a held end) committed."""
        super()._written_held()
        self._delta = None
        self._end = []  # (the live events it held back go out on the loop: `_flush_queued`)

    def _delta_blobs(self) -> list[bytes]:
        return self._delta[1] if self._delta else []

    def _hold_delta(self, events: Sequence[SessionEvent], blobs: Sequence[bytes]) -> None:
        self._delta = (list(events), list(blobs))

    def _drop_reads_ahead(self) -> None:
        """A write through this port is coming: what was read ahead of it would miss it."""
        self._ahead = None
        self._opening.clear()
        self._read_opening = None

    def opening_ahead(self) -> OpeningAhead:
        """What asks a unit delivering the next turn's input to read that turn's opening (the
        one `approvals` reads first); give it to `read_ahead` after the unit."""
        return OpeningAhead(APPROVAL_TYPES, LOOKBACK_EVENTS)

    def read_ahead(self, ahead: OpeningAhead) -> None:
        """The opening `ahead` read in a unit that delivered the next turn's input (if it did):
        the turn's `approvals` takes it instead of a read of its own."""
        if ahead.read is not None:
            self._read_opening = ahead.read

    def publish(self, kind: LiveKind, data: dict[str, JsonValue]) -> None:
        """Hand a live event to the runtime's listener, if any (after a held turn end has
        committed: `end_written`)."""
        listener = self._hooks.listener
        if listener is None:
            return
        event = LiveEvent(self._sid, kind, data)
        if self._end:
            self._queued.append(event)
        else:
            listener(event)

    def _emit(self, event: LiveEvent) -> None:
        if self._hooks.listener is not None:
            self._hooks.listener(event)

    # -- reads --------------------------------------------------------------------------------

    async def messages_after(self, seq: int) -> list[tuple[int, Message]]:
        """The transcript's messages stored after `seq` (read ahead by the step boundary's
        promotion when nothing was written through this port since)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == seq:
            found = ahead[1]
        else:
            found = await off_loop(self.store.messages_with_seq, self._sid, seq)
        self._next_after = found[-1][0] if found else seq
        return found

    async def compaction_boundary(self) -> int:
        """The newest compaction's `through_seq` (0: none); a compaction whose summary a
        rewind or history edit hid does not count (`docs/rewind.md`)."""
        ended = self._opened("compactions")
        if ended is None:
            ended = await off_loop(self.store.live_compactions, self._sid)
        return compaction_boundary(ended)

    async def tail_boundary(self) -> tuple[int, str] | None:
        """The newest `compaction.tail`'s seq and hide point (None: none)."""
        found = self._opened("tails")
        if found is None:
            found = await off_loop(self.store.events, self._sid, 0, None, ["compaction.tail"])
        last = found[-1] if found else None
        if last is None or not isinstance(last.event, CompactionTail):
            return None
        return last.seq, hide_point(last.event.hide_before_id, last.event.media)

    async def recent_usage(self, window: int) -> list[tuple[int, UsageRecorded]]:
        """The `usage.recorded` events among the newest `window` events (one statement)."""
        found = self._opened("usage") if window == LOOKBACK_EVENTS else None
        if found is None:
            found = await off_loop(self._recent, window, ["usage.recorded"])
        return [(s.seq, s.event) for s in found if isinstance(s.event, UsageRecorded)]

    def _recent(self, window: int, types: Sequence[str]) -> list[StoredEvent]:
        with self.store.read(self._sid) as r:
            return r.recent_events(window, types)

    async def message(self, message_id: str) -> Message | None:
        """One message of the transcript by id."""
        messages = await off_loop(self.store.messages, self._sid)
        return next((m for m in messages if m.id == message_id), None)

    async def blob(self, digest: str) -> bytes | None:
        """The bytes of a stored blob, None when the store lacks it."""
        try:
            return await off_loop(self.store.get_blob, digest)
        except NotFoundError:
            return None

    async def pending(self) -> list[InboxItem]:
        """Pending inbox items in enqueue order."""
        return await off_loop(self.store.pending, self._sid)

    async def retry_state(self) -> RetryState | None:
        """The session's scheduled retry, if any."""
        if "retry" in self._opening:
            retry = self._opening.pop("retry")
            assert retry is None or isinstance(retry, RetryState)
            return retry
        return await off_loop(self.store.retry_state, self._sid)

    async def work_state(self) -> dict[str, JsonValue]:
        """The session's work state, by kind."""
        if "work" in self._opening:
            work = self._opening.pop("work")
            assert isinstance(work, dict)
            return work
        return await off_loop(self.store.work_state, self._sid)

    async def approvals(self) -> ApprovalLog:
        """The open approval step and the session's `always` grants.

        A turn reads this first, so the reads its first step makes next (retry state, work
        state, compaction boundary and tail, recent usage) are read with it, in one store call
        (`_writes.turn_opening`), and handed out by those reads, each once. Nothing those
        reads return changes without a write of this port's claim (the driver's own; an
        instruction delta touches none of them), so each part is dropped at this port's next
        write and read from the store again after it."""
        log, opening = await off_loop(self._open)
        self._opening = {
            "retry": opening.retry,
            "work": opening.work,
            "tails": opening.tails,
            "compactions": opening.compactions,
            "usage": opening.usage,
        }
        return log

    def _open(self) -> tuple[ApprovalLog, TurnOpening]:
        opened, self._read_opening = self._read_opening, None
        opening, boundary, history = opened or turn_opening_and_history(
            self.store, self._sid, APPROVAL_TYPES, LOOKBACK_EVENTS
        )
        self._ahead = (boundary, history)  # the first step's history read, from the boundary
        log = fold_approvals(
            opening.approvals, lambda: {c.message_id for c in self.store.tool_calls(self._sid)}
        )
        return log, opening

    def _opened(self, part: str) -> list[StoredEvent] | None:
        """The events `part` of the turn's opening read, once (None: read the store)."""
        found = self._opening.pop(part, None)
        assert found is None or isinstance(found, list)
        return found

    async def instructions(self, epoch: int) -> Baseline:
        """The baseline to render, after a fenced delta when a source changed. The sources are
        read here every step (small files); only a change goes to the store, in a thread."""
        unchanged = self._sync.unchanged(epoch)
        if unchanged is not None:
            return unchanged
        # A session's first delta (no text, no message) is held for the step's receipt
        # (`_hold_delta`); a delta the sync wrote may be a message: the history read ahead
        # misses it (the opening's other parts are none of its business, see `approvals`).
        base = await off_loop(self._sync, self.claim, epoch, self._hold_delta)
        if self._sync.appended:
            self._ahead = None
        return base

    def instructions_unchanged(self, epoch: int) -> Baseline | None:
        """The baseline of the last sync when the sources still read the same (no store call;
        the sources are read in the caller's thread, as `instructions` reads them)."""
        return self._sync.unchanged(epoch)

    async def instruction_snapshot(self) -> dict[str, str] | None:
        """The values a new epoch starts from (after the pending first delta is written)."""
        if self._delta is not None:
            await self.commit([])
        return await off_loop(epoch_snapshot, self.store, self._sid)

    def use_sources(self, sources: Sequence[Source]) -> None:
        """Read `sources` from the next step on (`InstructionSync.use`)."""
        self._sync.use(sources)
