"""SQLite's event ids without AUTOINCREMENT's counter (migration 34, `store/_event_ids.py`,
issue 36): an append writes no page for the next id, and an id is still never given twice,
also once the events that held the largest ids are deleted, and on a file upgraded from a
version whose ids came from `sqlite_sequence`."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.helpers import add_message, wal_pages_by_table
from wakeful.messages import assistant, user
from wakeful.store import SqlStore, open_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

pytestmark = pytest.mark.usefixtures("own_keys")  # plain: reads the file's pages and rows


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    opened = open_store(str(tmp_path / "s.db"))
    yield opened
    opened.close()


def test_an_append_writes_no_page_for_the_next_id(store: SqlStore, tmp_path: Path) -> None:
    """The next id is read from the log's own last page: no counter's page in the WAL (with
    AUTOINCREMENT, `sqlite_sequence` was one page of every commit)."""
    sid = store.create_session().id
    add_message(store, sid, user("warm"))

    def write() -> None:
        for i in range(20):
            add_message(store, sid, user(f"message {i}"))
            store.admit(sid, None, "user", {"text": f"input {i}"})

    pages = wal_pages_by_table(store, tmp_path / "s.db", write)
    assert pages["event_log"] >= 40  # (the WAL holds the commits counted)
    assert "sqlite_sequence" not in pages and "event_ids" not in pages


def test_an_id_is_never_given_twice_after_the_newest_are_deleted(store: SqlStore) -> None:
    """Deleting the session that holds the largest ids (twice over) leaves the next id above
    them: the log's largest left would give them again."""
    kept = store.create_session().id
    add_message(store, kept, user("kept"))
    for round_ in range(2):
        gone = store.create_session().id
        newest = [add_message(store, gone, assistant(f"newest {i}")).id for i in range(3)]
        store.delete(gone)
        assert [s.id for s in store.list_sessions(archived=None).sessions] == [kept]
        assert add_message(store, kept, user(f"after delete {round_}")).id == max(newest) + 1


def test_an_upgraded_file_gives_ids_above_every_id_given_before(tmp_path: Path) -> None:
    """`schema_v30.db` (AUTOINCREMENT's mark 45 in `sqlite_sequence`, its deleted session's
    events the largest ids: the log's largest left is 43) gives 46 next, and its log keeps
    every event's id."""
    copy = tmp_path / "sessions.db"
    shutil.copyfile(FIXTURES / "schema_v30.db", copy)
    with sqlite3.connect(copy) as raw:
        before = raw.execute("SELECT id, seq, data FROM events ORDER BY id").fetchall()
        assert raw.execute("SELECT seq FROM sqlite_sequence").fetchall() == [(45,)]
    raw.close()
    store = open_store(str(copy))
    try:
        with store.backend.transaction(write=False) as tx:
            assert tx.all("SELECT id, seq, data FROM events ORDER BY id") == before
            assert tx.one("SELECT upto FROM event_ids") == (45,)
            assert tx.one("SELECT MAX(id) FROM event_log") == (43,)
            [(schema,)] = tx.all("SELECT sql FROM sqlite_schema WHERE name = 'event_log'")
        assert "AUTOINCREMENT" not in schema
        sid = store.list_sessions(archived=None).sessions[0].id
        assert add_message(store, sid, user("after the upgrade")).id == 46
    finally:
        store.close()
