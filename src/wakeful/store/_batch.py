"""Many sessions in one transaction: what a worker's batch recovery reads and writes.

A worker takes over a batch of orphaned claims in one transaction (`claims.take_over`). For
that batch, `recovery_views` reads what recovery decides from (transcript, tool calls, turns,
approval events, delegation) for every session in one read transaction, and `append_batch`
writes every session's healing and continuation events in one write transaction: one commit
per batch instead of several per session (docs/execution.md, "Scaling").

Invariant kept: each session's events are fenced by that session's own claim in the same
transaction (invariant 5); a session whose claim is gone is left out, never written. Sessions
are locked in id order, so two batches never wait on each other in a cycle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ClaimLostError, NotFoundError
from ._append import ClaimToken, append_events, put_blobs_in
from ._backend import Row, iter_chunks
from ._facts import facts_of, facts_sql
from ._feed import last_position_query, position_from
from ._opening import TurnOpening, send_opening
from ._reads import (
    EVENT_COLS,
    TOOL_CALL_COLS,
    TURN_COLS,
    ToolCallRow,
    TurnRow,
    instruction_state_of,
    instruction_state_sql,
    stored_event,
    tool_call_row,
    turn_row,
)
from ._records import DriveReads, InstructionState, row_cols, session_row
from ._transcript import transcripts_in
from ._typed_events import types_in

if TYPE_CHECKING:
    from ..clock import Clock
    from ..events import SessionEvent, StoredEvent
    from ..messages import Message
    from ._backend import Backend, Pending, Tx


@dataclass(frozen=True, slots=True)
class RecoveryView:
    """One session as recovery reads it, all from one snapshot: its transcript with each
    message's `seq`, its tool calls and turns (start order), its events of the requested
    types, its parent (None: top level) and its first event (`session.created`); and what its
    drive reads first: its row and facts (`drive`, as `SessionRead.drive` reads them) and its
    instruction state (`instructions`, as `instruction_state` reads it), which only the
    claim's driver changes (a rewind is refused while the session is driven)."""

    messages: list[tuple[int, Message]]
    calls: list[ToolCallRow]
    turns: list[TurnRow]
    events: list[StoredEvent]
    parent_id: str | None
    created: StoredEvent | None
    drive: DriveReads
    instructions: InstructionState


class BatchMixin:
    """Batch reads and writes of `SqlStore` (see the module docstring)."""

    backend: Backend
    clock: Clock

    def recovery_views(
        self, session_ids: Sequence[str], types: Sequence[str] = ()
    ) -> dict[str, RecoveryView]:
        """Each named session as recovery reads it (`RecoveryView`; `types` are the event
        types to read), in one read of eight statements per 500 sessions (each kind of row
        for all of them at once, not a statement per session; on PostgreSQL sent together, one
        round trip, a second when a transcript holds delivered inputs), with the instance-wide
        log's newest event id (each view's `drive.newest_event`: where the interrupt watching
        of the batch's drives starts; a read of its own before); unknown sessions are left
        out."""
        out: dict[str, RecoveryView] = {}
        with self.backend.transaction(write=False, batched=True) as tx:
            newest = last_position_query(tx, self.backend.kind)
            for chunk in iter_chunks(list(dict.fromkeys(session_ids)), 500):
                out.update(_views(tx, chunk, types, newest))
        return {sid: out[sid] for sid in session_ids if sid in out}

    def openings(
        self, session_ids: Sequence[str], approval_types: Sequence[str], usage_window: int
    ) -> dict[str, tuple[TurnOpening, list[tuple[int, Message]]]]:
        """Each named session's `TurnOpening` (as `SessionRead.opening` reads it) and its
        whole transcript with each message's `seq`, in one read: what the turns of a recovered
        batch read first (on PostgreSQL the openings are pipelined, one round trip for all of
        them, and the transcripts one statement per 500 sessions). Unknown sessions are left
        out."""
        out: dict[str, tuple[TurnOpening, list[tuple[int, Message]]]] = {}
        with self.backend.transaction(write=False, batched=True) as tx:
            for chunk in iter_chunks(list(dict.fromkeys(session_ids)), 500):
                sent = [send_opening(tx, sid, approval_types, usage_window) for sid in chunk]
                found: dict[str, TurnOpening] = {}
                for one in sent:
                    with contextlib.suppress(NotFoundError):
                        found[one.session_id] = one.read()
                messages = transcripts_in(tx, list(found))
                for sid, opening in found.items():
                    out[sid] = (opening, messages.get(sid, []))
        return out

    def append_batch(
        self,
        batches: Sequence[tuple[str, Sequence[SessionEvent], ClaimToken]],
        blobs: Mapping[str, Sequence[bytes]] | None = None,
    ) -> set[str]:
        """Append each session's events, fenced by its claim, all in one transaction, with
        the session's `blobs` (by session id) stored and referenced as `append` stores them;
        return the sessions written. A session whose claim is gone (or that no longer exists)
        is left out, its blobs too; the others are written. Sessions are locked in id order."""
        written: set[str] = set()
        now = self.clock.now_ms()
        with self.backend.transaction(write=True) as tx:
            for sid, events, claim in sorted(batches, key=lambda b: b[0]):
                if not events:
                    continue
                try:
                    append_events(tx, sid, events, now, claim)
                except (ClaimLostError, NotFoundError):
                    continue  # checked before anything of it was sent: nothing to undo
                if blobs and blobs.get(sid):
                    put_blobs_in(tx, blobs[sid], sid, now)
                written.add(sid)
        return written


def _views(
    tx: Tx, chunk: Sequence[str], types: Sequence[str], newest: Pending
) -> dict[str, RecoveryView]:
    """`BatchMixin.recovery_views` of up to 500 sessions, in `tx`; `newest`: the log's newest
    event id, sent before (`last_position_query`)."""
    out: dict[str, RecoveryView] = {}
    marks = ", ".join("?" for _ in chunk)
    # Sent before any is read: one round trip on PostgreSQL (the transcripts'
    # statement, read first, brings the others' rows along).
    sent_rows = tx.query(f"SELECT {row_cols(tx.kind)} FROM sessions WHERE id IN ({marks})", chunk)
    sent_facts = tx.query(facts_sql(f"s.id IN ({marks})"), chunk)
    sent_states = tx.query(instruction_state_sql(tx.kind, f"s.id IN ({marks})"), chunk)
    sent_first = tx.query(
        f"SELECT session_id, {EVENT_COLS} FROM events e WHERE session_id IN ({marks}) "
        "AND seq = (SELECT MIN(f.seq) FROM events f WHERE f.session_id = e.session_id)",
        chunk,
    )
    sent_events = None
    if types:
        sent_events = tx.query(
            f"SELECT session_id, {EVENT_COLS} FROM events WHERE session_id IN "
            f"({marks}) AND {types_in(types)} ORDER BY session_id, seq",
            [*chunk, *types],
        )
    sent_calls = tx.query(
        f"SELECT session_id, {TOOL_CALL_COLS} FROM tool_calls WHERE session_id IN "
        f"({marks}) ORDER BY session_id, started_seq",
        chunk,
    )
    sent_turns = tx.query(
        f"SELECT session_id, {TURN_COLS} FROM turns WHERE session_id IN ({marks}) "
        "ORDER BY session_id, started_seq",
        chunk,
    )
    messages = transcripts_in(tx, chunk)
    seen = position_from(newest.one())[1]
    rows = {str(r[0]): session_row(r) for r in sent_rows.all()}
    facts = _by_session(sent_facts.all())
    states = _by_session(sent_states.all())
    first = _by_session(sent_first.all())
    events = _by_session(sent_events.all()) if sent_events is not None else {}
    calls = _by_session(sent_calls.all())
    turns = _by_session(sent_turns.all())
    for sid, row in rows.items():
        created = [stored_event(sid, r) for r in first.get(sid, [])]
        out[sid] = RecoveryView(
            messages=messages.get(sid, []),
            calls=[tool_call_row(r) for r in calls.get(sid, [])],
            turns=[turn_row(r) for r in turns.get(sid, [])],
            events=[stored_event(sid, r) for r in events.get(sid, [])],
            parent_id=row.parent_id,
            created=created[0] if created else None,
            drive=DriveReads(
                row, facts_of(facts[sid]), instruction_state_of(states[sid]), newest_event=seen
            ),
            instructions=instruction_state_of(states[sid]),
        )
    return out


def _by_session(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Rows whose first column is a session id, by session (the rest of each row, in order)."""
    out: dict[str, list[Row]] = {}
    for row in rows:
        out.setdefault(str(row[0]), []).append(row[1:])
    return out
