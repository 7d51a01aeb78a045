"""Appending events: the one write path. Locks the session, checks the claim, allocates gap-free
`seq`s, inserts events and their projections, bumps the session's change counter, notifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ClaimLostError, NotFoundError
from ._backend import Pending, Row, Tx
from ._cipher import sealed
from ._listing import listed_ms_after
from ._media import blob_digest
from ._projections import AppendRows, project
from ._session_key import SESSION_KEY

if TYPE_CHECKING:
    from ..events import SessionEvent, StoredEvent


@dataclass(frozen=True, slots=True)
class ClaimToken:
    """What a driver proves on every write: its token and fencing epoch (invariant 5)."""

    token: str
    epoch: int


_CLAIM_ROW = "SELECT token, epoch, released FROM claims WHERE session_id = ?"

# The largest message (its JSON, UTF-8) the store takes from outside a turn (`session import`):
# no model's context holds more (a 60 MB imported message failed every later turn), and the
# server's request body limit (4 MiB) bounds what arrives over HTTP the same way.
MESSAGE_MAX_BYTES = 4 * 1024 * 1024


def check_claim(tx: Tx, session_id: str, claim: ClaimToken) -> None:
    """Raise `ClaimLostError` unless `claim` is the session's live claim."""
    check_claim_row(session_id, claim, tx.one(_CLAIM_ROW, (session_id,)))


def check_claim_row(session_id: str, claim: ClaimToken, row: Row | None) -> None:
    """Raise `ClaimLostError` unless the claims `row` (token, epoch, released) is `claim`."""
    if row is None or row[0] != claim.token or row[1] != claim.epoch or row[2]:
        raise ClaimLostError(
            f"session {session_id}: this driver's claim (epoch {claim.epoch}) is gone"
        )


def _lock_and_ids(
    tx: Tx,
    session_id: str,
    n: int,
    claim: ClaimToken | None,
    locked: Row | None,
    ids: Pending | None,
) -> tuple[Row, list[int]]:
    """`append_events`' session lock (unless `locked` is given), claim check and `n` event ids
    (`ids`, when the caller reserved them), sent together and read in that order."""
    lock = tx.lock_query(session_id) if locked is None else None
    # The claim and the ids in one statement, when the caller reserved none (`claim_and_ids`).
    both = tx.claim_and_ids(session_id, n) if claim and ids is None else None
    held = None if claim is None or both else tx.query(_CLAIM_ROW, (session_id,))
    reserved = None if both else ids if ids is not None else tx.event_ids(n)
    if lock is not None:
        locked = lock.one()
    if locked is None:
        raise NotFoundError(f"no session {session_id}")
    if both is not None:
        assert claim is not None
        fenced = both.one()
        assert fenced is not None
        check_claim_row(session_id, claim, fenced)
        return locked, [int(i) for i in fenced[3]]
    if claim is not None and held is not None:
        check_claim_row(session_id, claim, held.one())
    assert reserved is not None
    return locked, [int(r[0]) for r in reserved.all()]


def append_events(
    tx: Tx,
    session_id: str,
    events: Sequence[SessionEvent],
    now_ms: int,
    claim: ClaimToken | None = None,
    *,
    locked: Row | None = None,
    ids: Pending | None = None,
    data: Sequence[str] | None = None,
    checked: bool = False,
) -> list[StoredEvent]:
    """Append events to an existing session inside `tx`; return them as stored.

    `locked` is the session's `lock_session` row when the caller already holds it, and `ids`
    the caller's `tx.event_ids(len(events))`, sent with its own queries; without them this
    sends the lock, the claim check and the id reservation together (one round trip on
    PostgreSQL; the claim and the ids as one statement, `Tx.claim_and_ids`, read after the
    lock), then every insert without waiting (they travel with the commit).
    """
    from ..events import SHAPES_DIGEST, StoredEvent, dump_event

    fenced = None if checked else claim
    locked, event_ids = _lock_and_ids(tx, session_id, len(events), fenced, locked, ids)
    seq = int(locked[0])
    epoch = claim and claim.epoch
    stored: list[StoredEvent] = []
    rows: list[tuple[object, ...]] = []
    bodies = [dump_event(event) for event in events] if data is None else data
    if tx.cipher is not None:
        bodies = [sealed(tx.cipher, session_id, body) for body in bodies]
    for event, event_id, body in zip(events, event_ids, bodies, strict=True):
        seq += 1
        rows.append((event_id, session_id, seq, event.type, now_ms, body, epoch))
        stored.append(StoredEvent(int(event_id), session_id, seq, now_ms, event))
    _insert_events(tx, rows)
    changes = AppendRows()  # (the rows its events add, written together)
    for item in stored:
        project(tx, session_id, item.seq, item.event, changes)
    changes.write(tx, session_id)
    shapes = SHAPES_DIGEST if any(_has_body(e) for e in events) else None
    _update_row(tx, session_id, locked, shapes, seq, now_ms, changes)
    tx.notify(session_id)
    return stored


def _update_row(
    tx: Tx,
    session_id: str,
    locked: Row,
    shapes: str | None,
    seq: int,
    now_ms: int,
    changes: AppendRows,
) -> None:
    """Write what the append changes of its session's row (`locked`, as `lock_session` read
    it; `shapes` those of the message bodies it stores, if any; `seq` the last event's).
    PostgreSQL: `last_seq` and `updated_ms` always. SQLite: they are the log's
    (`_records.last_seq_sql`), so an append that changes nothing else of the row (a message,
    an admission) writes no page of it (migration 37)."""
    sqlite = tx.kind == "sqlite"
    sql, params = ("", ()) if sqlite else (", last_seq = ?, updated_ms = ?", (seq, now_ms))
    # `listed_ms` is only assigned when it moves: an unchanged listing index is left untouched.
    if listed_ms_after(int(locked[2]), now_ms) != int(locked[2]):
        sql, params = f"{sql}, listed_ms = ?", (*params, now_ms)
    changed, changed_params = changes.assignments()
    # (SQLite's lock row ends with them: assigned only when they would change)
    if shapes and not (sqlite and locked[4] in (shapes, "-")):
        sql, params = sql + _SHAPES_KEPT, (*params, shapes, shapes)
    sql, params = sql + changed, (*params, *changed_params)
    if sql:
        tx.send(f"UPDATE sessions SET {sql[2:]} WHERE id = ?", (*params, session_id))


# A write that stores message bodies sets its session's `message_shapes` (migration 19) to the
# shapes it wrote them under (the digest, given twice) while every body the session holds was
# written under those, else to '-' for good: the session's bodies may then be of mixed shapes.
_SHAPES_KEPT = (
    ", message_shapes = CASE WHEN message_shapes IS NULL OR message_shapes = ? THEN ? ELSE '-' END"
)


def _has_body(event: SessionEvent) -> bool:
    """Whether the event's stored body holds a message a transcript reads back from it
    (`message.added`, a version-1 delivery, a history edit replacing a text)."""
    return getattr(event, "message", None) is not None


# Events per INSERT statement: one statement per row cost PostgreSQL's client as much CPU as
# the row; 100 rows keep the parameters (7 each) far below SQLite's and PostgreSQL's limits.
_EVENT_ROWS = 100


def _insert_events(tx: Tx, rows: Sequence[tuple[object, ...]]) -> None:
    """Insert the event rows in multi-row statements (their order within a transaction does
    not matter: ids and seqs are given, and no projection reads the events table)."""
    for start in range(0, len(rows), _EVENT_ROWS):
        chunk = rows[start : start + _EVENT_ROWS]
        tx.send(
            "INSERT INTO event_log (id, sk, seq, type, at_ms, data, epoch) VALUES "
            + ", ".join(f"(?, {SESSION_KEY}, ?, ?, ?, ?, ?)" for _ in chunk),
            tuple(v for row in chunk for v in row),
        )


def put_blob_in(tx: Tx, data: bytes, session_id: str | None, now_ms: int) -> str:
    """Store `data` once by its SHA-256 digest (and reference it from the session) in `tx`."""
    [digest] = put_blobs_in(tx, [data], session_id, now_ms)
    return digest


# Blobs per INSERT statement (4 parameters each, as `_EVENT_ROWS` far below the limits).
_BLOB_ROWS = 100


def put_blobs_in(tx: Tx, blobs: Sequence[bytes], session_id: str | None, now_ms: int) -> list[str]:
    """`put_blob_in` for each of `blobs`, as one `INSERT` for the blobs and one for the
    session's references (per `_BLOB_ROWS`) instead of two statements per blob; returns the
    digests in the order given. Rows go in digest order, so two transactions storing the same
    new blobs wait on each other in one order (no deadlock)."""
    digests = [blob_digest(data) for data in blobs]
    cipher = tx.cipher
    if cipher is not None and session_id is not None:  # under keys the session holds
        from ._blob_keys import put_sealed_blobs

        put_sealed_blobs(tx, cipher, dict(zip(digests, blobs, strict=True)), session_id, now_ms)
        return digests
    rows = [  # encrypted without a session: under the store's blob key; `size` stays clear
        (digest, len(data), data if cipher is None else cipher.seal_blob(digest, data))
        for digest, data in sorted(dict(zip(digests, blobs, strict=True)).items())
    ]
    for start in range(0, len(rows), _BLOB_ROWS):
        chunk = rows[start : start + _BLOB_ROWS]
        tx.send(
            "INSERT INTO blobs (digest, size, data, created_ms) VALUES "
            + ", ".join("(?, ?, ?, ?)" for _ in chunk)
            + " ON CONFLICT DO NOTHING",
            tuple(v for digest, size, data in chunk for v in (digest, size, data, now_ms)),
        )
        if session_id is not None:
            tx.send(
                "INSERT INTO blob_refs (session_id, digest) VALUES "
                + ", ".join("(?, ?)" for _ in chunk)
                + " ON CONFLICT DO NOTHING",
                tuple(v for digest, _, _ in chunk for v in (session_id, digest)),
            )
    return digests
