"""Projections: the rows each event implies, written in the event's own transaction.

Invariant: a projection is a pure function of the event and the rows before it; nothing else
writes these tables. Message bodies are not copied: `messages` points at the event that holds
the message, so storage grows once per message.

An append's events are projected in order, but the rows they add to the transcript, the search
index and the tool calls, and what they change in their session's own row (the status, the
usage counters), are gathered in an `AppendRows`: one multi-row statement per table, the
session's row with the append's update of its `last_seq` (a step's reply, results and receipt
wrote a statement per row before). An event whose projection reads or changes rows another one
may have added goes after those rows are written (`BATCHED` names the events that cannot).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _shaped
from ._backend import Tx
from ._cipher import sealed, sealed_or_none
from ._compact_ids import BY_MESSAGE_ID, stored_message_id, stored_turn_id
from ._media import media_refs
from ._search import index_bodies, index_title, indexed_body, unindex_messages
from ._session_key import SESSION_KEY

if TYPE_CHECKING:
    from ..events import (
        CompactionEnded,
        InputDelivered,
        InputRejected,
        InstructionsUpdated,
        MessageAdded,
        MessagesHidden,
        ReceiptRecorded,
        RetryCleared,
        RetryScheduled,
        SessionCreated,
        SessionEvent,
        SessionMoved,
        SessionUpdated,
        ToolCallEnded,
        ToolCallStarted,
        TurnEnded,
        TurnStarted,
        UsageRecorded,
        WorkStateUpdated,
    )
    from ..messages import Message

Projection = Callable[[Tx, str, int, Any], None]


def _message_added(tx: Tx, sid: str, seq: int, ev: MessageAdded, rows: AppendRows) -> None:
    rows.message(tx, seq, ev.message.id, ev.message.role, ev.turn_id, ev.message)
    _ref_media(tx, sid, ev.message)


def _ref_media(tx: Tx, sid: str, message: Message) -> None:
    """The session references every blob its message's media refer to (a fork or an import
    copying the message keeps the bytes alive when the original goes)."""
    _ref_blobs(tx, sid, list(media_refs(message)))


def _delivered(tx: Tx, sid: str, seq: int, ev: InputDelivered, rows: AppendRows) -> None:
    message_id = ev.message.id if ev.message is not None else ev.message_id
    tx.send(
        "UPDATE inbox SET status = 'delivered', settled_seq = ?, message_id = ? "
        "WHERE session_id = ? AND input_id = ?",
        (seq, message_id, sid, ev.input_id),
    )
    if message_id is not None:
        # (version 2 names its message: its promotion indexes it, `index_deliveries`)
        rows.message(tx, seq, message_id, "user", None, ev.message)
        # A new input makes a pending revert final (the rows gathered are none of its).
        _shaped.commit_revert(tx, sid)
    if ev.message is not None:
        _ref_media(tx, sid, ev.message)


def _rejected(tx: Tx, sid: str, seq: int, ev: InputRejected) -> None:
    tx.send(
        "UPDATE inbox SET status = 'rejected', settled_seq = ? WHERE session_id = ? AND input_id = ?",
        (seq, sid, ev.input_id),
    )


def _created(tx: Tx, sid: str, seq: int, ev: SessionCreated) -> None:
    """The row itself is inserted with the event (`SqlStore._insert_session`); the title is
    indexed for search."""
    if ev.title:
        index_title(tx, sid, ev.title)


def _updated(tx: Tx, sid: str, seq: int, ev: SessionUpdated) -> None:
    for column in ("title", "agent", "model"):
        value = getattr(ev, column)
        if value is not None:  # the title: sealed in an encrypted store
            value = sealed(tx.cipher, sid, value) if column == "title" else value
            tx.send(f"UPDATE sessions SET {column} = ? WHERE id = ?", (value, sid))
    if ev.title is not None:
        index_title(tx, sid, ev.title)
    if ev.archived is not None:
        tx.send(
            "UPDATE sessions SET archived_ms = CASE WHEN ? THEN updated_ms ELSE NULL END WHERE id = ?",
            (ev.archived, sid),
        )


def _moved(tx: Tx, sid: str, seq: int, ev: SessionMoved) -> None:
    tx.send("UPDATE sessions SET location = ? WHERE id = ?", (ev.location, sid))
    tx.send("DELETE FROM session_waits WHERE session_id = ?", (sid,))


_USAGE_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "cache_read_tokens",
    "cache_write_tokens",
)


@dataclass(slots=True)
class AppendRows:
    """What one append's events add and change, written together (see the module): the
    transcript's rows, their search index entries and the tool calls, in the order added,
    and the session row's status as the last event left it (None: unchanged) and the usage
    they add up to (in the order of `_USAGE_COLUMNS`)."""

    status: str | None = None
    usage: tuple[float, ...] | None = None
    messages: list[tuple[object, ...]] = field(default_factory=list)
    indexed: list[tuple[int, str]] = field(default_factory=list)
    tools: dict[tuple[str, str], list[object]] = field(default_factory=dict)

    def message(
        self,
        tx: Tx,
        seq: int,
        message_id: str,
        role: str,
        turn_id: str | None,
        message: Message | None,
    ) -> None:
        """Add a transcript row (and, for a `message`, its search index entry)."""
        kind = tx.kind  # (the ids as `message_log` holds them on this backend)
        self.messages.append(
            (seq, stored_message_id(kind, message_id), role, stored_turn_id(kind, turn_id))
        )
        body = "" if message is None else indexed_body(tx, message)
        if body:
            self.indexed.append((seq, body))

    def write(self, tx: Tx, sid: str) -> None:
        """Send the rows gathered so far (one statement per table) and forget them."""
        if self.messages:
            tx.send(
                "INSERT INTO message_log (sk, seq, message_id, role, turn_id) VALUES "
                + ", ".join(f"({SESSION_KEY}, ?, ?, ?, ?)" for _ in self.messages),
                tuple(v for row in self.messages for v in (sid, *row)),
            )
            self.messages = []
        if self.indexed:
            index_bodies(tx, sid, self.indexed)
            self.indexed = []
        if self.tools:
            tx.send(
                "INSERT INTO tool_calls (session_id, message_id, call_id, name, status, "
                "started_seq, ended_seq) VALUES "
                + ", ".join("(?, ?, ?, ?, ?, ?, ?)" for _ in self.tools),
                tuple(v for row in self.tools.values() for v in (sid, *row)),
            )
            self.tools = {}

    def assignments(self) -> tuple[str, tuple[object, ...]]:
        """The `SET` clause's assignments for the session row's changes (each starting with
        ", ") and their parameters, in that order."""
        params: tuple[object, ...]
        sql, params = "", ()
        if self.status is not None:
            sql, params = ", status = ?", (self.status,)
        if self.usage is not None:
            sql += "".join(f", {c} = {c} + ?" for c in _USAGE_COLUMNS)
            params += self.usage
        return sql, params


def _turn_started(tx: Tx, sid: str, seq: int, ev: TurnStarted) -> None:
    tx.send(
        "INSERT INTO turns (session_id, turn_id, status, started_seq) VALUES (?, ?, 'running', ?)",
        (sid, ev.turn_id, seq),
    )


def _turn_ended(tx: Tx, sid: str, seq: int, ev: TurnEnded) -> None:
    tx.send(
        "UPDATE turns SET status = ?, ended_seq = ?, error = ? WHERE session_id = ? AND turn_id = ?",
        (ev.outcome, seq, sealed_or_none(tx.cipher, sid, ev.error), sid, ev.turn_id),
    )
    tx.send("DELETE FROM retry_state WHERE session_id = ?", (sid,))


def _row_turn_started(tx: Tx, sid: str, seq: int, ev: TurnStarted, rows: AppendRows) -> None:
    rows.status = "running"


def _row_turn_ended(tx: Tx, sid: str, seq: int, ev: TurnEnded, rows: AppendRows) -> None:
    if ev.error_kind == "awaiting_approval":  # paused until someone decides (`wakeful approve`)
        rows.status = "awaiting_approval"
    else:
        rows.status = "idle" if ev.outcome in ("completed", "interrupted") else ev.outcome


def _tool_started(tx: Tx, sid: str, seq: int, ev: ToolCallStarted, rows: AppendRows) -> None:
    key = (ev.message_id, ev.call_id)
    if key in rows.tools:  # started twice: the second row is refused as a duplicate, as before
        rows.write(tx, sid)
    name = sealed(tx.cipher, sid, ev.name)
    rows.tools[key] = [ev.message_id, ev.call_id, name, "running", seq, None]


def _tool_ended(tx: Tx, sid: str, seq: int, ev: ToolCallEnded, rows: AppendRows) -> None:
    started = rows.tools.get((ev.message_id, ev.call_id))
    if started is not None:  # started in this append: its row goes in ended
        started[3:] = [ev.status, started[4], seq]
        return
    tx.send(
        "UPDATE tool_calls SET status = ?, ended_seq = ? "
        "WHERE session_id = ? AND message_id = ? AND call_id = ?",
        (ev.status, seq, sid, ev.message_id, ev.call_id),
    )


def _receipt(tx: Tx, sid: str, seq: int, ev: ReceiptRecorded) -> None:
    tx.send(
        "INSERT INTO receipts (session_id, receipt_id, turn_id, step, attempt, request_digest, seq) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (sid, ev.receipt_id, ev.turn_id, ev.step, ev.attempt, ev.request_digest, seq),
    )
    _ref_blobs(tx, sid, [digest for _section, _source, digest in ev.sections])


def _ref_blobs(tx: Tx, sid: str, digests: list[str]) -> None:
    """Reference the blobs from the session, in one statement (each distinct digest once)."""
    unique = list(dict.fromkeys(digests))
    if not unique:
        return
    if tx.cipher is not None:  # each reference with its wrapping of the blob's key
        from ._blob_keys import ref_sessions

        ref_sessions(tx, tx.cipher, sid, unique)
        return
    tx.send(
        "INSERT INTO blob_refs (session_id, digest) VALUES "
        + ", ".join("(?, ?)" for _ in unique)
        + " ON CONFLICT DO NOTHING",
        tuple(v for digest in unique for v in (sid, digest)),
    )


def _row_usage(tx: Tx, sid: str, seq: int, ev: UsageRecorded, rows: AppendRows) -> None:
    added = (
        ev.input_tokens,
        ev.output_tokens,
        ev.cost_usd or 0.0,  # the priced requests' sum; an unknown price adds nothing
        ev.cache_read_tokens,
        ev.cache_write_tokens,
    )
    had = rows.usage
    rows.usage = added if had is None else tuple(a + b for a, b in zip(had, added, strict=True))


def _retry(tx: Tx, sid: str, seq: int, ev: RetryScheduled) -> None:
    tx.send("DELETE FROM retry_state WHERE session_id = ?", (sid,))
    tx.send(
        "INSERT INTO retry_state (session_id, turn_id, step, attempt, deadline_ms, error_kind, error) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            sid,
            ev.turn_id,
            ev.step,
            ev.attempt,
            ev.deadline_ms,
            ev.error_kind,
            sealed_or_none(tx.cipher, sid, ev.error),  # an error's text can quote content
        ),
    )


def _retry_cleared(tx: Tx, sid: str, seq: int, ev: RetryCleared) -> None:
    tx.send("DELETE FROM retry_state WHERE session_id = ?", (sid,))


def _work_state(tx: Tx, sid: str, seq: int, ev: WorkStateUpdated) -> None:
    tx.send(  # one upsert, not a delete and an insert (a statement fewer: issue 24)
        "INSERT INTO work_state (session_id, kind, value, seq) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (session_id, kind) DO UPDATE SET value = excluded.value, seq = excluded.seq",
        (sid, ev.kind, sealed(tx.cipher, sid, json.dumps(ev.value)), seq),
    )


def _instructions(tx: Tx, sid: str, seq: int, ev: InstructionsUpdated) -> None:
    values = ev.values()
    marks = [key for key in ev.delta if key not in values]  # without a value: `removed`, `absent`
    if marks:  # (one statement for them all)
        tx.send(
            "DELETE FROM instruction_state WHERE session_id = ? AND source_key IN "
            f"({', '.join('?' for _ in marks)})",
            (sid, *marks),
        )
    kept = [(key, digest) for key, digest in ev.delta.items() if key in values]
    if kept:  # one upsert of them all, not a delete and an insert each
        tx.send(
            "INSERT INTO instruction_state (session_id, source_key, digest, seq) VALUES "
            + ", ".join("(?, ?, ?, ?)" for _ in kept)
            + " ON CONFLICT (session_id, source_key) "
            "DO UPDATE SET digest = excluded.digest, seq = excluded.seq",
            tuple(v for key, digest in kept for v in (sid, key, digest, seq)),
        )
    _ref_blobs(tx, sid, list(values.values()))


def _compaction(tx: Tx, sid: str, seq: int, ev: CompactionEnded) -> None:
    """The summary message is its own `message.added`; the boundary is read from the log."""


def _hidden(tx: Tx, sid: str, seq: int, ev: MessagesHidden) -> None:
    """Hidden messages leave the transcript and search projections; their events stay in the log."""
    for message_id in ev.message_ids:
        unindex_messages(tx, sid, "session_id = ? AND message_id = ?", (sid, message_id))
        tx.send(
            f"DELETE FROM message_log WHERE sk = {SESSION_KEY} AND {BY_MESSAGE_ID}",
            (sid, sid, message_id),
        )


PROJECTIONS: dict[str, Projection] = {
    "session.created": _created,
    "inbox.rejected": _rejected,
    "session.updated": _updated,
    "session.moved": _moved,
    "turn.started": _turn_started,
    "turn.ended": _turn_ended,
    "receipt.recorded": _receipt,
    "retry.scheduled": _retry,
    "retry.cleared": _retry_cleared,
    "work_state.updated": _work_state,
    "instructions.updated": _instructions,
    "compaction.ended": _compaction,
    "messages.hidden": _hidden,
    "session.reverted": _shaped.reverted,
    "session.unreverted": _shaped.unreverted,
    "history.edited": _shaped.history_edited,
    "artifact.recorded": _shaped.artifact_recorded,
    "metadata.updated": _shaped.metadata_updated,
    "extension_state.set": _shaped.extension_state_set,
}


# The projections that add rows to an `AppendRows` or change its session row's columns:
# nothing they write reads or changes a row another event of the append may have added.
RowsProjection = Callable[[Tx, str, int, Any, AppendRows], None]
BATCHED: dict[str, RowsProjection] = {
    "message.added": _message_added,
    "inbox.delivered": _delivered,
    "tool.started": _tool_started,
    "tool.ended": _tool_ended,
    "turn.started": _row_turn_started,
    "turn.ended": _row_turn_ended,
    "usage.recorded": _row_usage,
}
# Those whose other projections read or change none of the rows gathered either.
_INDEPENDENT = frozenset(
    (
        "turn.started",
        "turn.ended",
        "receipt.recorded",
        "work_state.updated",
        "instructions.updated",
        "retry.scheduled",
        "retry.cleared",
    )
)


def project(tx: Tx, session_id: str, seq: int, event: SessionEvent, rows: AppendRows) -> None:
    """Write the projection rows of one event (events without a projection write none), or
    gather them in `rows` (the append writes them: `AppendRows.write`)."""
    kind = event.type
    batched = BATCHED.get(kind)
    fn = PROJECTIONS.get(kind)
    if fn is not None:
        if kind not in _INDEPENDENT:
            rows.write(tx, session_id)  # what it reads or changes is written first
        fn(tx, session_id, seq, event)
    if batched is not None:
        batched(tx, session_id, seq, event, rows)
