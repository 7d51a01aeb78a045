"""Units of work: one fenced write transaction on one session, one read of what a driver needs.

`SqlStore.write(session_id, claim)` opens a `SqlSessionWrite`: the writes made through it
(events and blobs, a promotion, an admission, taking or releasing the claim) commit together
when the block ends, or none of them does. Which writes share a unit, and why, is execution's
business (`wakeful.execution._writes`); the store only keeps each unit whole and fenced.

Events are buffered in the unit and written with one append when it ends (or before a write
that must see them), so a unit that appends, promotes and appends again costs one lock, one
claim check and one id reservation, as a single store method doing all three did. On
PostgreSQL the claim check and the reservation (`Tx.claim_and_ids`, `IDS_AHEAD` ids more than
the events buffered) are sent right after the unit's session lock, in its round trip, so
writing the events later costs none (it was a round trip of its own in every unit that read
something under the lock first); ids reserved and not written are left unused (a sequence
has gaps anyway). Nothing the unit wrote commits unless the claim was live when it was read,
after the lock was granted, as before. A claim the unit takes itself needs no check.

The unit is synchronous: it lives in one worker thread and never spans an `await`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Literal

from ..errors import NotFoundError
from . import _inbox, _transcript
from ._append import ClaimToken, append_events, check_claim_row, put_blobs_in
from ._backend import Pending, Row, Rows, Tx
from ._claims import (
    IsDead,
    claim_in,
    claim_query,
    fence,
    read_claim,
    release_query,
    running_call_query,
)
from ._facts import SessionFacts, facts_from, facts_query
from ._feed import last_position_query, position_from
from ._opening import TurnOpening, opening_in, send_opening
from ._reads import instruction_state_of, instruction_state_sql, recent_events_in
from ._records import (
    Admission,
    Claim,
    ClaimState,
    Delivered,
    DriveReads,
    InboxItem,
    Prelude,
    row_cols,
    session_row,
)
from ._search import index_deliveries

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..clock import Clock
    from ..events import Delivery, InputKind, SessionEvent, StoredEvent
    from ..messages import Message
    from ._backend import Backend


# Event ids reserved with the unit's lock beyond the events it has buffered by then (a step
# boundary's unit writes up to ~7 events after its lock: the reply, its calls, the receipt).
IDS_AHEAD = 8


class SqlSessionWrite:
    """A `SessionWrite` over one open write transaction of a `SqlStore` (see the module)."""

    def __init__(self, tx: Tx, session_id: str, claim: ClaimToken | None, now_ms: int) -> None:
        self._tx = tx
        self._sid = session_id
        self._claim = claim
        self._now = now_ms
        self._events: list[SessionEvent] = []
        self._named: dict[str, Message] = {}
        self._locked: Row | None = None  # the session lock's row, while nothing changed it
        self._claim_row: Row | None | Literal[False] = False  # `claim_state`'s (False: none)
        self._pending: list[InboxItem] | None = None  # read with the lock by `facts`
        self._facts: SessionFacts | None = None
        # Sent with the first lock (PostgreSQL): the claim row and ids (`_send_lock`).
        self._reserved: Pending | None = None
        self._reserved_claim = False  # `_reserved` is `claim_and_ids`' (else `event_ids`')
        self._ids: list[int] = []  # reserved ids not written yet
        self._checked = False  # the claim was checked under the lock (or taken by the unit)
        self.stored: list[StoredEvent] = []
        """The events this unit wrote, as stored (complete once the unit has ended)."""

    @property
    def session_id(self) -> str:
        """The session this unit writes."""
        return self._sid

    @property
    def claim(self) -> ClaimToken | None:
        """The claim this unit's writes are fenced by (None: unfenced)."""
        return self._claim

    def append(self, events: Sequence[SessionEvent], blobs: Sequence[bytes] = ()) -> None:
        """Write `events` after what the unit wrote so far, and store `blobs` (once, by
        digest) referenced by the session, in the unit's transaction."""
        self._events.extend(events)
        if blobs:
            put_blobs_in(self._tx, blobs, self._sid, self._now)

    def promote(
        self,
        *,
        idle: bool,
        input_id: str | None = None,
        start_turn: str | None = None,
        prelude: Prelude | None = None,
    ) -> list[Delivered]:
        """Deliver the next inbox items (steers in order; one queued item when `idle`; only
        `input_id` when given) after what the unit wrote so far; with `start_turn`, a delivery
        of messages or decisions starts that turn; a `prelude` planned at the session's seq as
        this unit found it goes just before delivered messages (`_inbox.plan_promotion`)."""
        if self._locked is None:
            lock = self._send_lock()
            self._locked, pending = _inbox.lock_with_pending(self._tx, self._sid, lock)
        elif self._pending is not None:  # read with the lock (`facts`), nothing changed since
            pending = self._pending
        else:
            pending = _inbox.pending_items(self._tx, self._sid)
        self._pending = None
        planned = _inbox.plan_promotion(
            self._tx,
            self._sid,
            self._now,
            self._locked,
            pending,
            idle=idle,
            input_id=input_id,
            start_turn=start_turn,
            prelude=prelude,
        )
        self._events.extend(planned.events)
        self._named.update(planned.named)
        return planned.delivered

    def admit(
        self,
        input_id: str,
        kind: InputKind,
        payload: dict[str, JsonValue],
        delivery: Delivery = "steer",
        *,
        into: str | None = None,
    ) -> Admission:
        """Admit an input to this session's inbox (or to the session `into`, unfenced, as any
        admission is), idempotent by `input_id`; `NotFoundError` for an unknown session."""
        target = into or self._sid
        if target == self._sid:
            self.flush()
        admitted = _inbox.admit_in(self._tx, target, input_id, kind, payload, delivery, self._now)
        if admitted is None:
            raise NotFoundError(f"no session {target}")
        if target == self._sid:
            self._locked = self._pending = None  # the admission moved the session's seq
            self._ids = []  # (its event took a newer id: later events take newer ones still)
        return Admission(*admitted)

    def facts(self) -> SessionFacts:
        """The session's agent, model and host instruction entries (`SessionFacts`), read under
        this unit's lock. Asked first in the unit, they travel in the lock's round trip with
        the pending items the unit's `promote` reads next; `NotFoundError` for an unknown
        session."""
        if self._facts is None:
            if self._locked is None:
                lock = self._send_lock()
                sent = facts_query(self._tx, self._sid)
                self._locked, self._pending = _inbox.lock_with_pending(self._tx, self._sid, lock)
            else:
                sent = facts_query(self._tx, self._sid)
            found = facts_from(sent)
            if found is None:
                raise NotFoundError(f"no session {self._sid}")
            self._facts = found
        return self._facts

    def claim_state(self) -> ClaimState:
        """Lock the session and read how its claim and work stand (`ClaimState`), and its
        facts (`facts` then reads nothing): what a drain's start reads under the lock, sent
        together (the lock, the facts, the pending items, the claim, a running call: one
        round trip where there were four); the session's status is the lock's row's."""
        tx, sid = self._tx, self._sid
        lock = self._send_lock() if self._locked is None else None
        facts = facts_query(tx, sid) if self._facts is None else None
        claim = claim_query(tx, sid)
        running = running_call_query(tx, sid)
        locked, pending = self._locked, self._pending
        if locked is None or pending is None:
            locked, pending = _inbox.lock_with_pending(tx, sid, lock)
        self._locked, self._pending = locked, pending
        if facts is not None:
            self._facts = facts_from(facts)
            if self._facts is None:
                raise NotFoundError(f"no session {sid}")
        row = self._claim_row = claim.one()
        held = row is not None and not row[3]
        call = not held and running.one() is not None
        ready = not held and not call and _inbox.deliverable(locked, pending, idle=True)
        return ClaimState(held=held, running_call=call, deliverable=ready)

    def take_claim(self, owner: str, lease_ms: int, is_dead: IsDead | None = None) -> Claim | None:
        """Take the session's claim for `owner` (None when a live driver holds it); the unit's
        later writes are fenced by it. A released claim is retaken with attempts reset; an
        expired or dead owner's claim is taken over (`taken_over=True`, attempts + 1)."""
        self.flush()  # what the unit wrote before goes under the claim it had
        self._lock()
        row = self._claim_row if self._claim_row is not False else read_claim(self._tx, self._sid)
        self._claim_row = False
        claim = claim_in(self._tx, self._sid, row, owner, lease_ms, self._now, is_dead)
        if claim is not None:
            self._claim = fence(claim)
            self._checked = True  # (this transaction wrote it)
        return claim

    def release_and_look(self) -> Callable[[], tuple[bool, bool]]:
        """Release the unit's claim (when it is still the session's) and look at the inbox as
        the unit leaves it, read last in the unit: once it has ended, the returned function
        says whether the claim was released and whether an item is pending (on PostgreSQL
        both answered with the commit, no round trip of their own; two before)."""
        self.flush()  # what the unit wrote goes first, under the claim it releases
        claim = self._claim
        released = None if claim is None else release_query(self._tx, self._sid, claim)
        look = self._tx.query(_inbox.ANY_PENDING_SQL, (self._sid, self._sid))

        def answer() -> tuple[bool, bool]:
            return released is not None and released.one() is not None, bool(
                _inbox.any_pending_in(look)
            )

        return answer

    def _send_lock(self) -> Pending:
        """Send the session lock; the first time, on PostgreSQL, with the claim check and the
        ids the unit's events will take right after it (see the module)."""
        lock = self._tx.lock_query(self._sid)
        if self._reserved is None and self._tx.kind == "postgres":
            n = len(self._events) + IDS_AHEAD
            if self._claim is not None and not self._checked:
                self._reserved = self._tx.claim_and_ids(self._sid, n)
                self._reserved_claim = True
            else:
                self._reserved = self._tx.event_ids(n)
        return lock

    def _take_ids(self, n: int) -> Pending | None:
        """`n` of the ids reserved with the lock (the claim checked first, when it was read
        with them), or None when fewer are left (the append reserves its own)."""
        if self._reserved is not None:
            rows, self._reserved = self._reserved.all(), Rows([])
            if not self._reserved_claim:
                self._ids = [int(r[0]) for r in rows]
            else:  # (one row, the ids a list)
                if self._claim is not None and not self._checked:
                    check_claim_row(self._sid, self._claim, rows[0])
                    self._checked = True
                self._ids = [int(i) for i in rows[0][3]]
                self._reserved_claim = False
        if len(self._ids) < n:
            return None
        taken, self._ids = self._ids[:n], self._ids[n:]
        return Rows([(i,) for i in taken])

    def _lock(self) -> Row:
        if self._locked is None:
            self._locked = self._send_lock().one()
            if self._locked is None:
                raise NotFoundError(f"no session {self._sid}")
        return self._locked

    def opening(
        self, approval_types: Sequence[str], usage_window: int
    ) -> Callable[[], TurnOpening | None]:
        """What a turn reads before its first step (`TurnOpening`, its history included) as
        this unit leaves the session (what it wrote so far included), read last in the unit:
        once it has ended, the returned function gives it (on PostgreSQL answered with the
        commit); None for a session with a compaction (read it after the unit)."""
        self.flush()
        sent = send_opening(self._tx, self._sid, approval_types, usage_window, history=True)
        return sent.read_uncompacted

    def messages_after(self, seq: int) -> Callable[[], list[tuple[int, Message]]]:
        """The transcript's messages after `seq` as this unit leaves it (what it wrote so far
        included), each with its `seq`, read last in the unit: once it has ended, the
        returned function gives them (on PostgreSQL answered with the commit: a read the
        caller would otherwise make after the commit, in a transaction of its own)."""
        self.flush()
        sent = _transcript.transcript_query(self._tx, self._sid, seq)
        return partial(_transcript.transcript_from, self._tx, self._sid, sent)

    def flush(self) -> None:
        """Write the buffered events now (fenced by the unit's claim), in the transaction."""
        if not self._events:
            return
        events, self._events = self._events, []
        ids = self._take_ids(len(events))
        stored = append_events(
            self._tx,
            self._sid,
            events,
            self._now,
            self._claim,
            locked=self._locked,
            ids=ids,
            checked=self._checked,
        )
        self._locked = self._pending = None  # the session row moved on
        if self._named:
            index_deliveries(self._tx, self._sid, stored, self._named)
            self._named = {}
        self.stored.extend(stored)


class SqlSessionRead:
    """A `SessionRead` over one read transaction of a `SqlStore`, in one worker-thread call
    (SQLite: one snapshot; PostgreSQL: a batched read, each statement its own snapshot, the
    statements of `opening` in one round trip: docs/store.md, "Transactions and locking")."""

    def __init__(self, tx: Tx, session_id: str, kind: str) -> None:
        self._tx = tx
        self._sid = session_id
        self._kind = kind  # the backend's (`Backend.kind`)

    @property
    def session_id(self) -> str:
        """The session this read is of."""
        return self._sid

    def opening(
        self, approval_types: Sequence[str], usage_window: int, *, history: bool = False
    ) -> TurnOpening:
        """What a turn reads before its first step (`TurnOpening`), batched; with `history`,
        the transcript too when the session has no compaction (`TurnOpening.history`)."""
        return opening_in(self._tx, self._sid, approval_types, usage_window, history=history)

    def recent_events(self, window: int, types: Sequence[str]) -> list[StoredEvent]:
        """The events of `types` among the session's newest `window` events, in order (one
        statement); `NotFoundError` for an unknown session."""
        return recent_events_in(self._tx, self._sid, window, types)

    def any_pending(self) -> bool:
        """Whether the inbox holds a pending item; `NotFoundError` for an unknown session."""
        found = _inbox.any_pending(self._tx, self._sid)
        if found is None:
            raise NotFoundError(f"no session {self._sid}")
        return found

    def pending(self) -> list[InboxItem]:
        """Pending inbox items in enqueue order."""
        return _inbox.pending_items(self._tx, self._sid)

    def facts(self) -> SessionFacts:
        """The session's agent, model and host instruction entries (`SessionFacts`);
        `NotFoundError` for an unknown session."""
        found = facts_from(facts_query(self._tx, self._sid))
        if found is None:
            raise NotFoundError(f"no session {self._sid}")
        return found

    def pending_facts(self) -> tuple[bool, SessionFacts]:
        """`any_pending` and the session's facts (`SessionFacts`), in one round trip."""
        sent = self._tx.query(_inbox.ANY_PENDING_SQL, (self._sid, self._sid))
        facts = facts_query(self._tx, self._sid)
        found = _inbox.any_pending_in(sent)
        seen = facts_from(facts)
        if found is None or seen is None:
            raise NotFoundError(f"no session {self._sid}")
        return found, seen

    def messages_after(self, seq: int) -> list[tuple[int, Message]]:
        """The transcript's messages stored after `seq`, each with its `seq`."""
        return _transcript.transcript_in(self._tx, self._sid, seq, None)

    def drive(self) -> DriveReads:
        """The session's row as stored and its facts, the `/mcp` switches among them, its
        instruction state and the log's newest event id (`DriveReads`), sent together: one
        round trip; `NotFoundError` for an unknown session. (Five reads of their own before:
        the row, the facts, the switches, the instruction state, the newest event id.)"""
        row = self._tx.query(
            f"SELECT {row_cols(self._tx.kind)} FROM sessions WHERE id = ?", (self._sid,)
        )
        facts = facts_query(self._tx, self._sid)
        state = self._tx.query(instruction_state_sql(self._tx.kind, "s.id = ?"), (self._sid,))
        newest = last_position_query(self._tx, self._kind)
        found, seen, states = row.one(), facts_from(facts), state.all()
        if found is None or seen is None or not states:
            raise NotFoundError(f"no session {self._sid}")
        instructions = instruction_state_of([r[1:] for r in states])
        return DriveReads(session_row(found), seen, instructions, position_from(newest.one())[1])


@contextmanager
def session_write(
    backend: Backend, clock: Clock, session_id: str, claim: ClaimToken | None
) -> Iterator[SqlSessionWrite]:
    """Open a write unit on `session_id` under `claim` (see the module docstring)."""
    with backend.transaction(write=True) as tx:
        unit = SqlSessionWrite(tx, session_id, claim, clock.now_ms())
        yield unit
        unit.flush()


@contextmanager
def session_read(backend: Backend, session_id: str) -> Iterator[SqlSessionRead]:
    """Open a read unit of `session_id` (batched where the backend can)."""
    with backend.transaction(write=False, batched=True) as tx:
        yield SqlSessionRead(tx, session_id, backend.kind)
