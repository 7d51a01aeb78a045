"""Projections of the events that shape a session after the fact (`events._shaping`).

Invariant: a pending revert is the session's `reverts` rows plus the `messages` rows whose
`reverted` names one of them; a delivered input makes it final (`commit_revert`), an unrevert
clears it. Hidden rows leave every transcript read (`_inbox._message_rows`), never the log.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ._backend import Tx
from ._cipher import keyed, opened, sealed, sealed_or_none
from ._compact_ids import BY_MESSAGE_ID
from ._search import index_message, unindex_messages
from ._session_key import SESSION_KEY

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..events import (
        ArtifactRecorded,
        ExtensionStateSet,
        HistoryEdited,
        MetadataUpdated,
        SessionReverted,
        SessionUnreverted,
    )

ARTIFACTS_PER_SESSION_CAP = 200  # the spec's ARTIFACTS_PER_SESSION_CAP
ARTIFACT_URI = "artifact uri"  # an encrypted store's `artifacts.uri`: `Cipher.keyed` of the uri


def _put_state(
    tx: Tx, sid: str, seq: int, work: dict[str, JsonValue], instructions: dict[str, str]
) -> None:
    """Replace the session's work state and instruction values with complete snapshots."""
    tx.send("DELETE FROM work_state WHERE session_id = ?", (sid,))
    for kind, value in sorted(work.items()):
        tx.send(
            "INSERT INTO work_state (session_id, kind, value, seq) VALUES (?, ?, ?, ?)",
            (sid, kind, sealed(tx.cipher, sid, json.dumps(value)), seq),
        )
    tx.send("DELETE FROM instruction_state WHERE session_id = ?", (sid,))
    for key, digest in sorted(instructions.items()):
        tx.send(
            "INSERT INTO instruction_state (session_id, source_key, digest, seq) VALUES (?, ?, ?, ?)",
            (sid, key, digest, seq),
        )


def reverted(tx: Tx, sid: str, seq: int, ev: SessionReverted) -> None:
    """Hide the messages from `from_seq` on (also those an earlier pending revert hid, which
    this one now owns) and restore the state the event names."""
    tx.send(
        f"UPDATE message_log SET reverted = ? WHERE sk = {SESSION_KEY} AND seq >= ?",
        (seq, sid, ev.from_seq),
    )
    tx.send(
        "INSERT INTO reverts (session_id, revert_seq, from_seq) VALUES (?, ?, ?)",
        (sid, seq, ev.from_seq),
    )
    _put_state(tx, sid, seq, dict(ev.work_state), dict(ev.instructions))


def unreverted(tx: Tx, sid: str, seq: int, ev: SessionUnreverted) -> None:
    """Bring the pending revert's messages and state back."""
    tx.send(
        f"UPDATE message_log SET reverted = NULL WHERE sk = {SESSION_KEY} AND reverted IS NOT NULL",
        (sid,),
    )
    tx.send("DELETE FROM reverts WHERE session_id = ?", (sid,))
    _put_state(tx, sid, seq, dict(ev.work_state), dict(ev.instructions))


def commit_revert(tx: Tx, sid: str) -> None:
    """A new input landed: the pending revert (if any) is final; its hidden messages leave the
    transcript and search projections for good (their events stay in the log). Sent with
    every delivery: on PostgreSQL one statement (the rows' delete gives the index's delete
    the seqs it takes out; three statements before), on SQLite two (its index follows the
    rows' delete by a trigger)."""
    if tx.kind == "postgres":
        tx.send(
            "WITH gone AS (DELETE FROM message_log WHERE sk = "
            f"{SESSION_KEY} AND reverted IS NOT NULL RETURNING seq), "
            "unindexed AS (DELETE FROM search_docs WHERE session_id = ? "
            "AND seq IN (SELECT seq FROM gone)) DELETE FROM reverts WHERE session_id = ?",
            (sid, sid, sid),
        )
        return
    tx.send(f"DELETE FROM message_log WHERE sk = {SESSION_KEY} AND reverted IS NOT NULL", (sid,))
    tx.send("DELETE FROM reverts WHERE session_id = ?", (sid,))


def history_edited(tx: Tx, sid: str, seq: int, ev: HistoryEdited) -> None:
    """`delete_turn` drops the named messages from the transcript and search projections;
    `replace_text` points the message's row at this event, which holds its new body."""
    if ev.message is not None:  # `replace_text`, or a message `heal_pairing` changed
        row = None  # (SQLite: the index follows the row's body by a trigger, `_search_log`)
        if tx.kind != "sqlite":
            row = tx.one(
                "SELECT seq FROM messages WHERE session_id = ? AND message_id = ?",
                (sid, ev.message.id),
            )
        tx.send(
            f"UPDATE message_log SET body_seq = ? WHERE sk = {SESSION_KEY} AND {BY_MESSAGE_ID}",
            (seq, sid, sid, ev.message.id),
        )
        if row is not None:  # the search index follows the new text
            tx.send("DELETE FROM search_docs WHERE session_id = ? AND seq = ?", (sid, row[0]))
            index_message(tx, sid, int(row[0]), ev.message)
        return
    for message_id in ev.message_ids:
        unindex_messages(tx, sid, "session_id = ? AND message_id = ?", (sid, message_id))
        tx.send(
            f"DELETE FROM message_log WHERE sk = {SESSION_KEY} AND {BY_MESSAGE_ID}",
            (sid, sid, message_id),
        )


def artifact_recorded(tx: Tx, sid: str, seq: int, ev: ArtifactRecorded) -> None:
    """Upsert by (session, kind, uri): an existing row keeps its id, turn and creation time and
    takes the new label (and meta, when given); then evict past the cap, `file` artifacts
    first, oldest first (the spec's `selectArtifactEvictions`)."""
    cipher = tx.cipher  # encrypted: the uri a keyed hash (upsert, lookup), the rest sealed
    meta = sealed_or_none(cipher, sid, None if ev.meta is None else json.dumps(ev.meta))
    tx.send(
        "INSERT INTO artifacts (id, session_id, kind, uri, uri_sealed, label, meta, turn_id, "
        "created_seq, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (session_id, kind, uri) DO UPDATE SET label = excluded.label, "
        "meta = COALESCE(excluded.meta, artifacts.meta), updated_ms = excluded.updated_ms",
        (
            ev.artifact_id,
            sid,
            ev.kind,
            keyed(cipher, ARTIFACT_URI, ev.uri),
            None if cipher is None else cipher.seal(sid, ev.uri),
            sealed(cipher, sid, ev.label),
            meta,
            ev.turn_id,
            seq,
            ev.at_ms,
            ev.at_ms,
        ),
    )
    tx.send(
        "DELETE FROM artifacts WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER "
        "(ORDER BY CASE WHEN kind = 'file' THEN 0 ELSE 1 END, created_seq) AS place "
        "FROM artifacts WHERE session_id = ?) ranked "
        "WHERE place <= (SELECT COUNT(*) FROM artifacts WHERE session_id = ?) - ?)",
        (sid, sid, ARTIFACTS_PER_SESSION_CAP),
    )


def metadata_updated(tx: Tx, sid: str, seq: int, ev: MetadataUpdated) -> None:
    """Merge the patch into `sessions.metadata` by key (None removes a key)."""
    row = tx.one("SELECT metadata FROM sessions WHERE id = ?", (sid,))
    current = json.loads(opened(row[0])) if row is not None and row[0] else {}
    merged = json.dumps(merge_metadata(current, ev.patch))
    tx.send("UPDATE sessions SET metadata = ? WHERE id = ?", (sealed(tx.cipher, sid, merged), sid))


def merge_metadata(
    current: dict[str, JsonValue], patch: dict[str, JsonValue]
) -> dict[str, JsonValue]:
    """`current` with each key of `patch` set (a None value removes the key)."""
    out = dict(current)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def extension_state_set(tx: Tx, sid: str, seq: int, ev: ExtensionStateSet) -> None:
    """Set or delete one extension value."""
    tx.send(
        "DELETE FROM extension_state WHERE session_id = ? AND namespace = ? AND key = ?",
        (sid, ev.namespace, ev.key),
    )
    if ev.value is not None:
        tx.send(
            "INSERT INTO extension_state (session_id, namespace, key, value) VALUES (?, ?, ?, ?)",
            (sid, ev.namespace, ev.key, sealed(tx.cipher, sid, json.dumps(ev.value))),
        )
