"""Listing, forking, archiving, pruning and deleting sessions.

Invariant: listing reads only the sessions table, through its listing index (never a
transcript); a prune preview counts exactly the rows its delete would remove; a delete takes a
whole tree from every table in one transaction, with the blobs nothing references any more.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .._ids import new_session_id
from ..errors import NotFoundError, UsageError
from ._access import record_deletions_in
from ._append import append_events
from ._backend import Tx
from ._cipher import opened
from ._listing import LIST_SLACK_MS
from ._records import Page, PruneCounts, row_cols, session_row, updated_ms_sql
from ._session_key import session_keys
from ._sessions import get_row, insert_session
from ._transcript import transcript_in
from ._typed_events import typed

if TYPE_CHECKING:
    from ..events import CompactionTail, SessionEvent

# A session's rows, in the order they go: `message_log` before `inbox` and `event_log`, which
# SQLite's search triggers read for the entry a deleted row takes out (`_search_log`).
_TABLES = (
    "message_log",
    "inbox",
    "tool_calls",
    "turns",
    "receipts",
    "claims",
    "retry_state",
    "work_state",
    "instruction_state",
    "search_docs",
    "session_waits",
    "reverts",
    "artifacts",
    "extension_state",
    "event_log",
)
_KEYED = ("message_log", "event_log")  # by the session's integer key (`_session_key`)


def list_page(
    tx: Tx,
    roots_only: bool,
    archived: bool | None,
    limit: int,
    cursor: str | None,
    agent: str | None = None,
    location: str | None = None,
) -> Page:
    """One page, newest first by exact (updated_ms, id), keyset-paged, read from the listing index.

    The index orders by `listed_ms`, which trails `updated_ms` by less than `LIST_SLACK_MS`. The
    (limit+1)-th matching row in index order, at `listed_ms` L, shows that limit+1 rows have
    `updated_ms >= L`; a row with `listed_ms <= L - LIST_SLACK_MS` has `updated_ms < L`, so the
    exact page lies in the index range above that, which the second query sorts.
    """
    if limit < 1:
        raise UsageError("limit must be at least 1")
    where: list[str] = []
    params: list[Any] = []
    if roots_only:
        where.append("parent_id IS NULL")
    if archived is not None:
        where.append("archived_ms IS NOT NULL" if archived else "archived_ms IS NULL")
    for column, value in (("agent", agent), ("location", location)):
        if value is not None:  # (roots of one location: the `sessions_location` index)
            where.append(f"{column} = ?")
            params.append(value)
    if cursor:
        try:
            at, sid = cursor.split(":", 1)
            at_ms = int(at)
        except ValueError:
            raise UsageError(f"bad cursor {cursor!r}") from None
        # listed_ms <= updated_ms: the bound lets the index skip everything newer.
        updated = updated_ms_sql(tx.kind)
        where.append(f"listed_ms <= ? AND ({updated} < ? OR ({updated} = ? AND id < ?))")
        params += [at_ms, at_ms, at_ms, sid]
    cond = " AND ".join(where) if where else "1 = 1"
    bound = tx.one(
        f"SELECT listed_ms FROM sessions WHERE {cond} ORDER BY listed_ms DESC, id DESC "
        "LIMIT 1 OFFSET ?",
        [*params, limit],
    )
    sql = f"SELECT {row_cols(tx.kind)} FROM sessions WHERE {cond}"
    if bound is not None:  # else at most `limit` rows match at all
        sql += " AND listed_ms > ?"
        params.append(int(bound[0]) - LIST_SLACK_MS)
    order = f" ORDER BY {updated_ms_sql(tx.kind)} DESC, id DESC LIMIT ?"
    rows = tx.all(sql + order, [*params, limit + 1])
    sessions = [session_row(r) for r in rows[:limit]]
    more = len(rows) > limit
    return Page(sessions, f"{sessions[-1].updated_ms}:{sessions[-1].id}" if more else None)


def fork_in(tx: Tx, session_id: str, through: int | None, fields: dict[str, Any], now: int) -> str:
    """Create a fork of `session_id` copying its messages through `through` (default: all),
    and its newest `compaction.tail` hide point among them, at its place in the log (so the
    fork's next request hides what the parent's would: docs/compaction.md)."""
    from ..events import MessageAdded, SessionCreated

    parent = get_row(tx, session_id)
    if parent is None:
        raise NotFoundError(f"no session {session_id}")
    upto = parent.last_seq if through is None else through
    if upto < 0 or upto > parent.last_seq:
        raise UsageError(f"fork point {upto} is outside 0..{parent.last_seq}")
    sid = fields.pop("session_id", None) or new_session_id()
    meta = tx.one("SELECT metadata FROM sessions WHERE id = ?", (session_id,))
    created = SessionCreated(
        title=fields.pop("title", parent.title),
        agent=fields.pop("agent", parent.agent),
        model=fields.pop("model", parent.model),
        forked_from=session_id,
        fork_seq=upto,
        location=fields.pop("location", parent.location),
        metadata=fields.pop("metadata", None)
        or (json.loads(opened(meta[0])) if meta and meta[0] else None),
        **fields,
    )
    insert_session(tx, sid, created, now)
    messages = transcript_in(tx, session_id, 0, upto)
    tail = _newest_tail(tx, session_id, upto)
    at = len(messages) if tail is None else sum(seq < tail[0] for seq, _m in messages)
    before: list[SessionEvent] = [MessageAdded(message=m) for _seq, m in messages[:at]]
    stored = append_events(tx, sid, before, now) if before else []
    ids = [m.id for _seq, m in messages[:at]]
    if tail is not None and tail[1].hide_before_id in ids[1:]:  # the `tail` strategy's hide
        # point, where it was recorded (`through_seq`: the fork's seq of the message before it)
        through = stored[ids.index(tail[1].hide_before_id) - 1].seq
        carried = tail[1].model_copy(update={"through_seq": through, "input_id": None})
        append_events(tx, sid, [carried], now)
    after: list[SessionEvent] = [MessageAdded(message=m) for _seq, m in messages[at:]]
    if after:
        append_events(tx, sid, after, now)
    return sid


def _newest_tail(tx: Tx, session_id: str, upto: int) -> tuple[int, CompactionTail] | None:
    """The session's newest `compaction.tail` at or before `upto`, with its seq."""
    from ..events import CompactionTail, load_event

    row = tx.one(
        "SELECT seq, data FROM events WHERE session_id = ? AND type = 'compaction.tail' "
        f"AND {typed()} AND seq <= ? ORDER BY seq DESC LIMIT 1",
        (session_id, upto),
    )
    event = None if row is None else load_event(row[1])
    return None if row is None or not isinstance(event, CompactionTail) else (int(row[0]), event)


def _tree_ids(tx: Tx, roots: list[str]) -> list[str]:
    ids: list[str] = []
    frontier = list(roots)
    while frontier:
        ids += frontier
        marks = ", ".join("?" for _ in frontier)
        frontier = [
            r[0] for r in tx.all(f"SELECT id FROM sessions WHERE parent_id IN ({marks})", frontier)
        ]
    return ids


def _count(tx: Tx, ids: list[str], roots: int) -> PruneCounts:
    if not ids:
        return PruneCounts()
    marks = ", ".join("?" for _ in ids)
    events = tx.one(f"SELECT COUNT(*) FROM events WHERE session_id IN ({marks})", ids)
    messages = tx.one(f"SELECT COUNT(*) FROM messages WHERE session_id IN ({marks})", ids)
    return PruneCounts(
        len(ids), int(events[0]) if events else 0, int(messages[0]) if messages else 0, ids, roots
    )


def delete_trees(
    tx: Tx, roots: list[str], now: int, actor: str | None = None, how: str = "delete"
) -> PruneCounts:
    """Delete the given sessions with their descendants everywhere, leaving a tombstone of
    each given one that says who (`actor`) and how (`delete`, `prune`); return what went."""
    ids = _tree_ids(tx, roots)
    counts = _count(tx, ids, len(roots))
    if not ids:
        return counts
    record_deletions_in(tx, roots, now, actor, how)
    marks = ", ".join("?" for _ in ids)
    digests = [
        r[0]
        for r in tx.all(f"SELECT DISTINCT digest FROM blob_refs WHERE session_id IN ({marks})", ids)
    ]
    for table in (*_TABLES, "blob_refs"):
        column = (
            f"sk IN {session_keys(len(ids))}" if table in _KEYED else f"session_id IN ({marks})"
        )
        tx.run(f"DELETE FROM {table} WHERE {column}", ids)
    tx.run(f"DELETE FROM sessions WHERE id IN ({marks})", ids)
    if tx.cipher is not None:  # their data keys go: what any copy holds of them is unreadable
        tx.cipher.forget(ids)
    for digest in digests:
        tx.run(
            "DELETE FROM blobs WHERE digest = ? AND NOT EXISTS "
            "(SELECT 1 FROM blob_refs WHERE blob_refs.digest = blobs.digest)",
            (digest,),
        )
    return counts


def prune_in(
    tx: Tx, older_than_ms: int, action: str, now: int, actor: str | None = None
) -> PruneCounts:
    """Preview, archive or delete root sessions not updated since `older_than_ms`."""
    from ..events import SessionUpdated

    roots = [
        r[0]
        for r in tx.all(
            # listed_ms <= updated_ms: the index range below the cutoff holds every such root.
            "SELECT id FROM sessions WHERE parent_id IS NULL AND listed_ms < ? "
            f"AND {updated_ms_sql(tx.kind)} < ? ORDER BY id",
            (older_than_ms, older_than_ms),
        )
    ]
    if action == "delete":
        return delete_trees(tx, roots, now, actor, "prune")
    counts = _count(tx, _tree_ids(tx, roots), len(roots))
    if action == "archive":
        for sid in roots:
            append_events(tx, sid, [SessionUpdated(archived=True)], now)
    return counts
