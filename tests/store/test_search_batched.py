"""SQLite's full-text index takes new rows in batches (migration 20, issue 25; since migration 25
a message's entry is its `messages` row, at its event's id): a message above `search_indexed.upto`
waits until the message that completes a batch, or a search, indexes it. A search still finds
every committed message, and the index never holds a deleted row nor misses a kept one."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.helpers import frozen_before_key
from wakeful.events import MessageAdded
from wakeful.messages import user
from wakeful.store import SqlStore, open_store
from wakeful.store._search_log import SEARCH_BATCH

# The messages whose entries wait for their batch.
WAITING = (
    "SELECT COUNT(*) FROM events e CROSS JOIN messages m ON m.session_id = e.session_id "
    "AND m.seq = e.seq WHERE e.id > (SELECT upto FROM search_indexed)"
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    opened = open_store(str(tmp_path / "s.db"))
    opened.create_session("ses_a")
    opened.create_session("ses_b")
    yield opened
    opened.close()


def _conn(store: SqlStore) -> sqlite3.Connection:
    conn: sqlite3.Connection = store.backend._conn  # type: ignore[attr-defined]
    return conn


def _pending(store: SqlStore) -> int:
    return int(_conn(store).execute(WAITING).fetchone()[0])


def _index_matches_content(store: SqlStore) -> None:
    """FTS5's check of the index against the text its view reads from the log (every row
    indexed with exactly that text, nothing else)."""
    _conn(store).execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")


def _say(store: SqlStore, sid: str, *texts: str) -> None:
    for text in texts:
        store.append(sid, [MessageAdded(message=user(text))])


def test_a_search_finds_the_messages_still_waiting_for_their_batch(store: SqlStore) -> None:
    _say(store, "ses_a", "alpha one", "beta two")
    assert _pending(store) == 2  # not indexed by their commits
    assert [h.session.id for h in store.search("beta").hits] == ["ses_a"]
    assert _pending(store) == 0
    _index_matches_content(store)


@pytest.mark.usefixtures("own_keys")  # plain: it reads the index's words
def test_closing_the_store_indexes_what_waits(tmp_path: Path) -> None:
    """A store that cannot write (a read-only file) searches what is indexed: the writer that
    closes indexes its waiting rows first, so only a crash leaves rows waiting."""
    path = tmp_path / "s.db"
    store = open_store(str(path))
    store.create_session("ses_a")
    _say(store, "ses_a", "written then closed")
    assert _pending(store) == 1
    store.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute(WAITING).fetchone()[0] == 0
        hits = "SELECT COUNT(*) FROM search_fts WHERE search_fts MATCH 'closed'"
        assert conn.execute(hits).fetchone()[0] == 1
    finally:
        conn.close()
    open_store(str(path)).close()  # nothing waits: a close that indexes nothing


def test_the_row_that_completes_a_batch_indexes_it(store: SqlStore) -> None:
    _say(store, "ses_a", *(f"word{i} common" for i in range(SEARCH_BATCH + 5)))
    assert 0 < _pending(store) < SEARCH_BATCH  # a batch was indexed by a write, no search ran
    found = store.search("common")
    assert [h.session.id for h in found.hits] == ["ses_a"] and _pending(store) == 0
    _index_matches_content(store)


def test_deleting_waiting_and_indexed_rows_keeps_the_index_exact(store: SqlStore) -> None:
    """A deleted row leaves the index only if it was in it: deleting a row that was never
    indexed must not take its words out of the index (that corrupts FTS5)."""
    _say(store, "ses_b", "shared indexed early")
    assert store.search("early").hits  # indexed now
    _say(store, "ses_b", "shared waiting late")
    _say(store, "ses_a", "shared kept")
    assert _pending(store) == 2
    store.delete("ses_b")  # one indexed row, one waiting
    assert [h.session.id for h in store.search("shared").hits] == ["ses_a"]
    assert store.search("late").hits == [] and store.search("early").hits == []
    _index_matches_content(store)


def test_deleting_the_newest_messages_gives_no_id_again(store: SqlStore) -> None:
    """An entry's id is its event's, and event ids are never given again (AUTOINCREMENT):
    after the newest indexed messages go, a new message waits above the mark as any does."""
    _say(store, "ses_a", "first")
    _say(store, "ses_b", "newest one", "newest two")
    assert store.search("newest").hits and _pending(store) == 0
    store.delete("ses_b")
    _say(store, "ses_a", "reused")
    assert _pending(store) == 1
    assert [h.session.id for h in store.search("reused").hits] == ["ses_a"]
    _index_matches_content(store)
    assert store.search("newest").hits == []


@pytest.mark.usefixtures("own_keys")  # plain: a store of an earlier schema with sessions
def test_a_store_upgraded_from_migration_18_keeps_its_index(tmp_path: Path) -> None:
    """Rows indexed before migration 20 stay indexed (nothing waits after the upgrade), and
    deleting them still takes them out of the index."""
    # `ses_a` and its input "before upgrade", written at migration 19 by main at bb11560 (frozen
    # since migration 33, whose writes today's code cannot make there: `make_before_key.py`)
    path = tmp_path / "old.db"
    frozen_before_key("search_batched_19", str(path))
    store = open_store(str(path))
    try:
        assert _pending(store) == 0
        _index_matches_content(store)
        _say(store, "ses_a", "after upgrade")
        assert {h.session.id for h in store.search("upgrade").hits} == {"ses_a"}
        store.delete("ses_a")
        assert store.search("upgrade").hits == []
        _index_matches_content(store)
    finally:
        store.close()
