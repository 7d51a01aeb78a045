"""SQLite's full-text index reads its text from the log (migration 25, issue 36 item 5): no
message text is copied into `search_docs` (it holds titles only), every change to the
transcript (hide, edit, delete a turn, a revert made final, a delete) keeps the index exactly
the text the log gives, and a store of the previous schema upgrades in place (a file and a
PostgreSQL database): every session reads back whole, searches as before, and prunes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.make_schema_v21 import fill, searches
from tests.pg import fresh_database
from tests.store.helpers import add_message, frozen_v30_pg
from tests.store.test_search import expected, indexed
from wakeful.messages import assistant
from wakeful.store import SqlStore, open_store
from wakeful.store._migrations import MIGRATIONS

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "schema_v21.db"


def _check(store: SqlStore, sids: list[str]) -> None:
    for sid in sids:
        assert indexed(store, sid) == expected(store, sid), sid


@pytest.mark.usefixtures("own_keys")  # plain: it reads the index's words
def test_no_message_text_is_copied_and_every_change_keeps_the_index_exact(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    try:
        sids = fill(store)
        _check(store, sids)
        with store.backend.transaction(write=False) as tx:
            assert {r[0] for r in tx.all("SELECT DISTINCT seq FROM search_docs")} == {0}
        found = {
            q: {(str(h[0]), int(h[1]), str(h[2])) for h in hits}
            for q, hits in searches(store).items()
        }
        assert {s for s, _n, _t in found["edited"]} == {sids[0], sids[2]}
        assert [t for s, _n, t in found["answer"] if s == sids[1]] == ["floating upright, answer 1"]
        assert found["hidden"] == set() and found["reverted"] == set()
        assert store.search("secret").hits == []
        assert {s for s, _n, _t in found["narwhal"]} == {sids[2]}
        assert {s for s, n, _t in found["walrus"] if n == 0} == set(sids[:2])  # the titles
        store.delete(sids[0])
        assert indexed(store, sids[0]) == []
        _check(store, sids[1:])
        assert sids[0] not in {h.session.id for h in store.search("tusk").hits}
    finally:
        store.close()


def _read_back(store: SqlStore, read: dict[str, Any]) -> None:
    """Every session reads back whole as the previous version read it, and searches alike;
    then new messages index, and a prune takes everything out of the index."""
    sids: list[str] = read["sessions"]
    with store.backend.transaction(write=False) as tx:
        assert tx.one("SELECT MAX(version) FROM schema_migrations") == (MIGRATIONS[-1][0],)
    assert {sid: store.plain_messages(sid) for sid in sids} == read["plain"]
    typed = {
        sid: [m.model_dump(mode="json", exclude_none=True) for m in store.messages(sid)]
        for sid in sids
    }
    assert typed == read["plain"]
    assert searches(store) == read["searches"]
    assert all(read["searches"][w] for w in ("walrus", "tusk", "edited", "narwhal"))
    _check(store, sids)
    add_message(store, sids[1], assistant("a narwhal after the upgrade"))
    assert sids[1] in {h.session.id for h in store.search("narwhal").hits}
    every = len(store.list_sessions(roots_only=False, archived=None).sessions)
    assert store.prune(2**62, "delete").sessions == every
    assert all(not hits for hits in searches(store).values())
    assert all(indexed(store, sid) == [] for sid in sids)


@pytest.mark.usefixtures("own_keys")  # plain: a store of an earlier schema with sessions
def test_a_file_made_by_the_previous_version_upgrades_in_place(tmp_path: Path) -> None:
    copy = tmp_path / "sessions.db"
    shutil.copyfile(FIXTURE, copy)
    read = json.loads(FIXTURE.with_suffix(".json").read_text())
    store = open_store(str(copy))
    try:
        _read_back(store, read)
    finally:
        store.close()


@pytest.mark.postgres
@pytest.mark.usefixtures("own_keys")  # plain: a store of an earlier schema with sessions
def test_a_database_of_the_previous_schema_upgrades_in_place() -> None:
    """PostgreSQL's schema and writes were the same before and after migration 25 (it is empty
    there); since migration 33 today's code writes a schema of its own, so the previous
    version's database is the frozen one of migration 30 (`make_schema_v30.py`: `fill`'s
    sessions and more, written by main at bb11560)."""
    with fresh_database() as url:
        dump = frozen_v30_pg(url)
        store = open_store(url)
        try:
            _read_back(store, dump["read"])
        finally:
            store.close()
