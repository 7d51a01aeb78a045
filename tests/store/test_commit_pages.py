"""Two pages off SQLite's commits (issue 36, docs/store.md "Two pages off a commit"):

- the inbox WITHOUT ROWID (migration 36): its rows are its key's b-tree, so an admission writes
  no page of a second b-tree for `(session_id, input_id)`;
- a session's newest seq and last change read from its log (migration 37,
  `_records.last_seq_sql`): an append that changes nothing else of the session's row (a
  message, an admission) writes no page of `sessions`, and every read of `last_seq` and
  `updated_ms` (the row, the listing and its order, a search's order, a revision check, the
  recent events) sees what the row said before.

A file of the previous version (`schema_v33.db`, migrated up to the one before first) keeps
every inbox row and reads back the same session rows."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.store.helpers import add_message, as_of, recent_events, wal_pages_by_table
from wakeful._ids import new_turn_id
from wakeful.clock import FakeClock
from wakeful.errors import ConflictError
from wakeful.events import TurnStarted
from wakeful.messages import assistant, user
from wakeful.store import SqlStore, _migrations, _sqlite, open_store
from wakeful.store._migrations import LATEST

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_ROWS = "SELECT * FROM inbox ORDER BY session_id, input_id"

pytestmark = pytest.mark.usefixtures("own_keys")  # plain: reads the file's pages and rows


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    opened = open_store(str(tmp_path / "s.db"), clock=FakeClock(1_000_000))
    yield opened
    opened.close()


@contextmanager
def _before(tmp_path: Path, number: int) -> Iterator[tuple[Path, SqlStore]]:
    """A copy of `schema_v33.db` opened by the code before migration `number` (closed after)."""
    copy = tmp_path / "sessions.db"
    shutil.copyfile(FIXTURES / "schema_v33.db", copy)
    with pytest.MonkeyPatch.context() as old:
        as_of(old, _sqlite, [m for m in _migrations.MIGRATIONS if m[0] < number])
        store = open_store(str(copy))
        try:
            yield copy, store
        finally:
            store.close()


def test_an_admission_writes_no_page_of_a_separate_key(store: SqlStore, tmp_path: Path) -> None:
    sid = store.create_session().id
    store.admit(sid, None, "user", {"text": "warm"})

    def write() -> None:
        for i in range(20):
            store.admit(sid, None, "user", {"text": f"input {i}"})

    pages = wal_pages_by_table(store, tmp_path / "s.db", write)
    assert pages["inbox"] >= 20  # (the WAL holds the commits counted)
    assert not any(name.startswith("sqlite_autoindex_inbox") for name in pages)
    with store.backend.transaction(write=False) as tx:
        [(schema,)] = tx.all("SELECT sql FROM sqlite_schema WHERE name = 'inbox'")
    assert "WITHOUT ROWID" in schema


def test_an_upgraded_file_keeps_its_inbox(tmp_path: Path) -> None:
    with _before(tmp_path, 36) as (copy, store):
        sid = store.list_sessions(archived=None).sessions[0].id
        pending = store.admit(sid, "in_pending", "user", {"text": "a waiting narwhal"})
        with store.backend.transaction(write=False) as tx:
            before = tx.all(_ROWS)
        found = [h.session.id for h in store.search("walrus").hits]
    assert len(before) >= 2 and {r[6] for r in before} >= {"pending", "delivered"}
    store = open_store(str(copy))
    try:
        with store.backend.transaction(write=False) as tx:
            assert tx.all(_ROWS) == before
            assert tx.one("SELECT MAX(version) FROM schema_migrations") == (LATEST,)
        assert [h.session.id for h in store.search("walrus").hits] == found
        again = store.admit(sid, "in_pending", "user", {"text": "a waiting narwhal"})
        assert (again.item, again.created) == (pending.item, False)
        with pytest.raises(ConflictError):
            store.admit(sid, "in_pending", "user", {"text": "another narwhal"})
        store.admit(sid, "in_after", "user", {"text": "a later narwhal"})
        assert [i.input_id for i in store.pending(sid)] == ["in_pending", "in_after"]
        store.promote(sid, idle=True)
        assert store.pending(sid) == []
        assert sid in [h.session.id for h in store.search("narwhal").hits]
    finally:
        store.close()


def test_a_message_or_an_admission_writes_no_page_of_the_session_row(
    store: SqlStore, tmp_path: Path
) -> None:
    sid = store.create_session().id
    add_message(store, sid, user("warm"))

    def write() -> None:
        for i in range(10):
            add_message(store, sid, user(f"message {i}"))
            store.admit(sid, None, "user", {"text": f"input {i}"})

    pages = wal_pages_by_table(store, tmp_path / "s.db", write)
    assert pages["event_log"] >= 20  # (the WAL holds the commits counted)
    assert "sessions" not in pages
    assert store.get_session(sid).last_seq == 22
    # A change of the row's own columns still writes it.
    started = [TurnStarted(turn_id=new_turn_id())]
    pages = wal_pages_by_table(store, tmp_path / "s.db", lambda: store.append(sid, started))
    assert pages["sessions"] == 1


def test_every_read_sees_the_newest_event(store: SqlStore) -> None:
    clock = store.clock
    assert isinstance(clock, FakeClock)
    older, newer = store.create_session().id, store.create_session().id
    clock.advance(10)
    add_message(store, older, user("an older walrus"))
    clock.advance(10)
    last = add_message(store, newer, user("a newer walrus"))
    clock.advance(10)
    admitted = store.admit(older, None, "user", {"text": "the newest walrus"}).item
    row = store.get_session(older)
    assert (row.last_seq, row.updated_ms) == (admitted.seq, clock.now_ms())
    assert store.high_water(older) == admitted.seq
    assert store.get_session(newer).updated_ms == last.at_ms
    assert [s.id for s in store.list_sessions().sessions] == [older, newer]
    page = store.list_sessions(limit=1)
    assert page.next_cursor == f"{row.updated_ms}:{older}"
    assert [s.id for s in store.list_sessions(limit=1, cursor=page.next_cursor).sessions] == [newer]
    latest = store.latest_session()
    assert latest is not None and latest.id == older
    store.promote(older, idle=True)
    hits = store.search("walrus").hits
    assert [h.session.id for h in hits][:2] in ([older, newer], [newer, older])
    assert {h.session.id: h.session.last_seq for h in hits}[older] == store.high_water(older)
    newest = store.events(older)[-1]
    assert recent_events(store, older, 1, [newest.type]) == [newest]
    with pytest.raises(ConflictError):  # a revision read before the newest event is stale
        store.shaping.edit_history(
            older, revision=admitted.seq, message_id=store.messages(older)[0].id, text="x"
        )
    assert store.prune(clock.now_ms() - 5, "preview").sessions == 1  # `newer` alone


def test_an_upgraded_file_reads_the_same_rows(tmp_path: Path) -> None:
    with _before(tmp_path, 37) as (copy, store):
        sids = [s.id for s in store.list_sessions(roots_only=False, archived=None).sessions]
        before = [store.get_session(sid) for sid in sids]
        add_message(store, sids[0], assistant("written by the version before"))
        before[0] = store.get_session(sids[0])
    store = open_store(str(copy))
    try:
        with store.backend.transaction(write=False) as tx:
            assert tx.one("SELECT MAX(version) FROM schema_migrations") == (LATEST,)
        assert [store.get_session(sid) for sid in sids] == before
        listed = store.list_sessions(roots_only=False, archived=None).sessions
        assert [s.id for s in listed] == sids and listed == before
        stored = add_message(store, sids[-1], user("after the upgrade"))
        assert store.get_session(sids[-1]).last_seq == stored.seq == before[-1].last_seq + 1
    finally:
        store.close()
