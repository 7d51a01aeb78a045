"""Projections: the rows each event implies, written in the event's own transaction.

Invariant: a projection is a pure function of the event and the rows before it; nothing else
writes these tables. Message bodies are not copied: `messages` points at the event that holds
the message, so storage grows once per message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _shaped
from ._backend import Tx
from ._cipher import sealed, sealed_or_none
from ._compact_ids import BY_MESSAGE_ID, stored_message_id, stored_turn_id
from ._media import media_refs
from ._search import index_message, index_title, unindex_messages
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


def _message_added(tx: Tx, sid: str, seq: int, ev: MessageAdded) -> None:
    tx.send(
        "INSERT INTO message_log (sk, seq, message_id, role, turn_id) "
        f"VALUES ({SESSION_KEY}, ?, ?, ?, ?)",
        (
            sid,
            seq,
            stored_message_id(tx.kind, ev.message.id),
            ev.message.role,
            stored_turn_id(tx.kind, ev.turn_id),
        ),
    )
    index_message(tx, sid, seq, ev.message)
    _ref_media(tx, sid, ev.message)


def _ref_media(tx: Tx, sid: str, message: Message) -> None:
    """The session references every blob its message's media refer to (a fork or an import
    copying the message keeps the bytes alive when the original goes)."""
    _ref_blobs(tx, sid, list(media_refs(message)))


def _delivered(tx: Tx, sid: str, seq: int, ev: InputDelivered) -> None:
    message_id = ev.message.id if ev.message is not None else ev.message_id
    tx.send(
        "UPDATE inbox SET status = 'delivered', settled_seq = ?, message_id = ? "
        "WHERE session_id = ? AND input_id = ?",
        (seq, message_id, sid, ev.input_id),
    )
    if message_id is not None:
        tx.send(
            f"INSERT INTO message_log (sk, seq, message_id, role) VALUES ({SESSION_KEY}, ?, ?, 'user')",
            (sid, seq, stored_message_id(tx.kind, message_id)),
        )
        _shaped.commit_revert(tx, sid)  # a new input makes a pending revert final
    if ev.message is not None:  # version 2 names its message: its promotion indexes it
        index_message(tx, sid, seq, ev.message)
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


def _turn_started(tx: Tx, sid: str, seq: int, ev: TurnStarted) -> None:
    tx.send(
        "INSERT INTO turns (session_id, turn_id, status, started_seq) VALUES (?, ?, 'running', ?)",
        (sid, ev.turn_id, seq),
    )
    tx.send("UPDATE sessions SET status = 'running' WHERE id = ?", (sid,))


def _turn_ended(tx: Tx, sid: str, seq: int, ev: TurnEnded) -> None:
    tx.send(
        "UPDATE turns SET status = ?, ended_seq = ?, error = ? WHERE session_id = ? AND turn_id = ?",
        (ev.outcome, seq, sealed_or_none(tx.cipher, sid, ev.error), sid, ev.turn_id),
    )
    status: str = "idle" if ev.outcome in ("completed", "interrupted") else ev.outcome
    if ev.error_kind == "awaiting_approval":  # paused until someone decides (`wakeful approve`)
        status = "awaiting_approval"
    tx.send("UPDATE sessions SET status = ? WHERE id = ?", (status, sid))
    tx.send("DELETE FROM retry_state WHERE session_id = ?", (sid,))


def _tool_started(tx: Tx, sid: str, seq: int, ev: ToolCallStarted) -> None:
    tx.send(
        "INSERT INTO tool_calls (session_id, message_id, call_id, name, status, started_seq) "
        "VALUES (?, ?, ?, ?, 'running', ?)",
        (sid, ev.message_id, ev.call_id, sealed(tx.cipher, sid, ev.name), seq),
    )


def _tool_ended(tx: Tx, sid: str, seq: int, ev: ToolCallEnded) -> None:
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


def _usage(tx: Tx, sid: str, seq: int, ev: UsageRecorded) -> None:
    tx.send(
        "UPDATE sessions SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
        "cost_usd = cost_usd + ?, cache_read_tokens = cache_read_tokens + ?, "
        "cache_write_tokens = cache_write_tokens + ? WHERE id = ?",
        (
            ev.input_tokens,
            ev.output_tokens,
            ev.cost_usd or 0.0,  # the priced requests' sum; an unknown price adds nothing
            ev.cache_read_tokens,
            ev.cache_write_tokens,
            sid,
        ),
    )


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
    for key, digest in ev.delta.items():
        if key not in values:  # a mark without a value (`removed`, `absent`)
            tx.send(
                "DELETE FROM instruction_state WHERE session_id = ? AND source_key = ?", (sid, key)
            )
            continue
        tx.send(  # one upsert, not a delete and an insert
            "INSERT INTO instruction_state (session_id, source_key, digest, seq) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (session_id, source_key) "
            "DO UPDATE SET digest = excluded.digest, seq = excluded.seq",
            (sid, key, digest, seq),
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
    "message.added": _message_added,
    "inbox.delivered": _delivered,
    "inbox.rejected": _rejected,
    "session.updated": _updated,
    "session.moved": _moved,
    "turn.started": _turn_started,
    "turn.ended": _turn_ended,
    "tool.started": _tool_started,
    "tool.ended": _tool_ended,
    "receipt.recorded": _receipt,
    "usage.recorded": _usage,
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


def project(tx: Tx, session_id: str, seq: int, event: SessionEvent) -> None:
    """Write the projection rows of one event (events without a projection write none)."""
    fn = PROJECTIONS.get(event.type)
    if fn is not None:
        fn(tx, session_id, seq, event)
