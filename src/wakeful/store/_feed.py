"""`Feed`: the instance-wide log, every session's events in one order (`SqlStore.feed`).

What a follower of the whole store reads (the server's hub, a coordinator's interrupt watcher,
a worker waiting for work): events after a position, the newest position, interrupt requests
since a poll, and the announcements to wait on: commits, admissions, interrupt requests
(docs/store.md, "Instance-wide order").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..events import StoredEvent
    from ._backend import Backend, Pending, Row, Tx


@dataclass(frozen=True, slots=True)
class _OrderedSql:
    """The instance-wide log's reads for one backend (docs/store.md, "Instance-wide order")."""

    since: str
    since_known: str
    last: str
    interrupts: str


# The horizon: the oldest transaction still running in the reading snapshot, leaving out those
# known not to write events: another database's (without this, any long transaction elsewhere
# on the server would hold the follow back) and autovacuum's (an ANALYZE holds an xid while it
# runs, and would hold the follow back as long). A backend's `backend_xid` is a 32-bit xid: running xids lie within 2^31 of each other, so it
# names one.
_BELOW_XMIN = (
    "tx < COALESCE((SELECT min(x) FROM pg_snapshot_xip(pg_current_snapshot()) x "
    "WHERE mod(x::text::bigint, 4294967296) NOT IN (SELECT a.backend_xid::text::bigint FROM "
    "pg_stat_activity a WHERE a.backend_xid IS NOT NULL AND (a.backend_type = "
    "'autovacuum worker' OR a.datid <> (SELECT d.oid FROM pg_database d "
    "WHERE d.datname = current_database())))), "
    "pg_snapshot_xmax(pg_current_snapshot()))"
)
_COLUMNS = "id, session_id, seq, at_ms, data"
_ORDERED = {
    # One writer at a time: ids commit in id order.
    "sqlite": _OrderedSql(
        since=f"SELECT {_COLUMNS}, 0 FROM events WHERE id > ? ORDER BY id LIMIT ?",
        since_known="",
        last="SELECT 0, MAX(id) FROM event_log",
        interrupts="WITH top AS (SELECT MAX(id) AS id FROM event_log) "
        "SELECT t.id, e.id, s.id FROM top t LEFT JOIN event_log e ON e.id > ? "
        "AND e.id <= t.id AND e.type = 'session.interrupt_requested' "
        "LEFT JOIN sessions s ON s.k = e.sk ORDER BY e.id",
    ),
    # (tx, id) order, only below the snapshot's xmin: no transaction can commit behind it.
    "postgres": _OrderedSql(
        since=f"SELECT {_COLUMNS}, tx::text::bigint FROM events WHERE (tx, id) > "
        "(COALESCE((SELECT c.tx FROM event_log c WHERE c.id = ?), '0'::xid8), ?) "
        f"AND {_BELOW_XMIN} ORDER BY tx, id LIMIT ?",
        since_known=f"SELECT {_COLUMNS}, tx::text::bigint FROM events WHERE (tx, id) > "
        f"((?::text)::xid8, ?) AND {_BELOW_XMIN} ORDER BY tx, id LIMIT ?",
        last=f"SELECT tx::text::bigint, id FROM event_log WHERE {_BELOW_XMIN} "
        "ORDER BY tx DESC, id DESC LIMIT 1",
        interrupts=f"WITH top AS (SELECT tx, id FROM event_log WHERE {_BELOW_XMIN} "
        "ORDER BY tx DESC, id DESC LIMIT 1) "
        "SELECT t.id, e.id, s.id FROM top t LEFT JOIN event_log e ON (e.tx, e.id) > "
        "(COALESCE((SELECT c.tx FROM event_log c WHERE c.id = ?), '0'::xid8), ?) "
        "AND (e.tx, e.id) <= (t.tx, t.id) AND e.type = 'session.interrupt_requested' "
        "LEFT JOIN sessions s ON s.k = e.sk ORDER BY e.tx, e.id",
    ),
}


def _ordered(kind: str) -> _OrderedSql:
    return _ORDERED[kind]


def last_position_query(tx: Tx, kind: str) -> Pending:
    """Send `Feed.last_event_position`'s statement in `tx` (read with `position_from`): a
    drive's context read sends it with its own (`SessionRead.drive`: where the process's
    interrupt watching starts for the drive)."""
    return tx.query(_ordered(kind).last)


def position_from(row: Row | None) -> tuple[int, int]:
    """The `(tx, id)` position `last_position_query` read ((0, 0): an empty store)."""
    return (int(row[0]), int(row[1])) if row and row[1] is not None else (0, 0)


class Feed:
    """The instance-wide log of one store (see the module docstring)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def events_since(
        self, after_id: int = 0, limit: int = 1000, *, after_tx: int | None = None
    ) -> list[StoredEvent]:
        """Durable events of every session after the event `after_id` in the instance-wide
        log's order (`StoredEvent.position`; id order on SQLite), only those no transaction can
        still precede: read again after the last one returned, nothing is skipped or repeated.
        `after_tx` is that event's `tx` when the caller knows it (it saves a lookup and survives
        the event's deletion); otherwise it is looked up (`event_position`)."""
        from ..events import StoredEvent, load_event

        q = _ordered(self.backend.kind)
        with self.backend.transaction(write=False) as tx:
            if self.backend.kind != "postgres":
                rows = tx.all(q.since, (after_id, limit))
            elif after_tx is None:
                rows = tx.all(q.since, (after_id, after_id, limit))
            else:
                rows = tx.all(q.since_known, (after_tx, after_id, limit))
        return [
            StoredEvent(int(r[0]), r[1], int(r[2]), int(r[3]), load_event(r[4]), int(r[5]))
            for r in rows
        ]

    def wait_for_work(self, timeout_s: float) -> None:
        """Block until another process may have admitted input (what makes a session
        startable), or `timeout_s` passes (PostgreSQL: LISTEN on the admissions' channel, so
        appends to sessions do not wake a worker; SQLite: one poll interval)."""
        self.backend.wait_for_work(timeout_s)

    def announce_interrupt(self, session_id: str, request_id: int) -> None:
        """Tell the watchers of other processes that the interrupt request `request_id` (the
        global id of a committed `session.interrupt_requested`) asks to stop `session_id`
        (PostgreSQL: a NOTIFY on the interrupt channel, whoever follows; SQLite: nothing)."""
        self.backend.announce_interrupt(session_id, request_id)

    def wait_for_interrupts(self, timeout_s: float) -> tuple[bool, list[tuple[int, str]]] | None:
        """Block until an interrupt request is announced (`announce_interrupt`) or `timeout_s`
        passes; return whether listening began with this call (requests announced before it
        may have been missed: read them, `interrupts_after`) and the requests heard, as
        (request id, session id). None at once where nothing is announced (SQLite): poll
        `interrupts_after` instead."""
        return self.backend.wait_for_interrupts(timeout_s)

    def watch_commits(self, on_commit: Callable[[], None]) -> Callable[[], None]:
        """Call `on_commit` from another thread whenever a commit of any process is announced
        (PostgreSQL's NOTIFY; SQLite announces nothing, so it is never called and readers
        poll); return the function that stops watching (it waits for the watcher to end)."""
        return self.backend.watch_commits(on_commit)

    def last_event_id(self) -> int:
        """The id of the instance-wide log's last readable event (0 for an empty store)."""
        return self.last_event_position()[1]

    def last_event_position(self) -> tuple[int, int]:
        """The `(tx, id)` position of the instance-wide log's last readable event ((0, 0) for an
        empty store): every event before it is readable now, every later one comes after it."""
        with self.backend.transaction(write=False) as tx:
            return position_from(last_position_query(tx, self.backend.kind).one())

    def event_position(self, event_id: int) -> tuple[int, int]:
        """The position of the event a client's cursor `event_id` names; for an event no longer
        stored (its session deleted), `(0, event_id)`, which may repeat events, never skip."""
        if event_id <= 0 or self.backend.kind != "postgres":
            return (0, event_id)
        with self.backend.transaction(write=False) as tx:
            row = tx.one("SELECT tx::text::bigint FROM event_log WHERE id = ?", (event_id,))
        return (0 if row is None else int(row[0]), event_id)

    def interrupts_after(self, after_id: int) -> tuple[int, list[tuple[int, str]]]:
        """Interrupt requests after the event `after_id` in the instance-wide log as
        (id, session), and the id of the log's last readable event (the next `after_id`).

        One cheap statement per poll serves every session a process drives: it reads the
        log's last readable position and, up to it, only the events committed since the
        previous poll (one round trip and one commit; two of each when the position was a
        read of its own).
        """
        params = (after_id, after_id) if self.backend.kind == "postgres" else (after_id,)
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(_ordered(self.backend.kind).interrupts, params)
        if not rows or rows[0][0] is None:  # an empty store
            return after_id, []
        return int(rows[0][0]), [(int(r[1]), r[2]) for r in rows if r[1] is not None]
