"""Schema migrations: the frozen schema-1 file upgrades and reads back; newer files are refused.

`tests/fixtures/schema_v1.db` was written by the first store (see `make_schema_v1.py` beside it)
and never changes. Each test opens a copy. While the code's newest migration is 1 the upgrade is
a no-op; once migration 2 exists the same tests check the backup and the upgrade itself.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import psycopg
import pytest

from tests.pg import fresh_database
from wakeful.errors import MigrationError
from wakeful.events import MessageAdded, ReceiptRecorded, SessionCreated
from wakeful.messages import assistant
from wakeful.store import SqlStore, open_store
from wakeful.store._migrations import LATEST, MIGRATIONS
from wakeful.store._schema_version import NUMBERS

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "schema_v1.db"
ALPHA = "ses_v1_alpha"
SECTION = "e38b4492f8e35aeceb955a7d7724156464f50c5bfdafd6786697aaf9e5c133fc"


@pytest.fixture
def v1_copy(tmp_path: Path, own_keys: None) -> Path:
    """A store of schema version 1 with sessions: plain, so opened without the key of an
    encrypted suite run (such a store is never encrypted behind its back)."""
    copy = tmp_path / "sessions.db"
    shutil.copyfile(FIXTURE, copy)
    return copy


def versions(path: Path) -> list[tuple[int, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT version, name FROM schema_migrations ORDER BY version"
        ).fetchall()
    finally:
        conn.close()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def check_v1_data(store: SqlStore) -> None:
    """Everything `make_schema_v1.py` wrote, read back through today's store."""
    every = store.list_sessions(roots_only=False, archived=None).sessions
    fork = next(s for s in every if s.forked_from == ALPHA)
    assert [s.id for s in every] == ["ses_v1_beta", fork.id, "ses_v1_child", ALPHA]
    assert [s.id for s in store.list_sessions().sessions] == [fork.id, ALPHA]
    assert [s.id for s in store.list_sessions(archived=True).sessions] == ["ses_v1_beta"]
    alpha = store.get_session(ALPHA)
    assert (alpha.title, alpha.agent, alpha.model, alpha.status) == (
        "alpha",
        "build",
        "scripted:fixture.json",
        "idle",
    )
    assert (alpha.last_seq, alpha.input_tokens, alpha.output_tokens, alpha.cost_usd) == (
        21,
        120,
        30,
        0.25,
    )
    assert store.get_session("ses_v1_child").root_id == ALPHA
    assert (fork.fork_seq, fork.title) == (17, "fork")
    # Transcripts, including the delivered input and a tool call and its result.
    messages = store.messages(ALPHA)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0].text() == "hello" and messages[-1].text() == "hi there"
    assert messages[1].tool_calls()[0].input == {"path": "README.md"}
    assert messages[2].tool_results()[0].output == "# README"
    assert [m.id for m in store.messages(fork.id)] == [m.id for m in messages]
    assert [m.text() for m in store.messages("ses_v1_beta")] == ["question", "answer"]
    assert [m.text() for m in store.messages("ses_v1_child")] == ["child report"]
    # The inbox: delivered, rejected, and two still pending (a queued input, a control item).
    assert store.input(ALPHA, "in_1").status == "delivered"
    assert store.input(ALPHA, "in_bad").status == "rejected"
    assert [(i.input_id, i.delivery, i.kind) for i in store.pending(ALPHA)] == [
        ("in_2", "queue", "user"),
        ("in_3", "steer", "compaction"),
    ]
    # Every event of every session decodes with today's types; seqs are gap-free.
    for row in every:
        events = store.events(row.id)
        assert [e.seq for e in events] == list(range(1, row.last_seq + 1))
        assert isinstance(events[0].event, SessionCreated)
    # Projections.
    [turn] = store.turns(ALPHA)
    assert (turn.turn_id, turn.status, turn.started_seq, turn.ended_seq) == (
        "turn_1",
        "completed",
        8,
        20,
    )
    assert [(c.call_id, c.name, c.status) for c in store.tool_calls(ALPHA)] == [
        ("call_1", "read", "completed")
    ]
    [receipt] = store.receipts(ALPHA)
    assert isinstance(receipt, ReceiptRecorded) and receipt.sections == (
        ("system", "builtin", SECTION),
    )
    assert store.get_blob(SECTION) == b"You are a helpful fixture."
    assert store.work_state(ALPHA) == {"goal": "say hello"}
    assert store.instruction_state(ALPHA).values == {"builtin:system": SECTION}
    assert store.retry_state(ALPHA) is None
    assert store.current_claim(ALPHA) is None  # released
    # Migration 19: bodies written before it may be of other shapes (read reshaped).
    with store.backend.transaction(write=False) as tx:
        shapes = dict(tx.all("SELECT id, message_shapes FROM sessions"))
    assert shapes == {row.id: "-" for row in every}


def test_fixture_is_schema_version_1(v1_copy: Path):
    assert versions(v1_copy) == [(1, "initial")]


def test_v1_file_opens_and_reads_back(v1_copy: Path):
    store = open_store(str(v1_copy))
    try:
        check_v1_data(store)
    finally:
        store.close()
    assert versions(v1_copy) == [(n, name) for n, name, _s, _p in MIGRATIONS]


def open_check_close(path: Path) -> dict[str, bytes]:
    store = open_store(str(path))
    try:
        check_v1_data(store)
    finally:
        store.close()
    return snapshot(path.parent)


def test_upgrade_is_idempotent(v1_copy: Path):
    after_first = open_check_close(v1_copy)
    assert open_check_close(v1_copy) == after_first  # the second open changed no byte
    assert versions(v1_copy) == [(n, name) for n, name, _s, _p in MIGRATIONS]


def test_upgrade_backs_up_the_file_before_migrating(v1_copy: Path):
    original = v1_copy.read_bytes()
    open_store(str(v1_copy)).close()
    backups = {p.name: p.read_bytes() for p in v1_copy.parent.glob("*.bak")}
    if LATEST > 1:
        assert backups == {"sessions.db.v1.bak": original}
    else:  # nothing to migrate, so nothing to back up
        assert backups == {}


def test_upgraded_file_takes_new_writes(v1_copy: Path):
    store = open_store(str(v1_copy))
    try:
        # The pending control item is a delivery boundary ahead of the queued input.
        assert [d.item.input_id for d in store.promote(ALPHA, idle=False)] == ["in_3"]
        assert [d.item.input_id for d in store.promote(ALPHA, idle=True)] == ["in_2"]
        store.admit(ALPHA, "in_4", "user", {"text": "after the upgrade"})
        store.promote(ALPHA, idle=True)
        assert [m.text() for m in store.messages(ALPHA)][-2:] == [
            "later, please",
            "after the upgrade",
        ]
        seqs = [e.seq for e in store.events(ALPHA)]
        assert seqs == list(range(1, 26))
        store.append(ALPHA, [MessageAdded(message=assistant("a new body"))])
        assert store.plain_messages(ALPHA) == [
            m.model_dump(mode="json", exclude_none=True) for m in store.messages(ALPHA)
        ]
        with store.backend.transaction(write=False) as tx:
            assert tx.one("SELECT message_shapes FROM sessions WHERE id = ?", (ALPHA,)) == ("-",)
    finally:
        store.close()


def test_upgraded_file_is_searchable(v1_copy: Path):
    """Migration 7 adds the full-text index; the first open fills it from the old sessions."""
    from tests.store.test_search import expected, indexed
    from tests.store.test_search_batched import WAITING

    store = open_store(str(v1_copy))
    try:
        for row in store.list_sessions(roots_only=False, archived=None).sessions:
            assert indexed(store, row.id) == expected(store, row.id), row.id
        fork = next(s.id for s in store.list_sessions().sessions if s.id != ALPHA)
        found = {h.session.id for h in store.search("readme").hits}  # the call and its result
        assert found == {ALPHA, fork}  # the fork copied them
        assert [h.session.id for h in store.search("answer", archived=True).hits] == ["ses_v1_beta"]
        assert [h.session.id for h in store.search("report").hits] == ["ses_v1_child"]
        # Migrations 20 and 22: after a search nothing waits, and the index is exactly the
        # text its view reads from the log.
        conn = store.backend._conn  # type: ignore[attr-defined]
        conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
        assert conn.execute(WAITING).fetchone()[0] == 0
    finally:
        store.close()


def test_fresh_file_is_migrated_without_a_backup(tmp_path: Path):
    path = tmp_path / "sessions.db"
    open_store(str(path)).close()
    assert [p.name for p in tmp_path.iterdir()] == ["sessions.db"]
    assert versions(path) == [(n, name) for n, name, _s, _p in MIGRATIONS]


_MESSAGE_COLUMNS = "SELECT session_id, seq, message_id, role, turn_id FROM messages ORDER BY 1, 2"


def test_upgraded_messages_are_stored_once(v1_copy: Path, tmp_path: Path):
    """Migration 15: `messages` keeps its rows in its key alone (WITHOUT ROWID, no second
    copy), on an upgraded file with every row kept, and on a new one (since migration 33 in
    `message_log`, under the session's integer key, read through the view `messages`)."""
    conn = sqlite3.connect(v1_copy)
    before = conn.execute(_MESSAGE_COLUMNS).fetchall()
    conn.close()
    assert before  # the fixture has a transcript
    fresh = tmp_path / "fresh" / "sessions.db"
    for path in (v1_copy, fresh):
        open_store(str(path)).close()
        conn = sqlite3.connect(path)
        try:
            with pytest.raises(sqlite3.OperationalError, match="rowid"):
                conn.execute("SELECT rowid FROM message_log")
            indexes = {r[1] for r in conn.execute("PRAGMA index_list(message_log)")}
            assert "messages_reverted" in indexes
            if path == v1_copy:
                assert conn.execute(_MESSAGE_COLUMNS).fetchall() == before
        finally:
            conn.close()


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_newer_schema_is_refused_and_left_untouched(v1_copy: Path, journal: str):
    conn = sqlite3.connect(v1_copy)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute("INSERT INTO schema_migrations VALUES (999, 'from the future', 0)")
    conn.commit()
    conn.close()
    before = snapshot(v1_copy.parent)
    with pytest.raises(MigrationError, match=r"schema version 999.*not touched") as err:
        open_store(str(v1_copy))
    assert str(v1_copy) in str(err.value)
    assert snapshot(v1_copy.parent) == before  # same bytes, no backup, no -wal/-shm left


@pytest.mark.postgres
def test_newer_schema_is_refused_on_postgres():
    with fresh_database() as url:
        store = open_store(url)
        store.create_session("ses_a")
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO schema_migrations VALUES (999, 'from the future', 0)")
        with pytest.raises(MigrationError, match=r"schema version 999.*not touched"):
            open_store(url)
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute("SELECT version FROM schema_migrations ORDER BY 1").fetchall()
            assert [r[0] for r in rows] == [*(n for n, *_ in MIGRATIONS), 999]
            assert conn.execute("SELECT id FROM sessions").fetchall() == [("ses_a",)]


def test_concurrent_first_opens_migrate_once(db_url: str):
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_and_close() -> None:
        barrier.wait()
        try:
            open_store(db_url).close()
        except BaseException as err:  # collected, re-raised by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=open_and_close) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    store = open_store(db_url)
    try:
        store.create_session("ses_a")  # the schema is complete
        assert store.get_session("ses_a").last_seq == 1
    finally:
        store.close()
    if db_url.startswith("postgresql://"):
        with psycopg.connect(db_url) as conn:
            recorded = conn.execute("SELECT version, name FROM schema_migrations ORDER BY 1")
            assert recorded.fetchall() == [(n, name) for n, name, _s, _p in MIGRATIONS]
    else:
        assert versions(Path(db_url)) == [(n, name) for n, name, _s, _p in MIGRATIONS]


@pytest.mark.slow
def test_many_first_opens_of_fresh_sqlite_files_never_report_busy(tmp_path: Path):
    # Switching a new file to WAL needs it to itself, and SQLite answers "locked" at once
    # rather than waiting; the backend waits it out within the busy timeout (it used to
    # raise StoreBusyError for some of the openers).
    errors: list[BaseException] = []
    for round_ in range(150):
        path = tmp_path / f"fresh{round_}.db"
        barrier = threading.Barrier(6)

        def open_and_close(path: Path = path, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                open_store(str(path)).close()
            except BaseException as err:  # collected, re-raised by the assertion below
                errors.append(err)

        threads = [threading.Thread(target=open_and_close) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert errors == []


def test_the_admission_function_keeps_the_listing_slack_of_the_python_path():
    """PostgreSQL admissions move `listed_ms` in SQL, other appends in Python: the same rule."""
    from wakeful.store._admit_sql import ADMIT_FUNCTION_2
    from wakeful.store._listing import LIST_SLACK_MS

    assert f"p_now - listed_ms >= {LIST_SLACK_MS} THEN p_now" in ADMIT_FUNCTION_2


def test_migrations_are_one_ordered_list_of_eras():
    """`MIGRATIONS` is every era module's `ERA` in order (a `_vNN.py` left out of the package's
    list would never run), each era holds its own range of numbers (`_v21` from 21 up to the
    next era's start), and the numbers only grow: where the next migration goes is the end of
    the newest era module."""
    import importlib
    import re

    import wakeful.store._migrations as package

    starts = sorted(
        int(m.group(1))
        for p in Path(package.__file__).parent.glob("_v*.py")
        if (m := re.fullmatch(r"_v(\d+)\.py", p.name))
    )
    assert starts[:3] == [1, 11, 21]
    eras = [importlib.import_module(f"{package.__name__}._v{s:02d}").ERA for s in starts]
    assert [m for era in eras for m in era] == MIGRATIONS
    for start, end, era in zip(starts, [*starts[1:], None], eras, strict=True):
        assert era and all(start <= n and (end is None or n < end) for n, *_ in era)
    numbers = [n for n, *_ in MIGRATIONS]
    assert numbers == sorted(set(numbers)) and numbers[-1] == LATEST
    assert tuple(numbers) == NUMBERS  # what an up-to-date open reads, without the scripts
