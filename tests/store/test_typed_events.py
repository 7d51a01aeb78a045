"""`events_type` holds no `message.added` row (migration 27, issue 36 item 5), on both
backends, and every typed lookup the store makes still plans through it: the same plan as with
the full index of migration 3; an existing store migrates in place."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.pg import fresh_database
from tests.store.helpers import frozen_before_key
from wakeful.events import (
    CompactionEnded,
    CompactionTail,
    InstructionsUpdated,
    MessageAdded,
    TurnEnded,
    TurnStarted,
    UsageRecorded,
)
from wakeful.messages import assistant, user
from wakeful.store import SqlStore, open_store
from wakeful.store._typed_events import types_in

_FULL_INDEX = "CREATE INDEX events_type ON event_log (sk, type, seq)"  # migration 3's, keyed


def _fill(store: SqlStore, messages: int) -> str:
    """A session of `messages` + 1 messages and 7 other events: its creation, a turn, usage,
    instructions and two compactions."""
    sid = store.create_session(title="typed").id
    store.append(sid, [TurnStarted(turn_id="t1")])
    for i in range(0, messages, 100):
        store.append(
            sid, [MessageAdded(message=assistant(f"reply {j}")) for j in range(i, i + 100)]
        )
    store.append(
        sid,
        [
            UsageRecorded(input_tokens=5000, output_tokens=1),
            InstructionsUpdated(delta={"a": "d1"}),
            CompactionEnded(summary_message_id="m", through_seq=3),
            CompactionTail(hide_before_id="m", through_seq=2),
            TurnEnded(turn_id="t1", outcome="completed"),
            MessageAdded(message=user("after")),
        ],
    )
    return sid


def _type_index_entries(store: SqlStore) -> int:
    """SQLite: the entries `events_type` holds (the cells of its pages); PostgreSQL: its pages
    beyond the meta page (one leaf holds a few hundred entries)."""
    with store.backend.transaction(write=False) as tx:
        if store.backend.kind == "sqlite":
            row = tx.one("SELECT SUM(ncell) FROM dbstat WHERE name = 'events_type'")
        else:
            row = tx.one("SELECT pg_relation_size('events_type') / 8192 - 1")
    assert row is not None
    return int(row[0])


def test_the_type_index_holds_every_event_but_the_messages(store: SqlStore) -> None:
    sid = _fill(store, 1000)
    entries = _type_index_entries(store)
    # session.created and the six others: one leaf page on PostgreSQL (with the messages ~7)
    assert entries == (7 if store.backend.kind == "sqlite" else 1), entries
    assert len(store.messages(sid)) == 1001
    got = [e.event.type for e in store.events(sid, types=("usage.recorded", "turn.ended"))]
    assert got == ["usage.recorded", "turn.ended"]
    added = store.events(sid, types=("message.added",))  # (read by the events' key)
    assert len(added) == 1001


def test_types_in_says_the_index_rule_unless_messages_are_asked_for() -> None:
    assert types_in(("a", "b")) == "type IN (?, ?) AND type <> 'message.added'"
    assert types_in(("message.added", "b"), "e.type") == "e.type IN (?, ?)"


def _plans(conn: sqlite3.Connection, statements: list[str]) -> list[list[str]]:
    return [
        [str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()]
        for sql in statements
    ]


def test_every_typed_lookup_plans_as_with_the_full_index(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(str(path))
    sent: list[str] = []
    try:
        sid = _fill(store, 200)
        for conn in {store.backend._conn, store.backend._reader}:  # type: ignore[attr-defined]
            conn.set_trace_callback(sent.append)
        store.events(sid, types=("usage.recorded",))
        store.events(sid, after=5, types=("turn.ended", "compaction.ended"))
        with store.read(sid) as read:
            read.opening(("approval.requested", "approval.decided"), 50)
            read.recent_events(50, ("usage.recorded", "compaction.ended"))
        store.instruction_state(sid)
        store.live_compactions(sid)
        store.claims.cache_expiring(2**40, 2**41, 2**41, 0)
        store.recovery_views([sid], ("turn.started", "turn.ended"))
        store.fork(sid, 150)
    finally:
        store.close()
    typed = [s for s in dict.fromkeys(sent) if " events " in s and "type" in s]
    typed = [s for s in typed if not s.startswith(("INSERT", "UPDATE", "DELETE"))]
    assert len(typed) >= 8, typed
    assert sum("type <> 'message.added'" in s for s in typed) >= 8
    full = tmp_path / "full.db"
    shutil.copyfile(path, full)
    with sqlite3.connect(full) as conn:
        conn.execute("DROP INDEX events_type")
        conn.execute(_FULL_INDEX)
        before = _plans(conn, typed)
    conn.close()
    with sqlite3.connect(path) as conn:
        after = _plans(conn, typed)
    conn.close()
    for sql, old, new in zip(typed, before, after, strict=True):
        assert new == old, sql
    assert any("events_type" in " ".join(p) for p in after)


# Since migration 33 today's code cannot write a store of migration 26: the stores are frozen,
# written by the code of main at bb11560 with `_fill(store, 100)` at every migration but 27
# (`tests/fixtures/make_before_key.py`, where their 108 index entries were counted).
def _reads_back(store: SqlStore, read: dict[str, Any]) -> None:
    sid = read["sid"]
    assert [m.model_dump(mode="json") for m in store.messages(sid)] == read["messages"]
    assert [e.event.model_dump(mode="json") for e in store.events(sid)] == read["events"]
    assert [e.event.type for e in store.events(sid, types=("turn.ended",))] == ["turn.ended"]


@pytest.mark.usefixtures("own_keys")  # plain: a store of an earlier schema with sessions
def test_a_file_of_the_previous_schema_migrates_in_place(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    read = frozen_before_key("typed_events_26", path)
    store = open_store(path)
    try:
        assert _type_index_entries(store) == 7
        _reads_back(store, read)
    finally:
        store.close()


@pytest.mark.postgres
@pytest.mark.usefixtures("own_keys")
def test_a_database_of_the_previous_schema_migrates_in_place() -> None:
    with fresh_database() as url:
        read = frozen_before_key("typed_events_26", url)
        store = open_store(url)
        try:
            with psycopg.connect(url) as conn:
                row = conn.execute(
                    "SELECT indexdef FROM pg_indexes WHERE indexname = 'events_type'"
                ).fetchone()
            assert row is not None and "WHERE (type <> 'message.added'::text)" in row[0]
            _reads_back(store, read)
        finally:
            store.close()
