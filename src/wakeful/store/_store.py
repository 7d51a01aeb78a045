"""`SqlStore`: the durable store over a SQLite or PostgreSQL backend.

Every change is events plus their projection rows in one transaction (`_append`). Reads come
from projections and the log. The store is synchronous; async callers run it in a thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from .._ids import new_session_id
from ..clock import Clock, SystemClock
from ..errors import NotFoundError, StoreError, UsageError
from . import _inbox, _retention, _search, _transcript
from ._access import Access, inherit_owner_in, set_owner_in
from ._admission import AdmissionMixin
from ._append import ClaimToken, append_events, put_blob_in, put_blobs_in
from ._backend import Backend, Tx, iter_chunks
from ._batch import BatchMixin
from ._blob_keys import open_blobs
from ._claims import Claims, demote_stale
from ._feed import Feed
from ._follow import FollowMixin
from ._listing import LIST_SLACK_MS
from ._rates import RateBuckets
from ._reads import ReadsMixin, events_in, plain_events_in
from ._records import (
    Claim,
    Delivered,
    InboxItem,
    Page,
    PruneCounts,
    SessionRow,
    row_cols,
    session_row,
    updated_ms_sql,
)
from ._schedules import Schedules
from ._sessions import get_row, insert_session
from ._shaping import Shaping
from ._unit import SqlSessionRead, SqlSessionWrite, session_read, session_write
from ._usage import Spend, UsageMixin

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..events import (
        PlainEvent,
        SessionCreated,
        SessionEvent,
        StoredEvent,
    )
    from ..messages import Message
    from ._artifacts import Artifact
    from ._rewind import PendingRevert

_E = TypeVar("_E", bound="StoredEvent | PlainEvent")  # what a log yields: models or plain bodies
_T = TypeVar("_T")  # what a transcript read gives per message (a message, or with its seq)


class SqlStore(
    AdmissionMixin,
    ReadsMixin,
    BatchMixin,
    UsageMixin,
    FollowMixin,
):
    """The store. Open one with `wakeful.store.open_store(url)`."""

    def __init__(self, backend: Backend, clock: Clock | None = None) -> None:
        self.backend = backend
        self.clock: Clock = clock or SystemClock()
        self.claims = Claims(backend, self.clock)
        """Claims and the workers' placement notes (`store/_claims.py`)."""
        self.feed = Feed(backend)
        """The instance-wide log (`store/_feed.py`)."""
        self.schedules = Schedules(backend, self.clock, self._admit_here)
        """The schedules and their fires (`store/_schedules.py`)."""
        self.shaping = Shaping(backend, self.clock)
        """Rewind, history edits, metadata, extension state, artifacts (`store/_shaping.py`)."""
        self.rates = RateBuckets(backend)
        """The shared rate limits' buckets (`store/_rates.py`)."""
        self.access = Access(backend, self.clock)
        """Users, their tokens, session owners and share links (`store/_access.py`)."""
        self.spend = Spend(backend)
        """What a budget counts: a root's, an agent's, a user's spend (`store/_usage.py`)."""
        _search.backfill(backend, _transcript.transcript_in)  # once, after the index's migration

    @property
    def url(self) -> str:
        """Where the data lives (a path or a PostgreSQL URL)."""
        return self.backend.url

    def close(self) -> None:
        """Index the search rows still waiting for their batch (SQLite), then release the
        database connections. The indexing is an optimization for readers that cannot write
        (a read-only store searches what is indexed): when it fails (a busy, full or closed
        store) the rows keep waiting, and the next batch or search indexes them."""
        with contextlib.suppress(StoreError):
            _search.index_pending(self.backend)
        self.backend.close()

    # -- sessions -------------------------------------------------------------------------

    def create_session(
        self,
        session_id: str | None = None,
        *,
        events: Sequence[SessionEvent] = (),
        owner: str | None = None,
        **fields: Any,
    ) -> SessionRow:
        """Insert a session row and its `session.created` event, then `events` (an import's
        messages) and its `owner` (a user of `wakeful serve`; None: nobody's), in one
        transaction; return the row."""
        from ..events import SessionCreated

        sid = session_id or new_session_id()
        with self.backend.transaction(write=True) as tx:
            self._insert_session(tx, sid, SessionCreated(**fields))
            if events:
                append_events(tx, sid, events, self.clock.now_ms(), None)
            if owner is not None:
                set_owner_in(tx, sid, owner)
            row = self._get(tx, sid)
        assert row is not None
        return row

    def get_session(self, session_id: str) -> SessionRow:
        """Return the session's row; `NotFoundError` if there is none."""
        row = self.find_session(session_id)
        if row is None:
            raise NotFoundError(f"no session {session_id}")
        return row

    def find_session(self, session_id: str) -> SessionRow | None:
        """Return the session's row, or None (a stale `running` reads `interrupted`)."""
        with self.backend.transaction(write=False) as tx:
            row = self._get(tx, session_id)
            return None if row is None else self._shown(tx, [row])[0]

    def _shown(self, tx: Tx, rows: Sequence[SessionRow]) -> list[SessionRow]:
        """Rows as readers see them: see `demote_stale`."""
        return demote_stale(tx, rows, self.clock.now_ms())

    def _get(self, tx: Tx, session_id: str) -> SessionRow | None:
        return get_row(tx, session_id)

    def _insert_session(self, tx: Tx, sid: str, created: SessionCreated) -> None:
        insert_session(tx, sid, created, self.clock.now_ms())

    def update_session(
        self, session_id: str, claim: ClaimToken | None = None, **fields: Any
    ) -> None:
        """Change title, agent, model or the archive marker through a `session.updated` event."""
        from ..events import SessionUpdated

        self.append(session_id, [SessionUpdated(**fields)], claim)

    def latest_session(self, location: str | None = None) -> SessionRow | None:
        """The most recently updated root session not archived (of `location`, when given),
        exactly, however many sessions there are: read from the listing index of roots
        (`sessions_location` for one location).

        The index orders by `listed_ms`, which trails `updated_ms` by less than
        `LIST_SLACK_MS`: the newest session lies within that slack of the index's first row.
        """
        cond = "parent_id IS NULL AND archived_ms IS NULL"
        params: list[Any] = []
        if location is not None:
            cond += " AND location = ?"
            params.append(location)
        with self.backend.transaction(write=False) as tx:
            top = tx.one(
                f"SELECT listed_ms FROM sessions WHERE {cond} ORDER BY listed_ms DESC, id DESC "
                "LIMIT 1",
                params,
            )
            if top is None:
                return None
            best = tx.one(
                f"SELECT id FROM sessions WHERE {cond} AND listed_ms > ? "
                f"ORDER BY {updated_ms_sql(tx.kind)} DESC, id DESC LIMIT 1",
                [*params, int(top[0]) - LIST_SLACK_MS],
            )
            return None if best is None else self._get(tx, best[0])

    def children(self, session_id: str) -> list[SessionRow]:
        """The session's child sessions, oldest first, from the `sessions_parent` index."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                f"SELECT {row_cols(tx.kind)} FROM sessions WHERE parent_id = ? "
                "ORDER BY created_ms, id",
                (session_id,),
            )
        return [session_row(r) for r in rows]

    # -- what the surfaces read of the shaping writes (`self.shaping`) ------------------------

    def pending_revert(self, session_id: str) -> PendingRevert | None:
        """The session's revert still pending (undoable), if any."""
        return self.shaping.pending_revert(session_id)

    def live_compactions(self, session_id: str) -> list[StoredEvent]:
        """The `compaction.ended` events a rewind or history edit has not hidden."""
        return self.shaping.live_compactions(session_id)

    def metadata(self, session_id: str) -> dict[str, JsonValue]:
        """The session's metadata; `NotFoundError` for an unknown session."""
        return self.shaping.metadata(session_id)

    def extension_state(self, session_id: str, namespace: str) -> dict[str, JsonValue]:
        """The session's extension state in `namespace`, by key."""
        return self.shaping.extension_state(session_id, namespace)

    def artifacts(
        self,
        session_id: str,
        *,
        kind: str | None = None,
        since_ms: int | None = None,
        limit: int | None = None,
    ) -> list[Artifact]:
        """The session's artifacts, newest update first (`Shaping.artifacts`)."""
        return self.shaping.artifacts(session_id, kind=kind, since_ms=since_ms, limit=limit)

    def find_artifacts(
        self,
        uri: str | None = None,
        *,
        kind: str | None = None,
        since_ms: int | None = None,
        location: str | None = None,
        limit: int | None = 100,
    ) -> list[Artifact]:
        """Artifacts across sessions by `uri` or `location` (`Shaping.find_artifacts`)."""
        return self.shaping.find_artifacts(
            uri, kind=kind, since_ms=since_ms, location=location, limit=limit
        )

    def current_claim(self, session_id: str) -> Claim | None:
        """The session's unreleased claim, or None (a historical record, not proof of life)."""
        return self.claims.current(session_id)

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
            now_ms = self.clock.now_ms()
            stored = append_events(tx, session_id, events, now_ms, claim)
            if blobs:
                put_blobs_in(tx, blobs, session_id, now_ms)
            return stored

    def events(
        self, session_id: str, after: int = 0, limit: int | None = None, types: Sequence[str] = ()
    ) -> list[StoredEvent]:
        """Durable events of a session with `seq > after`, in order (optionally of some types)."""
        return self._session_events(events_in, session_id, after, limit, types)

    def high_water(self, session_id: str) -> int:
        """The session's newest `seq` (its change counter); `NotFoundError` if unknown."""
        return self.get_session(session_id).last_seq

    def plain_events(
        self, session_id: str, after: int = 0, limit: int | None = None, types: Sequence[str] = ()
    ) -> list[PlainEvent]:
        """`events` with each body as plain JSON (`wakeful.events.PlainEvent`), as its model
        dumps it but read without building one where the stored JSON allows (`event_data`):
        for readers that print or fold events (`wakeful log`, `session show`; issue 25)."""
        return self._session_events(plain_events_in, session_id, after, limit, types)

    def _session_events(
        self,
        read: Callable[..., list[_E]],
        session_id: str,
        after: int,
        limit: int | None,
        types: Sequence[str],
    ) -> list[_E]:
        with self.backend.transaction(write=False) as tx:
            found = read(tx, session_id, after, limit, types)
            # Rows prove the session exists; only an empty answer needs the check.
            if not found and self._get(tx, session_id) is None:
                raise NotFoundError(f"no session {session_id}")
        return found

    # -- messages ---------------------------------------------------------------------------

    def messages(
        self, session_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """The transcript: every message (delivered inputs included) in log order; from the
        one after `after_seq`, at most `limit` of them (a page: see `messages_with_seq`)."""
        return self._transcript(session_id, after_seq, limit, _transcript.messages_in)

    def last_message_ids(self, session_id: str, count: int) -> list[str]:
        """The ids of the session's newest `count` transcript messages, oldest first (an
        unknown session has none). Reads the projection only, not the message bodies."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT message_id FROM messages WHERE session_id = ? AND reverted IS NULL "
                "ORDER BY seq DESC LIMIT ?",
                (session_id, count),
            )
        return [str(r[0]) for r in reversed(rows)]

    def last_messages(self, session_id: str, count: int) -> list[Message]:
        """The session's newest `count` transcript messages, oldest first; reads only those
        (`NotFoundError` for an unknown session)."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                "SELECT MIN(seq) FROM (SELECT seq FROM messages WHERE session_id = ? "
                "ORDER BY seq DESC LIMIT ?) newest",
                (session_id, max(count, 0)),
            )
            if row is None or row[0] is None:
                if self._get(tx, session_id) is None:
                    raise NotFoundError(f"no session {session_id}")
                return []
            return [m for _s, m in _transcript.transcript_in(tx, session_id, int(row[0]) - 1)]

    def append_if_newest(
        self, session_id: str, events: Sequence[SessionEvent], newest: str | None
    ) -> bool:
        """Append `events` (unfenced, one transaction) only if the session's newest transcript
        message is still `newest` (None: it has none); return whether they were appended.

        A compare-and-append for writers without a claim that must not both land the same
        batch (`integrations.openai_agents`): the check and the append hold the session's lock.
        """
        with self.backend.transaction(write=True) as tx:
            tx.lock_session(session_id)
            row = tx.one(
                "SELECT message_id FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                (session_id,),
            )
            if (str(row[0]) if row else None) != newest:
                return False
            append_events(tx, session_id, events, self.clock.now_ms(), None)
            return True

    def plain_messages(self, session_id: str) -> list[dict[str, Any]]:
        """`messages` as plain dumps (`model_dump(mode="json", exclude_none=True)` of each),
        read without building models where the stored JSON allows (`wakeful session show`)."""
        with self.backend.transaction(write=False) as tx:
            return _transcript.plain_transcript_in(tx, session_id)

    def messages_with_seq(
        self, session_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[tuple[int, Message]]:
        """The transcript with each message's `seq`: the messages after `after_seq`, at most
        `limit` of them (None: all). The next page starts after the last `seq` returned; a page
        shorter than `limit` is the last. `UsageError` for a limit under 1."""
        return self._transcript(session_id, after_seq, limit, _transcript.transcript_in)

    def _transcript(
        self,
        session_id: str,
        after_seq: int,
        limit: int | None,
        read: Callable[[Tx, str, int, int | None], list[_T]],
    ) -> list[_T]:
        """A page of the transcript as `read` gives it (`messages`, `messages_with_seq`)."""
        upto = None
        with self.backend.transaction(write=False) as tx:
            if limit is not None:
                upto = _transcript.page_end(tx, session_id, after_seq, limit)
            found = read(tx, session_id, after_seq, upto)
            if not found and self._get(tx, session_id) is None:  # rows prove it exists
                raise NotFoundError(f"no session {session_id}")
            return found

    # -- inbox ------------------------------------------------------------------------------

    def promote(
        self,
        session_id: str,
        *,
        idle: bool,
        input_id: str | None = None,
        claim: ClaimToken | None = None,
    ) -> list[Delivered]:
        """Deliver the next inbox items atomically: steers in enqueue order; one queued item
        when `idle`; only `input_id` when given (a driver's compositions of a promotion with
        other writes are `SessionWrite.promote` in a unit, `wakeful.execution._writes`).

        With no pending item, nothing is locked or written: one read says so."""
        with self.read(session_id) as r:
            if not r.any_pending():
                return []
        with self.write(session_id, claim) as w:
            return w.promote(idle=idle, input_id=input_id)

    def write(
        self, session_id: str, claim: ClaimToken | None = None
    ) -> AbstractContextManager[SqlSessionWrite]:
        """Open a unit of work on `session_id` under `claim`: one write transaction, fenced,
        that commits when the block ends (`SessionWrite`; docs/store.md, "Units of work")."""
        return session_write(self.backend, self.clock, session_id, claim)

    def read(self, session_id: str) -> AbstractContextManager[SqlSessionRead]:
        """Open one read of `session_id`, batched where the backend can (`SessionRead`)."""
        return session_read(self.backend, session_id)

    def pending(self, session_id: str) -> list[InboxItem]:
        """Pending inbox items in enqueue order."""
        with self.backend.transaction(write=False) as tx:
            return _inbox.pending_items(tx, session_id)

    def pending_ids(self, session_id: str) -> list[str]:
        """The input ids of `pending`, read without decoding the items."""
        with self.backend.transaction(write=False) as tx:
            return _inbox.pending_input_ids(tx, session_id)

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
        return put_blob_in(tx, data, session_id, self.clock.now_ms())

    def get_blob(self, digest: str) -> bytes:
        """The bytes of a blob; `NotFoundError` if absent."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one("SELECT data FROM blobs WHERE digest = ?", (digest,))
            if row is None:
                raise NotFoundError(f"no blob {digest}")
            return open_blobs(tx, tx.cipher, [(digest, bytes(row[0]))])[digest]

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The bytes of each blob in `digests`, by digest, read with one statement per 500;
        `NotFoundError` if any is absent."""
        found: dict[str, bytes] = {}
        wanted = list(dict.fromkeys(digests))
        with self.backend.transaction(write=False) as tx:
            for chunk in iter_chunks(wanted, 500):
                marks = ", ".join("?" for _ in chunk)
                rows = tx.all(f"SELECT digest, data FROM blobs WHERE digest IN ({marks})", chunk)
                found.update(open_blobs(tx, tx.cipher, [(str(r[0]), bytes(r[1])) for r in rows]))
        missing = [d for d in wanted if d not in found]
        if missing:
            raise NotFoundError(f"no blob {missing[0]}")
        return found

    # -- listing and retention ----------------------------------------------------------------

    def list_sessions(
        self,
        *,
        roots_only: bool = True,
        archived: bool | None = False,
        limit: int = 50,
        cursor: str | None = None,
        agent: str | None = None,
        location: str | None = None,
    ) -> Page:
        """A page of sessions, newest first, answered from the sessions index alone (a stale
        `running` reads `interrupted`: `demote_stale`); only those of `agent` and living at
        `location` (an absolute workspace root) when given."""
        with self.backend.transaction(write=False) as tx:
            page = _retention.list_page(tx, roots_only, archived, limit, cursor, agent, location)
            return replace(page, sessions=self._shown(tx, page.sessions))

    def search(
        self,
        text: str,
        *,
        roots_only: bool = False,
        archived: bool | None = False,
        limit: int = 20,
        offset: int = 0,
    ) -> _search.SearchPage:
        """Sessions whose content (a message's text, tool calls and results, or the title)
        holds every word of `text`, ranked by their best matching message, then newest first.

        Words are matched whole and case-insensitively; `word*` matches a prefix. Read from the
        full-text index (SQLite FTS5, PostgreSQL `tsvector`), never by scanning transcripts;
        `SearchOffError` (a `UsageError`) in a store whose index is off (`set_search`).
        """
        _search.index_pending(self.backend)  # SQLite: the rows waiting for their batch
        with self.backend.transaction(write=False) as tx:
            page = _search.search_in(
                tx,
                self.backend.kind,
                text,
                roots_only=roots_only,
                archived=archived,
                limit=limit,
                offset=offset,
                message_at=_transcript.message_at,
            )
            shown = self._shown(tx, [h.session for h in page.hits])
            hits = [replace(h, session=row) for h, row in zip(page.hits, shown, strict=True)]
            return replace(page, hits=hits)

    @property
    def search_enabled(self) -> bool:
        """Whether the store keeps its full-text index (`set_search`)."""
        return _search.search_enabled(self.backend)

    def set_search(self, on: bool) -> bool:
        """Keep the full-text index (`on`) or drop it, for every process of the store; False
        when it already was so. Off, a message writes no index entry and `search` raises
        `SearchOffError`; on again, the index is filled from the log before this returns
        (docs/search.md, "Without search")."""
        return _search.set_search(self.backend, on, _transcript.transcript_in)

    def fork(
        self,
        session_id: str,
        through_seq: int | None = None,
        *,
        new_id: str | None = None,
        **fields: Any,
    ) -> SessionRow:
        """Copy a session's messages through `through_seq` into a new session (`new_id`, or a
        fresh id) that belongs to the owner of the session's tree, in one transaction; the
        parent is untouched. Other `fields` override title, agent, model."""
        with self.backend.transaction(write=True) as tx:
            sid = _retention.fork_in(
                tx, session_id, through_seq, {**fields, "session_id": new_id}, self.clock.now_ms()
            )
            inherit_owner_in(tx, session_id, sid)
            row = self._get(tx, sid)
        assert row is not None
        return row

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Set or clear the reversible archive marker."""
        self.update_session(session_id, archived=archived)

    def prune(
        self, older_than_ms: int, action: str = "preview", *, actor: str | None = None
    ) -> PruneCounts:
        """Root sessions idle since before `older_than_ms` (and their children).

        `action` is ``preview`` (writes nothing), ``archive`` or ``delete``; the preview's counts
        equal what the delete removes. A delete leaves each root's tombstone naming `actor`.
        """
        if action not in ("preview", "archive", "delete"):
            raise UsageError(f"prune action must be preview, archive or delete, not {action!r}")
        with self.backend.transaction(write=action != "preview") as tx:
            return _retention.prune_in(tx, older_than_ms, action, self.clock.now_ms(), actor)

    def delete(self, session_id: str, *, actor: str | None = None) -> PruneCounts:
        """Delete a session and its descendants from every table, and blobs no longer used,
        leaving its tombstone (`access.deletions`) that names who deleted it (`actor`)."""
        with self.backend.transaction(write=True) as tx:
            if self._get(tx, session_id) is None:
                raise NotFoundError(f"no session {session_id}")
            return _retention.delete_trees(tx, [session_id], self.clock.now_ms(), actor)
