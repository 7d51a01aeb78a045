"""Each text stored once (issue 36 item 5): PostgreSQL's search rows keep only the `tsvector`
(migration 21), a hit's snippet is cut from the log, and a database of the previous schema
upgrades in place: every session reads back whole and searches as before."""

from __future__ import annotations

import pytest

from tests.pg import fresh_database
from tests.store.helpers import add_message, frozen_before_key
from tests.store.test_search import expected, indexed, say
from wakeful.messages import Message, TextBlock, ToolCallBlock, assistant
from wakeful.store import SqlStore, open_store
from wakeful.store._migrations import LATEST


def _fill(store: SqlStore) -> list[str]:
    sids = []
    for i in range(3):
        sid = store.create_session(title=f"walrus project {i}").id
        say(store, sid, f"how do walruses sleep, question {i}?")
        call = ToolCallBlock(id="c1", name="shell", input={"command": "grep -r tusk"})
        add_message(store, sid, Message(role="assistant", blocks=(TextBlock(text="look"), call)))
        add_message(store, sid, assistant(f"floating upright, answer {i}"))
        sids.append(sid)
    return sids


def _searches(store: SqlStore) -> dict[str, list[tuple[str, int, str]]]:
    return {
        q: [(h.session.id, h.seq, h.snippet) for h in store.search(q, limit=10).hits]
        for q in ("walrus", "walruses", "tusk", "upright", "answer")
    }


def test_a_hit_s_snippet_comes_from_the_log(store: SqlStore) -> None:
    [first, *_] = _fill(store)
    [hit] = store.search("upright answer 0").hits
    assert (hit.session.id, hit.snippet) == (first, "floating upright, answer 0")
    [title] = [h for h in store.search("project").hits if h.session.id == first]
    assert (title.seq, title.snippet) == (0, "walrus project 0")
    [call] = [h for h in store.search("tusk").hits if h.session.id == first]
    assert call.snippet == "look shell grep -r tusk"


@pytest.mark.postgres
@pytest.mark.usefixtures("own_keys")  # plain: it searches the index's words
def test_search_rows_keep_no_text_on_postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    with fresh_database() as url:
        store = open_store(url)
        try:
            sids = _fill(store)
            with store.backend.transaction(write=False) as tx:
                columns = {
                    r[0]
                    for r in tx.all(
                        "SELECT column_name FROM information_schema.columns "
                        "WHERE table_name = 'search_docs'"
                    )
                }
            assert columns == {"id", "session_id", "seq", "tsv"}
            for sid in sids:
                assert indexed(store, sid) == expected(store, sid)
        finally:
            store.close()


@pytest.mark.postgres
@pytest.mark.usefixtures("own_keys")  # plain: a store of an earlier schema with sessions
def test_a_database_of_the_previous_schema_upgrades_in_place() -> None:
    # The schema before migration 21, as the previous version wrote it (the text in `body`):
    # frozen since migration 33, whose writes today's code cannot make there
    # (`tests/fixtures/make_before_key.py`).
    with fresh_database() as url:
        read = frozen_before_key("search_text_once_20", url)
        sids = read["sids"]
        found = {q: [tuple(h) for h in hits] for q, hits in read["searches"].items()}
        store = open_store(url)
        try:
            with store.backend.transaction(write=False) as tx:
                assert tx.one("SELECT MAX(version) FROM schema_migrations") == (LATEST,)
            typed = {s: [m.model_dump(mode="json") for m in store.messages(s)] for s in sids}
            assert typed == read["messages"]
            assert _searches(store) == found
            assert all(found.values())
            for sid in sids:
                assert indexed(store, sid) == expected(store, sid)
            add_message(store, sids[0], assistant("a narwhal, after the upgrade"))
            assert [h.session.id for h in store.search("narwhal").hits] == [sids[0]]
        finally:
            store.close()
