"""Projection reads the runner and the CLI need: retry, work state, tool calls, turns, receipts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import AmbiguousIdError, CorruptStateError, NotFoundError
from ._cipher import opened, opened_or_none
from ._records import InstructionState, last_seq_sql
from ._summaries import summaries_in
from ._transcript import message_bodies_in
from ._typed_events import typed, types_in

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..events import PlainEvent, ReceiptRecorded, StoredEvent
    from ..messages import Message
    from ._backend import Backend, Tx
    from ._records import SessionSummary


@dataclass(frozen=True, slots=True)
class RetryState:
    """A scheduled retry: which step, which attempt comes next, and when (invariant 9)."""

    turn_id: str | None
    step: int
    attempt: int
    deadline_ms: int
    error_kind: str
    error: str


@dataclass(frozen=True, slots=True)
class ToolCallRow:
    """A tool call as its projection says: `running` until it ends."""

    message_id: str
    call_id: str
    name: str
    status: str
    started_seq: int


@dataclass(frozen=True, slots=True)
class TurnRow:
    """A turn: `running` or its terminal outcome."""

    turn_id: str
    status: str
    started_seq: int
    ended_seq: int | None
    error: str | None


def events_in(
    tx: Tx, session_id: str, after: int = 0, limit: int | None = None, types: Sequence[str] = ()
) -> list[StoredEvent]:
    """Durable events of a session with `seq > after`, in order (optionally of some types), in
    `tx` (an unknown session has none)."""
    return [stored_event(session_id, r) for r in _event_rows(tx, session_id, after, limit, types)]


def plain_events_in(
    tx: Tx, session_id: str, after: int = 0, limit: int | None = None, types: Sequence[str] = ()
) -> list[PlainEvent]:
    """`events_in` with each body as plain JSON (`PlainEvent`, `event_data`): no model built
    for a body the plain reading vouches for."""
    from ..events import PlainEvent, event_data

    return [
        PlainEvent(int(r[0]), session_id, int(r[1]), int(r[2]), r[4], event_data(r[3]))
        for r in _event_rows(tx, session_id, after, limit, types)
    ]


def _event_rows(
    tx: Tx, session_id: str, after: int, limit: int | None, types: Sequence[str]
) -> list[Any]:
    sql = f"SELECT {EVENT_COLS}, type FROM events WHERE session_id = ? AND seq > ?"
    params: list[Any] = [session_id, after]
    if types:
        sql += f" AND {types_in(types)}"
        params += list(types)
    sql += " ORDER BY seq" + (f" LIMIT {int(limit)}" if limit else "")
    return tx.all(sql, params)


EVENT_COLS = "id, seq, at_ms, data"  # what `stored_event` reads


def stored_event(session_id: str, r: Sequence[Any]) -> StoredEvent:
    """The `StoredEvent` of a row of `EVENT_COLS` of `session_id`."""
    from ..events import StoredEvent, load_event

    return StoredEvent(int(r[0]), session_id, int(r[1]), int(r[2]), load_event(r[3]))


def tool_calls_in(tx: Tx, session_id: str, status: str | None = None) -> list[ToolCallRow]:
    """Tool calls of a session in start order (only those with `status`, if given), in `tx`."""
    sql = f"SELECT {TOOL_CALL_COLS} FROM tool_calls WHERE session_id = ?"
    params: list[object] = [session_id]
    if status is not None:
        sql += " AND status = ?"
        params.append(status)
    return [tool_call_row(r) for r in tx.all(sql + " ORDER BY started_seq", params)]


TOOL_CALL_COLS = "message_id, call_id, name, status, started_seq"  # what `tool_call_row` reads


def tool_call_row(r: Sequence[Any]) -> ToolCallRow:
    """The `ToolCallRow` of a row of `TOOL_CALL_COLS`."""
    return ToolCallRow(r[0], r[1], opened(r[2]), r[3], int(r[4]))


def turns_in(tx: Tx, session_id: str) -> list[TurnRow]:
    """Turns of a session in start order, in `tx`."""
    rows = tx.all(
        f"SELECT {TURN_COLS} FROM turns WHERE session_id = ? ORDER BY started_seq", (session_id,)
    )
    return [turn_row(r) for r in rows]


TURN_COLS = "turn_id, status, started_seq, ended_seq, error"  # what `turn_row` reads


def turn_row(r: Sequence[Any]) -> TurnRow:
    """The `TurnRow` of a row of `TURN_COLS`."""
    return TurnRow(r[0], r[1], int(r[2]), None if r[3] is None else int(r[3]), opened_or_none(r[4]))


RETRY_SQL = (  # what `retry_state_row` reads
    "SELECT turn_id, step, attempt, deadline_ms, error_kind, error FROM retry_state "
    "WHERE session_id = ?"
)


def retry_state_row(r: Sequence[Any] | None) -> RetryState | None:
    """The `RetryState` of a row of `RETRY_SQL` (its error opened), None for no row."""
    if r is None:
        return None
    return RetryState(r[0], int(r[1]), int(r[2]), int(r[3]), r[4], opened(str(r[5])))


class ReadsMixin:
    """Projection reads of `SqlStore`."""

    backend: Backend

    def resolve_session_id(self, ref: str) -> str:
        """The full id of the session `ref` names: its exact id, else the one session whose id
        starts with `ref` (or with `ses_` + `ref`). `NotFoundError` when none does,
        `AmbiguousIdError` (a `UsageError`, listing candidates) when several do. An exact id
        never scans; a prefix reads the id index only."""
        prefixes = [ref] if ref.startswith("ses_") else [ref, f"ses_{ref}"]
        with self.backend.transaction(write=False) as tx:
            if tx.one("SELECT 1 FROM sessions WHERE id = ?", (ref,)) is not None:
                return ref
            found: list[str] = []
            for prefix in prefixes:
                rows = tx.all(
                    "SELECT id FROM sessions WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT 6",
                    (len(prefix), prefix),
                )
                found += [r[0] for r in rows if r[0] not in found]
        if not found:
            raise NotFoundError(f"no session {ref}")
        if len(found) > 1:
            raise AmbiguousIdError(ref, found)
        return str(found[0])

    def session_summaries(self, session_ids: Sequence[str]) -> dict[str, SessionSummary]:
        """What a listing shows beside each session in `session_ids` (`SessionSummary`: runs,
        child sessions, user messages, artifacts, first prompt); a fixed number of indexed
        statements per 500 sessions (`_summaries`)."""
        if not session_ids:
            return {}
        with self.backend.transaction(write=False) as tx:
            return summaries_in(tx, session_ids)

    def retry_state(self, session_id: str) -> RetryState | None:
        """The session's pending retry, or None."""
        with self.backend.transaction(write=False) as tx:
            r = tx.one(RETRY_SQL, (session_id,))
        return retry_state_row(r)

    def work_state(self, session_id: str) -> dict[str, JsonValue]:
        """Current goal, plan, todos and jobs, by kind."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT kind, value FROM work_state WHERE session_id = ? ORDER BY kind",
                (session_id,),
            )
        return {kind: json.loads(opened(value)) for kind, value in rows}

    def tool_calls(self, session_id: str, status: str | None = None) -> list[ToolCallRow]:
        """Tool calls of a session in start order, optionally only those with `status`."""
        with self.backend.transaction(write=False) as tx:
            return tool_calls_in(tx, session_id, status)

    def turns(self, session_id: str) -> list[TurnRow]:
        """Turns of a session in start order."""
        with self.backend.transaction(write=False) as tx:
            return turns_in(tx, session_id)

    def receipts(self, session_id: str) -> list[ReceiptRecorded]:
        """Every prompt receipt of a session, in order, each with its complete `message_ids`
        and no `base` (a receipt recorded against a base is expanded, as if recorded whole)."""
        from ..events import ReceiptRecorded, load_event

        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT e.data FROM receipts r JOIN events e ON e.session_id = r.session_id "
                "AND e.seq = r.seq WHERE r.session_id = ? ORDER BY r.seq",
                (session_id,),
            )
        out: list[ReceiptRecorded] = []
        full: dict[str, tuple[str, ...]] = {}
        for (data,) in rows:
            event = load_event(data)
            assert isinstance(event, ReceiptRecorded)
            if event.base is not None:
                base = full.get(event.base[0])
                ids = tuple(event.expand(None if base is None else list(base)))
                event = event.model_copy(update={"message_ids": ids, "base": None})
            full[event.receipt_id] = event.message_ids
            out.append(event)
        return out

    def receipt_message_ids(self, session_id: str, receipt_id: str) -> tuple[str, ...]:
        """The complete message ids of one receipt: its own list, or, for one recorded against a
        base, the chain of earlier receipts it extends, read back to one recorded whole."""
        from ..events import ReceiptRecorded, load_event

        chain: list[ReceiptRecorded] = []
        with self.backend.transaction(write=False) as tx:
            rid, before = receipt_id, 2**62
            while True:
                row = tx.one(
                    "SELECT e.data, r.seq FROM receipts r JOIN events e "
                    "ON e.session_id = r.session_id AND e.seq = r.seq "
                    "WHERE r.session_id = ? AND r.receipt_id = ? AND r.seq < ?",
                    (session_id, rid, before),
                )
                if row is None and not chain:
                    raise NotFoundError(f"no receipt {receipt_id} in session {session_id}")
                if row is None:
                    raise CorruptStateError(
                        f"receipt {chain[-1].receipt_id} of session {session_id} extends "
                        f"{rid}, which is not an earlier receipt of that session"
                    )
                event = load_event(row[0])
                assert isinstance(event, ReceiptRecorded)
                chain.append(event)
                if event.base is None:
                    break
                rid, before = event.base[0], int(row[1])
        ids: list[str] | None = None
        for event in reversed(chain):
            ids = event.expand(ids)
        assert ids is not None
        return tuple(ids)

    def receipt_messages(self, session_id: str, receipt_id: str) -> dict[str, Message]:
        """The messages, by id, as the log held them when the receipt was recorded (hidden,
        reverted and since-edited messages as they were): what rebuilds its request."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                "SELECT seq FROM receipts WHERE session_id = ? AND receipt_id = ?",
                (session_id, receipt_id),
            )
            if row is None:
                raise NotFoundError(f"no receipt {receipt_id} in session {session_id}")
            return message_bodies_in(tx, session_id, int(row[0]))

    def sessions_with_work(self, limit: int = 1000) -> list[str]:
        """Sessions with pending inbox items or an unreleased claim (what a worker drives)."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT session_id FROM inbox WHERE status = 'pending' "
                "UNION SELECT session_id FROM claims WHERE released = 0 ORDER BY 1 LIMIT ?",
                (limit,),
            )
        return [r[0] for r in rows]

    def instruction_state(self, session_id: str) -> InstructionState:
        """The session's current instruction digests, whether its first `instructions.updated`
        exists, the session it was forked from and its newest seq, as one statement (what an
        instruction delta is planned from: `instructions._sync`; all of it from one snapshot);
        `NotFoundError` if there is no such session."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(instruction_state_sql(tx.kind, "s.id = ?"), (session_id,))
        if not rows:
            raise NotFoundError(f"no session {session_id}")
        return instruction_state_of([r[1:] for r in rows])


def instruction_state_sql(kind: str, where: str) -> str:
    """The statement `instruction_state` reads with, for the sessions `where` selects (over
    `sessions s`): one row per instruction value (one without when there is none), each
    beginning with the session's id (`instruction_state_of` reads the rest), on a backend
    of `kind`."""
    return (
        f"SELECT s.id, {last_seq_sql(kind, 's')}, s.forked_from, CASE WHEN EXISTS (SELECT 1 FROM events e "
        f"WHERE e.session_id = s.id AND e.type = 'instructions.updated' AND {typed('e.type')}) "
        "THEN 1 ELSE 0 END, i.source_key, i.digest FROM sessions s LEFT JOIN instruction_state i "
        f"ON i.session_id = s.id WHERE {where}"
    )


def instruction_state_of(rows: Sequence[Sequence[Any]]) -> InstructionState:
    """One session's `InstructionState` from its rows of `instruction_state_sql` (without
    the id; at least one)."""
    values = {str(r[3]): str(r[4]) for r in rows if r[3] is not None}
    last_seq, forked_from, started = rows[0][:3]
    return InstructionState(values, bool(started), forked_from, int(last_seq))


def recent_events_in(
    tx: Tx, session_id: str, window: int, types: Sequence[str]
) -> list[StoredEvent]:
    """The events of `types` among the session's newest `window` events, in order, as one
    statement: the newest seq is read by it, and the session's row answers even when no
    event does (`NotFoundError` if there is no such session)."""
    # (`event_log` by key, not the view `events`: SQLite does not flatten a view that is a join
    # on the right of a LEFT JOIN, and scanned every session's events of the type instead)
    cols = ", ".join(f"e.{c}" for c in EVENT_COLS.split(", "))
    rows = tx.all(
        f"SELECT {cols} FROM sessions s LEFT JOIN event_log e ON e.sk = s.k "
        f"AND e.seq > (SELECT {last_seq_sql(tx.kind, 'w')} FROM sessions w WHERE w.id = ?) - ? "
        f"AND {types_in(types, 'e.type')} WHERE s.id = ? ORDER BY e.seq",
        (session_id, window, *types, session_id),
    )
    if not rows:
        raise NotFoundError(f"no session {session_id}")
    return [stored_event(session_id, r) for r in rows if r[0] is not None]
