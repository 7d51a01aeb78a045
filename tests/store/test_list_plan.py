"""The session listing reads its page from the listing indexes, never by sorting every root.

Migration 8's full `sessions_parent` index made SQLite's planner read every root through it for
`parent_id IS NULL` and sort them all (a first page of 100,000 sessions: ~37 ms instead of well
under one); migration 18 keeps roots out of that index. Each statement a listing sends is
explained on the same file and must search a listing index.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from wakeful.store import open_store


@pytest.mark.parametrize("roots_only", [True, False], ids=["roots", "all"])
def test_a_listing_searches_a_listing_index(tmp_path: Path, roots_only: bool):
    path = str(tmp_path / "s.db")
    store = open_store(path)
    for n in range(3):
        parent = store.create_session(f"ses_{n}")
        store.create_session(f"ses_{n}_kid", parent_id=parent.id)
    sent: list[str] = []
    store.backend._reader.set_trace_callback(sent.append)  # type: ignore[attr-defined]  # the read connection
    store.list_sessions(roots_only=roots_only, limit=2)
    store.backend._reader.set_trace_callback(None)  # type: ignore[attr-defined]
    listing = [s for s in sent if s.lstrip().upper().startswith("SELECT") and "FROM sessions" in s]
    assert listing, sent
    explain = sqlite3.connect(path)
    for statement in listing:
        plan = " ".join(str(row[3]) for row in explain.execute("EXPLAIN QUERY PLAN " + statement))
        assert "sessions_parent" not in plan, (statement, plan)
        assert "sessions_roots" in plan or "sessions_list" in plan, (statement, plan)
    store.close()


def test_children_are_still_read_from_their_index(tmp_path: Path):
    path = str(tmp_path / "s.db")
    store = open_store(path)
    store.create_session("ses_a")
    store.create_session("ses_b", parent_id="ses_a")
    assert [c.id for c in store.children("ses_a")] == ["ses_b"]
    explain = sqlite3.connect(path)
    plan = explain.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM sessions WHERE parent_id = ? ORDER BY created_ms",
        ("ses_a",),
    ).fetchall()
    assert "sessions_parent" in " ".join(str(r[3]) for r in plan)
    store.close()
