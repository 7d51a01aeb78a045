"""Bad input gets a clear, typed error, and nothing already stored is lost or changed.

Unknown ids and conflicting input ids run on both backends; damaged and foreign files are
SQLite's; an unreachable PostgreSQL URL needs no server at all.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.pg import ADMIN_URL, fresh_database, require_postgres
from tests.store.helpers import add_message
from wakeful.errors import ConflictError, MigrationError, NotFoundError, StoreError
from wakeful.events import SessionCreated, TurnStarted
from wakeful.messages import assistant
from wakeful.store import SqlStore, open_store
from wakeful.store._sqlite import probe_sql

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "schema_v1.db"
NOPE = "ses_nope"

UNKNOWN_SESSION_CALLS: dict[str, Callable[[SqlStore], object]] = {
    "get_session": lambda s: s.get_session(NOPE),
    "high_water": lambda s: s.high_water(NOPE),
    "admit": lambda s: s.admit(NOPE, "i1", "user", {"text": "hi"}),
    "promote": lambda s: s.promote(NOPE, idle=True),
    "append": lambda s: s.append(NOPE, [TurnStarted(turn_id="t")]),
    "add_message": lambda s: add_message(s, NOPE, assistant("x")),
    "messages": lambda s: s.messages(NOPE),
    "events": lambda s: s.events(NOPE),
    "log": lambda s: list(s.log(NOPE)),
    "log_follow": lambda s: list(s.log(NOPE, follow=True, idle_timeout_s=0.01)),
    "input": lambda s: s.input(NOPE, "i1"),
    "acquire_claim": lambda s: s.claims.acquire(NOPE, "me", lease_ms=1000),
    "update_session": lambda s: s.update_session(NOPE, title="x"),
    "set_archived": lambda s: s.set_archived(NOPE),
    "fork": lambda s: s.fork(NOPE),
    "delete": lambda s: s.delete(NOPE),
    "put_blob": lambda s: s.put_blob(b"data", NOPE),
    "child_of_unknown": lambda s: s.create_session("ses_kid", parent_id=NOPE),
}


def state(store: SqlStore) -> tuple[object, ...]:
    """Everything a bad call could have touched, to compare before and after."""
    rows = store.list_sessions(roots_only=False, archived=None).sessions
    return (
        tuple(rows),
        tuple(e.id for e in store.feed.events_since(0)),
        tuple(store.pending("ses_a")),
    )


@pytest.mark.parametrize("call", UNKNOWN_SESSION_CALLS, ids=str)
def test_unknown_session_is_not_found_and_writes_nothing(store: SqlStore, call: str):
    store.admit("ses_a", "i1", "user", {"text": "keep me"}, create=SessionCreated(title="a"))
    before = state(store)
    with pytest.raises(NotFoundError, match=NOPE):
        UNKNOWN_SESSION_CALLS[call](store)
    assert state(store) == before
    assert store.find_session(NOPE) is None and store.find_session("ses_kid") is None


def test_unknown_input_and_blob_are_not_found(store: SqlStore):
    store.create_session("ses_a")
    with pytest.raises(NotFoundError, match="in_nope"):
        store.input("ses_a", "in_nope")
    with pytest.raises(NotFoundError, match="0{64}"):
        store.get_blob("0" * 64)


@pytest.mark.parametrize("settled", [False, True], ids=["pending", "delivered"])
def test_conflicting_input_id_is_refused_and_the_original_kept(store: SqlStore, settled: bool):
    store.admit("ses_a", "i1", "user", {"text": "original"}, create=SessionCreated())
    if settled:
        store.promote("ses_a", idle=True)
    item = store.input("ses_a", "i1")
    before = state(store)
    conflicting = [
        ("user", {"text": "changed"}, "steer"),
        ("synthetic", {"text": "original"}, "steer"),
    ]
    if not settled:  # a pending item is matched with its delivery mode too (003)
        conflicting.append(("user", {"text": "original"}, "queue"))
    for kind, payload, delivery in conflicting:
        with pytest.raises(ConflictError, match=r"'i1'.*ses_a.*different content"):
            store.admit("ses_a", "i1", kind, payload, delivery)  # type: ignore[arg-type]
    assert store.input("ses_a", "i1") == item
    assert state(store) == before
    if settled:  # delivered: another delivery mode is the same input, nothing written
        again = store.admit("ses_a", "i1", "user", {"text": "original"}, "queue")
        assert not again.created and again.item == item
        assert state(store) == before
    texts = [m.text() for m in store.messages("ses_a")]
    assert texts == (["original"] if settled else [])


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('mine, not wakeful''s')")
    conn.commit()
    conn.close()


def rails_like(path: Path) -> None:
    """Another tool's `schema_migrations` (text versions, other columns)."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_migrations (version VARCHAR PRIMARY KEY)")
    conn.execute("INSERT INTO schema_migrations VALUES ('20240101120000')")
    conn.commit()
    conn.close()


def test_the_open_reads_every_tables_own_root_page(tmp_path: Path) -> None:
    """The damage probe (`_sqlite._probe`, one statement) opens the b-tree of every table,
    rowid or not (and of a full-text index's shadow tables), and no index in its place: a
    damaged first page of any table is found at open."""
    path = tmp_path / "s.db"
    open_store(str(path)).close()
    with sqlite3.connect(path) as conn:
        tables = {
            name: root
            for name, root, sql in conn.execute(
                "SELECT name, rootpage, sql FROM sqlite_master WHERE type = 'table'"
            )
            if not sql.startswith("CREATE VIRTUAL TABLE")
        }
        opened = {
            row[3]  # p2: the root page
            for row in conn.execute("EXPLAIN " + probe_sql(conn))
            if row[1] == "OpenRead"
        }
    assert len(tables) > 30 and "claims" in tables and "message_log" in tables
    assert opened == set(tables.values())


def random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(7).randbytes(64 * 1024))


def damaged_wakeful(path: Path) -> None:
    """The schema-1 fixture with every page after the first overwritten."""
    shutil.copyfile(FIXTURE, path)
    data = bytearray(path.read_bytes())
    rng = random.Random(11)
    for start in range(4096, len(data), 4096):
        data[start : start + 4096] = rng.randbytes(4096)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (foreign, "is a SQLite database, but not a wakeful one"),
        (rails_like, "is a SQLite database, but not a wakeful one"),
        (random_bytes, "is not a wakeful SQLite database"),
        (damaged_wakeful, "malformed"),
    ],
    ids=["foreign", "foreign-schema_migrations", "random-bytes", "damaged"],
)
def test_bad_sqlite_file_is_a_store_error_and_left_untouched(
    tmp_path: Path, make: Callable[[Path], None], message: str
):
    path = tmp_path / "sessions.db"
    make(path)
    before = snapshot(tmp_path)
    with pytest.raises(StoreError, match=message) as err:
        open_store(str(path))
    assert not isinstance(err.value, MigrationError | NotFoundError)
    assert str(path) in str(err.value)
    assert snapshot(tmp_path) == before  # same bytes, no -wal/-shm, no backup


def test_unreachable_postgres_is_a_store_error_naming_the_url():
    url = "postgresql://wakeful:hunter2@127.0.0.1:1/wakeful"
    start = time.monotonic()
    with pytest.raises(StoreError, match="cannot reach PostgreSQL") as err:
        open_store(url)
    assert time.monotonic() - start < 5
    assert "postgresql://wakeful:***@127.0.0.1:1/wakeful" in str(err.value)
    assert "hunter2" not in str(err.value)


@pytest.mark.postgres
def test_missing_postgres_database_is_a_store_error_naming_the_url():
    require_postgres()
    url = f"{ADMIN_URL.rsplit('/', 1)[0]}/wakeful_missing_{os.getpid()}"
    with pytest.raises(StoreError, match=f"cannot reach PostgreSQL at {url}:.*does not exist"):
        open_store(url)


@pytest.mark.postgres
def test_a_dropped_postgres_connection_fails_no_call_and_loses_nothing():
    """The server ends every connection of the store while they sit in the pool: each one is
    found dead before use and replaced, so no call fails, and the pending inputs are exactly
    the ones whose admission returned."""
    with fresh_database() as url:
        store = open_store(url)
        try:
            store.admit("ses_a", "i0", "user", {"text": "zero"}, create=SessionCreated())
            name = url.rsplit("/", 1)[1]
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = %s",
                    (name,),
                )
            admitted, failures = ["i0"], 0
            for i in range(1, 13):
                try:
                    store.admit("ses_a", f"i{i}", "user", {"text": str(i)})
                    admitted.append(f"i{i}")
                except StoreError:
                    failures += 1
            assert failures == 0
            assert [item.input_id for item in store.pending("ses_a")] == admitted
        finally:
            store.close()
