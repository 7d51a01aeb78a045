"""A store without its full-text index (docs/search.md, "Without search"), on both backends:
turned off, a message writes no index entry and a search is a `SearchOffError` naming how to
turn it on; turned on again, the index is filled from the log and answers what a store that
never turned it off answers; every process of the store agrees (the setting is in the store),
also with writers busy while it changes; encrypted stores alike; a store of migration 31
upgrades with its index (migration 32). The CLI's verb and the API's refusal are tested in
`tests/cli/test_search.py` and `tests/server/test_search_api.py`."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_database
from tests.store.helpers import add_message, as_of, frozen_before_key
from tests.store.test_encryption import encryption, key_file
from tests.store.test_search import expected, indexed, say
from wakeful.clock import FakeClock
from wakeful.errors import MigrationError, SearchOffError, UsageError
from wakeful.events import MessageAdded, MessagesHidden
from wakeful.messages import Message, ToolCallBlock, ToolResultBlock, assistant, user
from wakeful.store import SqlStore, _postgres, _sqlite, open_store
from wakeful.store._migrations import LATEST, MIGRATIONS

BEFORE_32 = [m for m in MIGRATIONS if m[0] < 32]
SIDS = ("ses_a0", "ses_a1", "ses_a2", "ses_a3", "ses_afork")

# (the last one: a hidden message's word, found by none)
QUERIES = ("lexer", "parser", "grammar*", "emoji tokens", "shell", "zebra2", "retitled", "hidden")


def _fill(store: SqlStore, tag: str) -> list[str]:
    """Sessions of every kind of indexed content (named, so two stores can be compared):
    titles, delivered inputs, replies, tool calls and results, a retitle, a hidden message,
    a fork."""
    sids = []
    for i in range(4):
        sid = store.create_session(f"ses_{tag}{i}", title=f"Parser work {tag}{i}").id
        say(store, sid, f"Why does the lexer choke on emoji tokens {i}?")
        add_message(store, sid, assistant(f"Let me look at the grammar {tag} zebra{i}"))
        add_message(
            store,
            sid,
            Message(role="assistant", blocks=(ToolCallBlock(id="c", name="shell", input={}),)),
        )
        add_message(
            store, sid, Message(role="user", blocks=(ToolResultBlock(call_id="c", output="ok"),))
        )
        sids.append(sid)
    store.update_session(sids[1], title="retitled parser")
    gone = add_message(store, sids[2], user("zebra hidden later"))
    assert isinstance(gone.event, MessageAdded)
    store.append(sids[2], [MessagesHidden(message_ids=(gone.event.message.id,))])
    sids.append(store.fork(sids[0], new_id=f"ses_{tag}fork").id)
    return sids


def _answers(store: SqlStore, queries: tuple[str, ...] = QUERIES) -> list[list[Any]]:
    out = []
    for query in queries:
        page = store.search(query, limit=50)
        out.append([(h.session.id, h.seq, h.snippet) for h in page.hits])
    return out


def _entries(store: SqlStore) -> int:
    """Index entries in the store: `search_docs` rows, and on SQLite FTS5's documents."""
    with store.backend.transaction(write=False) as tx:
        rows = tx.one("SELECT COUNT(*) FROM search_docs")[0]  # type: ignore[index]
        if store.backend.kind == "sqlite":
            rows += tx.one("SELECT COUNT(*) FROM search_fts_docsize")[0]  # type: ignore[index]
    return int(rows)


@contextlib.contextmanager
def _twin_url(db_url: str, tmp_path: Path) -> Iterator[str]:
    """A second empty store of the same backend."""
    if "://" not in db_url:
        yield str(tmp_path / "twin.db")
    else:
        with fresh_database() as url:
            yield url


@pytest.mark.usefixtures("own_keys")  # plain: it reads the index's rows
def test_off_on_round_trip_answers_as_a_store_never_turned_off(
    db_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    with _twin_url(db_url, tmp_path) as twin_url, contextlib.ExitStack() as stack:
        store = open_store(db_url, clock=clock)
        stack.callback(store.close)
        twin = open_store(twin_url, clock=clock)  # never turned off
        stack.callback(twin.close)
        assert store.search_enabled
        sids = _fill(store, "a")
        _fill(twin, "a")
        answers = _answers(store)
        assert answers == _answers(twin) and all(answers[:-1]) and not answers[-1]
        assert store.set_search(False) is True and store.set_search(False) is False
        assert not store.search_enabled and _entries(store) == 0
        with pytest.raises(SearchOffError, match="wakeful store search on") as err:
            store.search("lexer")
        assert isinstance(err.value, UsageError)
        # while off, writes of every kind index nothing
        for one in (store, twin):
            _fill(one, "b")
            one.delete("ses_b3")
        assert _entries(store) == 0
        assert store.set_search(True) is True and store.set_search(True) is False
        assert store.search_enabled
        for sid in [*sids, "ses_b0", "ses_b1", "ses_b2", "ses_bfork"]:
            assert indexed(store, sid) == expected(store, sid), sid
        assert _answers(store) == _answers(twin)
        for one in (store, twin):  # and it goes on indexing
            add_message(one, "ses_a0", user("a lexer word after"))
        assert _answers(store) == _answers(twin)
        assert [h.session.id for h in store.search("after").hits] == ["ses_a0"]


def test_every_process_of_the_store_agrees(db_url: str) -> None:
    one, two = open_store(db_url), open_store(db_url)
    try:
        sid = one.create_session(title="shared zebra").id
        assert [h.session.id for h in two.search("zebra").hits] == [sid]
        one.set_search(False)
        assert not two.search_enabled
        add_message(two, sid, user("written by the other process"))
        with pytest.raises(SearchOffError):
            two.search("zebra")
        two.set_search(True)
        assert [h.session.id for h in one.search("other").hits] == [sid]
        assert [h.session.id for h in one.search("zebra").hits] == [sid]
    finally:
        one.close()
        two.close()


@pytest.mark.usefixtures("own_keys")
def test_an_encrypted_store_turns_its_index_off_and_on(db_url: str, tmp_path: Path) -> None:
    settings = encryption(tmp_path, key_file(tmp_path), tmp_path / "store.keyring")
    store = open_store(db_url, encryption=settings)
    try:
        assert store.backend.cipher is not None
        _fill(store, "a")
        exact = tuple(q for q in QUERIES if not q.endswith("*"))  # (no prefix: keyed hashes)
        before = _answers(store, exact)
        store.set_search(False)
        assert _entries(store) == 0
        store.set_search(True)
        assert _answers(store, exact) == before and all(before[:-1])
        assert [h.session.id for h in store.search("zebra1").hits] == ["ses_a1"]
        with store.backend.transaction(write=False) as tx:
            body = "body" if tx.kind == "sqlite" else "tsv::text"
            words = " ".join(str(r[0]) for r in tx.all(f"SELECT {body} FROM search_docs"))
        assert words and "parser" not in words.lower()  # keyed hashes, as before
    finally:
        store.close()


def _upgraded_reads_whole(url: str, backend: Any) -> None:
    """A store `_fill` wrote at migration 31 (frozen, by main at a809d8d: since migration 33
    today's code cannot write that schema, `tests/fixtures/make_before_key.py`) upgrades with
    its index, which answers as it did."""
    read = frozen_before_key("search_setting_31", url)
    answers = read["answers"]
    store = open_store(url)
    try:
        with store.backend.transaction(write=False) as tx:
            assert tx.one("SELECT MAX(version) FROM schema_migrations") == (LATEST,)
        assert store.search_enabled  # an upgraded store keeps its index
        typed = {s: [m.model_dump(mode="json") for m in store.messages(s)] for s in SIDS}
        assert typed == read["messages"]
        assert _json(_answers(store)) == answers
        store.set_search(False)
        store.set_search(True)
        assert _json(_answers(store)) == answers
    finally:
        store.close()
    with pytest.MonkeyPatch.context() as old:  # code of migration 31 refuses it now
        as_of(old, backend, BEFORE_32)
        with pytest.raises(MigrationError):
            open_store(url).close()


def _json(value: object) -> Any:
    return json.loads(json.dumps(value))


@pytest.mark.usefixtures("own_keys")
def test_a_file_of_the_previous_schema_upgrades_with_its_index(tmp_path: Path) -> None:
    _upgraded_reads_whole(str(tmp_path / "s.db"), _sqlite)


@pytest.mark.postgres
@pytest.mark.usefixtures("own_keys")
def test_a_database_of_the_previous_schema_upgrades_with_its_index() -> None:
    with fresh_database() as url:
        _upgraded_reads_whole(url, _postgres)


def _wait_for_writes(store: SqlStore, failures: list[BaseException], more: int = 6) -> None:
    """Until the writers appended `more` messages (or one failed)."""
    count = "SELECT COUNT(*) FROM messages"
    with store.backend.transaction(write=False) as tx:
        start = int(tx.one(count)[0])  # type: ignore[index]
    deadline = time.monotonic() + 30
    while not failures and time.monotonic() < deadline:
        with store.backend.transaction(write=False) as tx:
            if int(tx.one(count)[0]) >= start + more:  # type: ignore[index]
                return
        time.sleep(0.01)
    assert not failures, failures
    raise AssertionError("the writers stopped writing")


@pytest.mark.usefixtures("own_keys")  # plain: it reads the index's rows
def test_turning_it_off_and_on_beside_writers_leaves_the_index_exact(db_url: str) -> None:
    # Writers in other connections append, retitle and search while the index is turned off
    # and on: no deadlock, no error but the refusal while off, no entry left behind while
    # off, and once on every session's entries are exactly what it says.
    store = open_store(db_url)
    sids = [store.create_session(f"ses_w{i}", title=f"writer {i}").id for i in range(2)]
    stop = threading.Event()
    failures: list[BaseException] = []

    def write(sid: str) -> None:
        own = open_store(db_url)
        try:
            n = 0
            while not stop.is_set():
                n += 1
                add_message(own, sid, user(f"word{n} from {sid}"))
                if n % 5 == 0:
                    own.update_session(sid, title=f"writer {sid} {n}")
                with contextlib.suppress(SearchOffError):
                    own.search(f"word{n}")
        except BaseException as err:
            failures.append(err)
        finally:
            own.close()

    threads = [threading.Thread(target=write, args=(sid,)) for sid in sids]
    for thread in threads:
        thread.start()
    try:
        for _ in range(3):  # each change with writes before and after it
            _wait_for_writes(store, failures)
            store.set_search(False)
            assert _entries(store) == 0
            _wait_for_writes(store, failures)
            store.set_search(True)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not failures, failures
    try:
        for sid in sids:
            assert indexed(store, sid) == expected(store, sid)
        store.set_search(False)
        add_message(store, sids[0], user("after it all"))
        assert _entries(store) == 0
    finally:
        store.close()
