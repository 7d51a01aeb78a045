"""What one append and one admission send to SQLite (issue 25: at one commit per write, every
statement and every encoding of the hot path is a share of the floor's commit rate)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from wakeful.errors import ClaimLostError, StoreError
from wakeful.events import MessageAdded, SessionCreated, ToolCallStarted
from wakeful.messages import user
from wakeful.store import SqlStore, _inbox, fence, open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    opened = open_store(str(tmp_path / "s.db"))
    opened.admit("ses_a", "i0", "user", {"text": "hi"}, create=SessionCreated())
    yield opened
    opened.close()


def _traced(store: SqlStore) -> list[str]:
    """The first words of each top-level statement the write connection runs from now on.
    FTS5's own statements start with `--` and are left out; a trigger's start is traced as
    the statement that fired it, again (after FTS5's), and is left out too."""
    sent: list[str] = []
    last = [""]

    def trace(sql: str) -> None:
        if not sql.startswith("--") and sql != last[0]:
            sent.append(" ".join(re.split(r"[\s(]+", sql)[:3]))
            last[0] = sql

    store.backend._conn.set_trace_callback(trace)  # type: ignore[attr-defined]
    return sent


def test_a_lone_append_runs_no_savepoint(store: SqlStore) -> None:
    """The write that opens a group commit is alone in it while it runs: no SAVEPOINT and
    RELEASE around its statements (they were two of ten per append)."""
    store.append("ses_a", [MessageAdded(message=user("zero"))])  # (the connection's first
    sent = _traced(store)  # write of a message also connects the FTS5 index: its config read)
    store.append("ses_a", [MessageAdded(message=user("one"))])
    assert sent == [
        "BEGIN IMMEDIATE",
        "SELECT COALESCE SELECT",  # (the newest seq is the log's: migration 37)
        "SELECT MAX upto,",
        "INSERT INTO event_log",
        "INSERT INTO message_log",
        "COMMIT",  # (nothing of the session's row changed: it is not written)
    ]


def test_a_failed_lone_write_leaves_nothing(store: SqlStore) -> None:
    """Without its savepoint, a lone write that fails midway is rolled back whole: the rows
    it inserted before the failure are gone, and the next write commits after it."""
    before = store.events("ses_a")
    started = ToolCallStarted(call_id="c1", message_id="m1", name="t")
    with pytest.raises(StoreError):  # the second call's projection row: a duplicate key
        store.append("ses_a", [MessageAdded(message=user("lost")), started, started])
    assert store.events("ses_a") == before
    assert all(m.text() != "lost" for m in store.messages("ses_a"))
    assert store.search("lost").hits == []
    [stored] = store.append("ses_a", [MessageAdded(message=user("next"))])
    assert stored.seq == before[-1].seq + 1
    assert store.messages("ses_a")[-1].text() == "next"


def test_a_joined_write_that_fails_leaves_the_groups_others(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that joins an open group still runs under its savepoint: its failure takes
    back its own statements only, and the write that opened the group commits."""
    joined = threading.Event()
    backend = store.backend
    settle = backend._settle  # type: ignore[attr-defined]

    def late_settle() -> None:
        # Before the first write's COMMIT, a second write joins its group and fails.
        if not joined.is_set():
            joined.set()
            with pytest.raises(ClaimLostError):
                store.append("ses_a", [MessageAdded(message=user("lost"))], fence(claim))
        settle()

    claim = store.claims.acquire("ses_a", "host/1/a", 60_000)
    assert claim is not None
    store.claims.release(claim)
    sent = _traced(store)
    monkeypatch.setattr(backend, "_settle", late_settle)
    store.append("ses_a", [MessageAdded(message=user("kept"))])
    assert "SAVEPOINT write" in sent and "ROLLBACK TO write" in sent
    assert store.messages("ses_a")[-1].text() == "kept"
    assert all(m.text() != "lost" for m in store.messages("ses_a"))


def test_an_admission_encodes_its_input_once(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One content digest and one `inbox.enqueued` event per admission: the one-statement
    admission's arguments (PostgreSQL) and the transaction's writes (SQLite) share them."""
    built: list[str] = []
    digest = _inbox.content_digest

    def counted(kind, payload, delivery):  # type: ignore[no-untyped-def]
        built.append(kind)
        return digest(kind, payload, delivery)

    monkeypatch.setattr(_inbox, "content_digest", counted)
    sent = _traced(store)
    admitted = store.admit("ses_a", "i1", "user", {"text": "two"})
    assert admitted.created and built == ["user"]
    assert "SAVEPOINT write" not in sent
    assert store.input("ses_a", "i1") == admitted.item
