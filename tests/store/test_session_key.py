"""An integer session key in the log and its transcript projection (migration 33, issue 36
item 5, `store/_session_key.py`): `event_log` and `message_log` hold `sessions.k`, not the text
id, and `events` and `messages` read as they did. A file and a PostgreSQL database written by
the previous version (main at bb11560, migration 30: `tests/fixtures/make_schema_v30.py`)
upgrade in place and read every session back whole; a new session's key is never one a live
session holds, and a deleted session leaves no row under its key."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import wakeful.store
from tests.fixtures.make_schema_v21 import fill, searches
from tests.fixtures.make_schema_v30 import reads
from tests.pg import fresh_database
from tests.store.helpers import add_message, frozen_v30_pg, recent_events
from wakeful.messages import assistant, user
from wakeful.store import SqlStore, open_store
from wakeful.store._migrations import MIGRATIONS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

pytestmark = pytest.mark.usefixtures("own_keys")  # plain: stores of an earlier schema


def _json(value: object) -> Any:
    """`value` as the fixture's JSON holds it (tuples as lists)."""
    return json.loads(json.dumps(value))


def _keys(store: SqlStore, table: str) -> list[int]:
    with store.backend.transaction(write=False) as tx:
        return [int(r[0]) for r in tx.all(f"SELECT DISTINCT sk FROM {table} ORDER BY sk")]


def _upgraded_reads_whole(store: SqlStore, read: dict[str, Any]) -> None:
    """Every session reads back as the previous version read it; the tables hold keys only;
    new writes, a fork and a delete work on the upgraded store."""
    with store.backend.transaction(write=False) as tx:
        assert tx.one("SELECT MAX(version) FROM schema_migrations") == (MIGRATIONS[-1][0],)
        keys = {str(r[0]): int(r[1]) for r in tx.all("SELECT id, k FROM sessions")}
    sids: list[str] = read["sessions"]
    assert _json(reads(store, sids)) == read
    assert _keys(store, "event_log") == sorted(keys.values())  # every session's events
    assert set(_keys(store, "message_log")) <= set(keys.values())
    later = add_message(store, sids[0], assistant("a narwhal after the upgrade"))
    assert store.events(sids[0])[-1] == later
    assert sids[0] in {h.session.id for h in store.search("narwhal").hits}
    fork = store.fork(sids[0]).id
    assert store.messages(fork) == store.messages(sids[0])
    store.delete(sids[1])
    assert keys[sids[1]] not in _keys(store, "event_log") + _keys(store, "message_log")
    every = len(store.list_sessions(roots_only=False, archived=None).sessions)
    assert store.prune(2**62, "delete").sessions == every
    assert all(not hits for hits in searches(store).values())
    assert _keys(store, "event_log") == _keys(store, "message_log") == []


def test_a_file_of_the_previous_version_reads_back_whole(tmp_path: Path) -> None:
    copy = tmp_path / "sessions.db"
    shutil.copyfile(FIXTURES / "schema_v30.db", copy)
    store = open_store(str(copy))
    try:
        _upgraded_reads_whole(store, json.loads((FIXTURES / "schema_v30.json").read_text()))
    finally:
        store.close()


@pytest.mark.postgres
def test_a_database_of_the_previous_version_reads_back_whole() -> None:
    with fresh_database() as url:
        dump = frozen_v30_pg(url)
        store = open_store(url)
        try:
            _upgraded_reads_whole(store, dump["read"])
        finally:
            store.close()


def test_rows_name_their_session_by_key(store: SqlStore) -> None:
    first, second = store.create_session().id, store.create_session().id
    add_message(store, first, user("one"))
    add_message(store, second, user("two"))
    with store.backend.transaction(write=False) as tx:
        keys = dict(tx.all("SELECT id, k FROM sessions WHERE id IN (?, ?)", (first, second)))
        by_key = tx.all("SELECT sk, COUNT(*) FROM message_log GROUP BY sk ORDER BY sk")
    assert len(set(keys.values())) == 2
    assert [tuple(r) for r in by_key] == sorted((keys[s], 1) for s in (first, second))
    assert [m.text() for m in store.messages(first)] == ["one"]


def test_a_deleted_session_leaves_nothing_under_its_key(store: SqlStore) -> None:
    # On SQLite the newest key is given again once its session is gone: nothing of the deleted
    # session may then show in the new one.
    kept = store.create_session().id
    gone = store.create_session().id
    add_message(store, gone, user("gone"))
    store.delete(gone)
    new = store.create_session().id
    add_message(store, new, user("new"))
    assert [m.text() for m in store.messages(new)] == ["new"]
    assert [e.seq for e in store.events(new)] == [1, 2]
    assert store.messages(kept) == []


# The names the store's statements give `event_log` and `message_log` (or their views).
# (not `b`: also the name of the search's best-hits subquery)
_LOG_ALIASES = ("event_log", "message_log", "events", "messages", "e", "m", "q", "c")


def test_no_statement_copies_or_scans_the_tables(tmp_path: Path) -> None:
    """SQLite: every statement a broad workload sends plans through the tables' keys; none
    copies a view (`MATERIALIZE`: a view that is a join, on the right of a LEFT JOIN, is
    not flattened) or scans `event_log` or `message_log` whole. (Migration 32's rule that
    the views stay off a LEFT JOIN's right side, checked.)"""
    path = str(tmp_path / "s.db")
    store = open_store(path)
    sent: list[str] = []
    try:
        store.create_session("ses_warm")  # the writer connects on its first write
        for conn in {store.backend._conn, store.backend._reader}:  # type: ignore[attr-defined]
            conn.set_trace_callback(sent.append)
        sids = fill(store)
        searches(store)
        for sid in sids:
            store.messages(sid)
            store.plain_messages(sid)
            store.events(sid, types=("turn.ended", "compaction.ended"))
            recent_events(store, sid, 50, ("usage.recorded",))
            store.instruction_state(sid)
        store.feed.events_since(0)
        store.feed.last_event_id()
        store.feed.interrupts_after(0)
        store.fork(sids[0])
        store.delete(sids[1])
        store.prune(2**62, "delete")
    finally:
        store.close()
    reads = [s for s in dict.fromkeys(sent) if s.lstrip().upper().startswith(("SELECT", "WITH"))]
    assert len(reads) > 20
    with sqlite3.connect(path) as conn:
        conn.create_function("wakeful_search_text", 2, lambda a, b: a)
        for sql in reads:
            plan = [str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
            bad = [
                step
                for step in plan
                if step in ("MATERIALIZE events", "MATERIALIZE messages")
                or (
                    step.split()[:2] in ([["SCAN", t] for t in _LOG_ALIASES])
                    and "USING" not in step
                )
            ]
            assert not bad, (sql, plan)
    conn.close()


def test_no_statement_left_joins_a_view() -> None:
    """The rule the plans above check, for every statement of the store's source: `events`
    and `messages` are never the right side of a LEFT JOIN (such a statement joins
    `event_log` or `message_log` and `sessions` itself)."""
    store_src = Path(wakeful.store.__file__).parent
    found = [
        f"{path.name}: {hit}"
        for path in sorted(store_src.rglob("*.py"))
        for hit in re.findall(r"LEFT JOIN (?:events|messages)\b", path.read_text())
    ]
    assert found == []
