"""`SqlStore`: the durable store over a SQLite or PostgreSQL backend.

Every change is events plus their projection rows in one transaction (`_append`). Reads come
from projections and the log. The store is synchronous; async callers run it in a thread.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pydantic import JsonValue

from ..clock import Clock, SystemClock
from ..errors import NotFoundError, UsageError
from ..events import (
    Delivery,
    InputKind,
    MessageAdded,
    SessionCreated,
    SessionEvent,
    SessionUpdated,
    StoredEvent,
    load_event,
)
from ..messages import Message
from . import _inbox, _retention
from ._append import LIST_SLACK_MS, ClaimToken, append_events
from ._backend import Backend, Tx
from ._claims import ClaimsMixin
from ._reads import ReadsMixin
from ._records import Admission, Delivered, InboxItem, Page, PruneCounts, SessionRow, SyncMarker

SESSION_COLS = (
    "id, parent_id, root_id, forked_from, fork_seq, title, agent, model, status, archived_ms, "
    "created_ms, updated_ms, last_seq, input_tokens, output_tokens, cost_usd"
)


def new_session_id() -> str:
    """A fresh session id: ``ses_`` + 24 hex characters."""
    return f"ses_{secrets.token_hex(12)}"


def session_row(row: Sequence[Any]) -> SessionRow:
    """Build a `SessionRow` from a row selected with `SESSION_COLS`."""
    return SessionRow(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8],
        row[9] is not None, int(row[10]), int(row[11]), int(row[12]), int(row[13]),
        int(row[14]), float(row[15]),
    )  # fmt: skip


class SqlStore(ClaimsMixin, ReadsMixin):
    """The store. Open one with `wakeful.store.open_store(url)`."""

    def __init__(self, backend: Backend, clock: Clock | None = None) -> None:
        self.backend = backend
        self.clock: Clock = clock or SystemClock()

    @property
    def url(self) -> str:
        """Where the data lives (a path or a PostgreSQL URL)."""
        return self.backend.url

    def close(self) -> None:
        """Release the database connections."""
        self.backend.close()

    # -- sessions -------------------------------------------------------------------------

    def create_session(self, session_id: str | None = None, **fields: Any) -> SessionRow:
        """Insert a session row and its `session.created` event; return the row."""
        sid = session_id or new_session_id()
        with self.backend.transaction(write=True) as tx:
            self._insert_session(tx, sid, SessionCreated(**fields))
            row = self._get(tx, sid)
        assert row is not None
        return row

    def _insert_session(self, tx: Tx, sid: str, created: SessionCreated) -> None:
        now = self.clock.now_ms()
        root = created.root_id or sid
        if created.parent_id is not None and created.root_id is None:
            parent = tx.one("SELECT root_id FROM sessions WHERE id = ?", (created.parent_id,))
            if parent is None:
                raise NotFoundError(f"no parent session {created.parent_id}")
            root = parent[0]
        inserted = tx.run(
            "INSERT INTO sessions (id, parent_id, root_id, forked_from, fork_seq, title, agent, "
            "model, created_ms, updated_ms, listed_ms, metadata) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (sid, created.parent_id, root, created.forked_from, created.fork_seq, created.title,
             created.agent, created.model, now, now, now,
             None if created.metadata is None else json.dumps(created.metadata)),
        )  # fmt: skip
        if inserted != 1:
            raise UsageError(f"session {sid} already exists")
        append_events(tx, sid, [created.model_copy(update={"root_id": root})], now)

    def get_session(self, session_id: str) -> SessionRow:
        """Return the session's row; `NotFoundError` if there is none."""
        with self.backend.transaction(write=False) as tx:
            row = self._get(tx, session_id)
        if row is None:
            raise NotFoundError(f"no session {session_id}")
        return row

    def find_session(self, session_id: str) -> SessionRow | None:
        """Return the session's row, or None."""
        with self.backend.transaction(write=False) as tx:
            return self._get(tx, session_id)

    def _get(self, tx: Tx, session_id: str) -> SessionRow | None:
        row = tx.one(f"SELECT {SESSION_COLS} FROM sessions WHERE id = ?", (session_id,))
        return None if row is None else session_row(row)

    def update_session(
        self, session_id: str, claim: ClaimToken | None = None, **fields: Any
    ) -> None:
        """Change title, agent, model or the archive marker through a `session.updated` event."""
        self.append(session_id, [SessionUpdated(**fields)], claim)

    def latest_session(self, workspace: str | None = None) -> SessionRow | None:
        """The most recently updated root session not archived (of `workspace`, when given)."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT id, metadata, updated_ms, listed_ms FROM sessions "
                "WHERE parent_id IS NULL AND archived_ms IS NULL "
                "ORDER BY listed_ms DESC, id DESC LIMIT 500"
            )
            best: tuple[int, str] | None = None
            for sid, meta, updated, listed in rows:
                if best is not None and int(listed) + LIST_SLACK_MS <= best[0]:
                    break  # every later row was updated before `best` (see LIST_SLACK_MS)
                key = (int(updated), sid)
                matches = (
                    workspace is None or json.loads(meta or "{}").get("workspace") == workspace
                )
                if matches and (best is None or key > best):
                    best = key
            if best is not None:
                return self._get(tx, best[1])
        return None

    def interrupt_requested(self, session_id: str, after_seq: int) -> bool:
        """Whether an interrupt was requested in the session's log after `after_seq`."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                "SELECT 1 FROM events WHERE session_id = ? AND seq > ? "
                "AND type = 'session.interrupt_requested' LIMIT 1",
                (session_id, after_seq),
            )
        return row is not None

    def last_event_id(self) -> int:
        """The newest global event id (0 for an empty store)."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one("SELECT MAX(id) FROM events")
        return int(row[0]) if row and row[0] is not None else 0

    def interrupts_after(self, after_id: int) -> tuple[int, list[tuple[int, str]]]:
        """Interrupt requests with global id > `after_id` as (id, session), and the newest id.

        One cheap query per poll serves every session a process drives: it reads only the
        events committed since the previous poll.
        """
        with self.backend.transaction(write=False) as tx:
            newest = tx.one("SELECT MAX(id) FROM events")
            top = int(newest[0]) if newest and newest[0] is not None else after_id
            rows = tx.all(
                "SELECT id, session_id FROM events WHERE id > ? AND id <= ? "
                "AND type = 'session.interrupt_requested' ORDER BY id",
                (after_id, top),
            )
        return top, [(int(r[0]), r[1]) for r in rows]

    def append_and_admit(
        self, session_id: str, events: Sequence[SessionEvent], claim: ClaimToken | None,
        *, target_id: str, input_id: str, kind: InputKind, payload: dict[str, JsonValue],
        delivery: Delivery = "steer",
    ) -> Admission:  # fmt: skip
        """Append `events` to one session and admit an input to another, in one transaction.

        A background child settles this way: its `turn.ended` and its report in the parent's
        inbox commit together, so no crash can lose the report. Admission is idempotent by
        `input_id` as usual.
        """
        with self.backend.transaction(write=True) as tx:
            append_events(tx, session_id, events, self.clock.now_ms(), claim)
            admitted = _inbox.admit_in(
                tx, target_id, input_id, kind, payload, delivery, self.clock.now_ms()
            )
            if admitted is None:
                raise NotFoundError(f"no session {target_id}")
            item, created = admitted
        return Admission(item, created)

    # -- events -----------------------------------------------------------------------------

    def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        claim: ClaimToken | None = None,
        *,
        blobs: Sequence[bytes] = (),
    ) -> list[StoredEvent]:
        """Append events (and their projections) in one transaction; with `claim`, fenced.

        `blobs` are stored (once, by digest) and referenced by the session in the same
        transaction, so an event never points at a blob that is not there.
        """
        with self.backend.transaction(write=True) as tx:
            stored = append_events(tx, session_id, events, self.clock.now_ms(), claim)
            for data in blobs:
                self._put_blob(tx, data, session_id)
            return stored

    def add_message(
        self, session_id: str, message: Message, *, turn_id: str | None = None,
        claim: ClaimToken | None = None,
    ) -> StoredEvent:  # fmt: skip
        """Append one transcript message."""
        return self.append(session_id, [MessageAdded(message=message, turn_id=turn_id)], claim)[0]

    def events(
        self, session_id: str, after: int = 0, limit: int | None = None, types: Sequence[str] = ()
    ) -> list[StoredEvent]:
        """Durable events of a session with `seq > after`, in order (optionally of some types)."""
        sql = "SELECT id, seq, at_ms, data FROM events WHERE session_id = ? AND seq > ?"
        params: list[Any] = [session_id, after]
        if types:
            sql += f" AND type IN ({', '.join('?' for _ in types)})"
            params += list(types)
        sql += " ORDER BY seq" + (f" LIMIT {int(limit)}" if limit else "")
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(sql, params)
            # Rows prove the session exists; only an empty answer needs the check.
            if not rows and self._get(tx, session_id) is None:
                raise NotFoundError(f"no session {session_id}")
        return [
            StoredEvent(int(r[0]), session_id, int(r[1]), int(r[2]), load_event(r[3])) for r in rows
        ]

    def events_since(self, after_id: int = 0, limit: int = 1000) -> list[StoredEvent]:
        """Durable events of every session with global `id > after_id`, in id order."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT id, session_id, seq, at_ms, data FROM events WHERE id > ? ORDER BY id LIMIT ?",
                (after_id, limit),
            )
        return [StoredEvent(int(r[0]), r[1], int(r[2]), int(r[3]), load_event(r[4])) for r in rows]

    def high_water(self, session_id: str) -> int:
        """The session's newest `seq` (its change counter); `NotFoundError` if unknown."""
        return self.get_session(session_id).last_seq

    def log(
        self, session_id: str, after: int = 0, *, follow: bool = False,
        idle_timeout_s: float | None = None, stop: Callable[[], bool] | None = None,
    ) -> Iterator[StoredEvent | SyncMarker]:  # fmt: skip
        """Yield durable events after `after`; with `follow`, a `SyncMarker` then live events.

        Following subscribes before replay (the watermark is captured after subscribing), so no
        event is missed or repeated, also when written by another process. It ends when `stop()`
        is true or nothing arrives for `idle_timeout_s`.
        """
        if follow:
            self.backend.wait_for_change(0)  # subscribe (LISTEN) before capturing the watermark
        watermark = self.high_water(session_id)
        last = after
        while last < watermark:
            batch = self.events(session_id, last, limit=1000)
            for ev in batch:
                if ev.seq > watermark:
                    break
                yield ev
                last = ev.seq
            if not batch:
                break
        if not follow:
            return
        last = max(last, watermark)
        yield SyncMarker(last)
        yield from self._follow(
            lambda after: self.events(session_id, after, limit=1000),
            last, lambda ev: ev.seq, idle_timeout_s, stop,
        )  # fmt: skip

    def log_all(
        self, after_id: int = 0, *, follow: bool = False, idle_timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[StoredEvent | SyncMarker]:  # fmt: skip
        """Instance-wide log over every session by global id; same follow contract as `log`."""
        if follow:
            self.backend.wait_for_change(0)
        last = after_id
        while batch := self.events_since(last):
            yield from batch
            last = batch[-1].id
        if not follow:
            return
        yield SyncMarker(last)
        yield from self._follow(self.events_since, last, lambda ev: ev.id, idle_timeout_s, stop)

    def _follow(
        self, fetch: Callable[[int], list[StoredEvent]], start: int,
        key: Callable[[StoredEvent], int], idle_timeout_s: float | None,
        stop: Callable[[], bool] | None,
    ) -> Iterator[StoredEvent]:  # fmt: skip
        last = start
        idle_since = time.monotonic()
        while not (stop and stop()):
            batch = fetch(last)
            if batch:
                idle_since = time.monotonic()
                yield from batch
                last = key(batch[-1])
                continue
            if idle_timeout_s is not None and time.monotonic() - idle_since >= idle_timeout_s:
                return
            self.backend.wait_for_change(
                0.5 if idle_timeout_s is None else min(0.5, idle_timeout_s)
            )

    # -- messages ---------------------------------------------------------------------------

    def messages(self, session_id: str, after_seq: int = 0) -> list[Message]:
        """The transcript: every message (delivered inputs included) in log order."""
        return [m for _seq, m in self.messages_with_seq(session_id, after_seq)]

    def messages_with_seq(self, session_id: str, after_seq: int = 0) -> list[tuple[int, Message]]:
        """The transcript with each message's `seq`."""
        with self.backend.transaction(write=False) as tx:
            found = _inbox.transcript_in(tx, session_id, after_seq)
            if not found and self._get(tx, session_id) is None:  # rows prove it exists
                raise NotFoundError(f"no session {session_id}")
            return found

    # -- inbox ------------------------------------------------------------------------------

    def admit(
        self, session_id: str, input_id: str | None, kind: InputKind,
        payload: dict[str, JsonValue], delivery: Delivery = "steer",
        *, create: SessionCreated | None = None,
    ) -> Admission:  # fmt: skip
        """Admit one input durably, before any execution (invariants 1 and 3).

        With `create`, a session that does not exist yet is inserted in the same transaction
        (lazy materialization); without it, an unknown session raises `NotFoundError`.
        """
        if delivery not in ("steer", "queue"):
            raise UsageError(f"delivery must be 'steer' or 'queue', not {delivery!r}")
        iid = input_id or f"in_{secrets.token_hex(12)}"
        now = self.clock.now_ms()
        if not self.backend.admits_on_server:  # SQLite: one transaction here
            with self.backend.transaction(write=True) as tx:
                return self._admit_here(tx, session_id, iid, kind, payload, delivery, now, create)
        # PostgreSQL: the whole admission is one statement, its own transaction.
        row = self.backend.admit_alone(
            *_inbox.server_admission(session_id, iid, kind, payload, delivery, now)
        )
        admitted = _inbox.admission_outcome(
            row, session_id, iid, kind, payload, delivery, lambda: self.input(session_id, iid)
        )
        if admitted is not None:
            return Admission(*admitted)
        with self.backend.transaction(write=True) as tx:  # no such session: nothing was written
            return self._admit_here(tx, session_id, iid, kind, payload, delivery, now, create)

    def _admit_here(
        self, tx: Tx, session_id: str, iid: str, kind: InputKind, payload: dict[str, JsonValue],
        delivery: Delivery, now: int, create: SessionCreated | None,
    ) -> Admission:  # fmt: skip
        """Admit inside `tx`, inserting the session first when it is missing and `create` says
        how (lazy materialization)."""
        admitted = _inbox.admit_in(tx, session_id, iid, kind, payload, delivery, now)
        made = False
        if admitted is None:
            if create is None:
                raise NotFoundError(f"no session {session_id}")
            self._insert_session(tx, session_id, create)
            admitted = _inbox.admit_in(tx, session_id, iid, kind, payload, delivery, now)
            assert admitted is not None
            made = True
        item, created = admitted
        return Admission(item, created, made)

    def promote(
        self, session_id: str, *, idle: bool, input_id: str | None = None,
        claim: ClaimToken | None = None, start_turn: str | None = None,
    ) -> list[Delivered]:  # fmt: skip
        """Deliver the next inbox items (steers FIFO; one queued item when idle) atomically.

        With `start_turn`, delivered messages also start that turn in the same transaction.
        """
        with self.backend.transaction(write=True) as tx:
            return _inbox.promote_in(
                tx, session_id, self.clock.now_ms(), idle=idle, input_id=input_id, claim=claim,
                start_turn=start_turn,
            )  # fmt: skip

    def pending(self, session_id: str) -> list[InboxItem]:
        """Pending inbox items in enqueue order."""
        with self.backend.transaction(write=False) as tx:
            return _inbox.pending_items(tx, session_id)

    def input(self, session_id: str, input_id: str) -> InboxItem:
        """One inbox item by id; `NotFoundError` if unknown."""
        with self.backend.transaction(write=False) as tx:
            item = _inbox.get_item(tx, session_id, input_id)
        if item is None:
            raise NotFoundError(f"no input {input_id} in session {session_id}")
        return item

    # -- blobs ------------------------------------------------------------------------------

    def put_blob(self, data: bytes, session_id: str | None = None) -> str:
        """Store bytes once by SHA-256 and return the hex digest; with a session, reference it."""
        with self.backend.transaction(write=True) as tx:
            if session_id is not None and self._get(tx, session_id) is None:
                raise NotFoundError(f"no session {session_id}")  # an orphan ref would pin it
            return self._put_blob(tx, data, session_id)

    def _put_blob(self, tx: Tx, data: bytes, session_id: str | None) -> str:
        digest = hashlib.sha256(data).hexdigest()
        tx.run(
            "INSERT INTO blobs (digest, size, data, created_ms) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (digest, len(data), data, self.clock.now_ms()),
        )
        if session_id is not None:
            tx.run(
                "INSERT INTO blob_refs (session_id, digest) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (session_id, digest),
            )
        return digest

    def get_blob(self, digest: str) -> bytes:
        """The bytes of a blob; `NotFoundError` if absent."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one("SELECT data FROM blobs WHERE digest = ?", (digest,))
        if row is None:
            raise NotFoundError(f"no blob {digest}")
        return bytes(row[0])

    # -- listing and retention ----------------------------------------------------------------

    def list_sessions(
        self, *, roots_only: bool = True, archived: bool | None = False, limit: int = 50,
        cursor: str | None = None,
    ) -> Page:  # fmt: skip
        """A page of sessions, newest first, answered from the sessions index alone."""
        with self.backend.transaction(write=False) as tx:
            return _retention.list_page(tx, roots_only, archived, limit, cursor)

    def fork(
        self, session_id: str, through_seq: int | None = None, *, new_id: str | None = None,
        **fields: Any,
    ) -> SessionRow:  # fmt: skip
        """Copy a session's messages through `through_seq` into a new session (`new_id`, or a
        fresh id); the parent is untouched. Other `fields` override title, agent, model."""
        with self.backend.transaction(write=True) as tx:
            sid = _retention.fork_in(
                self, tx, session_id, through_seq, {**fields, "session_id": new_id}
            )
            row = self._get(tx, sid)
        assert row is not None
        return row

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Set or clear the reversible archive marker."""
        self.update_session(session_id, archived=archived)

    def prune(self, older_than_ms: int, action: str = "preview") -> PruneCounts:
        """Root sessions idle since before `older_than_ms` (and their children).

        `action` is ``preview`` (writes nothing), ``archive`` or ``delete``; the preview's counts
        equal what the delete removes.
        """
        if action not in ("preview", "archive", "delete"):
            raise UsageError(f"prune action must be preview, archive or delete, not {action!r}")
        with self.backend.transaction(write=action != "preview") as tx:
            return _retention.prune_in(self, tx, older_than_ms, action)

    def delete(self, session_id: str) -> PruneCounts:
        """Delete a session and its descendants from every table, and blobs no longer used."""
        with self.backend.transaction(write=True) as tx:
            if self._get(tx, session_id) is None:
                raise NotFoundError(f"no session {session_id}")
            return _retention.delete_trees(tx, [session_id])
