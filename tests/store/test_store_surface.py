"""The `Store` protocol and the writes a host makes (create, append, prune, blobs), one suite
run unchanged against every store a host can hold: SQLite (a file, `memory_store` and
`file_map_store`),
PostgreSQL, and `RemoteStore` over a real `wakeful serve` process (issue 37, items 1, 2, 5).

No test asks which store it has. Each makes sessions of its own (the server is shared by the
tests of a module), so what one test writes never decides what another sees.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_database
from tests.server.test_serve_cli import Serve, _env
from wakeful.client import RemoteStore
from wakeful.errors import ConflictError, NotFoundError
from wakeful.events import MessageAdded, UsageRecorded, WorkStateUpdated
from wakeful.messages import assistant, user
from wakeful.store import file_map_store, memory_store, open_store

TOKEN = "surface-suite-token-7c41"
SENSITIVE = "surface-suite-sensitive-9e02"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One `wakeful serve` subprocess for the module, on a SQLite file of its own."""
    tmp = tmp_path_factory.mktemp("serve")
    serve = Serve(
        tmp, "--token", TOKEN, "--sensitive-token", SENSITIVE, "--model", "local", env=_env(tmp)
    )
    yield serve
    assert serve.stop() == 0


@pytest.fixture(
    params=[
        "sqlite",
        "memory",
        "file-map",
        "remote",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Each store a host can hold, typed as what its methods answer (no `isinstance` below)."""
    if request.param == "remote":
        serve: Serve = request.getfixturevalue("server")
        s: Any = RemoteStore(serve.url, SENSITIVE, headers={"X-Trace": "surface"}, timeout=20)
        yield s
    elif request.param == "memory":
        s = memory_store()
        yield s
    elif request.param == "file-map":
        s = file_map_store(tmp_path / "map")
        yield s
    elif request.param == "sqlite":
        s = open_store(str(tmp_path / "s.db"))
        yield s
    else:
        with fresh_database() as url:
            s = open_store(url)
            yield s
            s.close()
            return
    s.close()


def conversation(n: int) -> list[MessageAdded]:
    out = []
    for i in range(n):
        out.append(MessageAdded(message=user(f"question {i}")))
        out.append(MessageAdded(message=assistant(f"answer {i}")))
    return out


def test_create_with_an_id_then_read_it_back(store: Any):
    made = store.create_session(title="made here", metadata={"from": "suite"})
    assert store.get_session(made.id) == made and made.title == "made here"
    assert store.find_session(made.id + "-none") is None
    with pytest.raises(NotFoundError):
        store.get_session(made.id + "-none")
    chosen = f"ses_surface{time.time_ns()}"
    row = store.create_session(chosen, title="chosen")
    assert row.id == chosen and store.resolve_session_id(chosen[:-3]) == chosen
    with pytest.raises(ConflictError, match="already exists"):
        store.create_session(chosen, title="again")
    assert store.get_session(chosen).title == "chosen"  # the refused create wrote nothing


def test_append_reads_back_through_every_read(store: Any):
    sid = store.create_session(title="append").id
    stored = store.append(sid, [*conversation(2), WorkStateUpdated(kind="goal", value="g")])
    assert [e.seq for e in stored] == [2, 3, 4, 5, 6]
    assert [e.id for e in stored] == sorted(e.id for e in stored)
    assert store.high_water(sid) == 6
    assert [m.text() for m in store.messages(sid)] == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
    ]
    assert store.work_state(sid) == {"goal": "g"}
    assert [e.type for e in store.events(sid, types=["work_state.updated"])] == [
        "work_state.updated"
    ]
    store.append(sid, [UsageRecorded(input_tokens=10, output_tokens=5, cost_usd=0.5)])
    row = store.get_session(sid)
    assert (row.input_tokens, row.output_tokens, row.cost_usd) == (10, 5, 0.5)
    assert row.last_seq == 7


def test_messages_read_in_pages_after_a_seq(store: Any):
    sid = store.create_session(title="pages").id
    store.append(sid, conversation(5))  # ten messages
    whole = store.messages_with_seq(sid)
    pages, after = [], 0
    while page := store.messages_with_seq(sid, after, 3):
        assert len(page) <= 3
        pages.append(page)
        after = page[-1][0]
    assert [len(p) for p in pages] == [3, 3, 3, 1]
    assert [x for p in pages for x in p] == whole
    assert [m.text() for m in store.messages(sid, whole[3][0], 2)] == ["question 2", "answer 2"]
    assert store.messages(sid, whole[-1][0], 5) == []


def test_blobs_are_stored_once_by_digest(store: Any):
    sid = store.create_session(title="blobs").id
    data = f"blob of {sid}".encode()
    digest = store.put_blob(data, sid)
    assert digest == hashlib.sha256(data).hexdigest()
    assert store.put_blob(data) == digest
    assert store.get_blob(digest) == data
    other = store.put_blob(b"\x00\xffbinary")
    assert store.get_blobs([digest, other, digest]) == {digest: data, other: b"\x00\xffbinary"}
    with pytest.raises(NotFoundError):
        store.get_blob("0" * 64)


def test_admission_is_idempotent_and_pending(store: Any):
    sid = store.create_session(title="inbox").id
    first = store.admit(sid, "in-1", "user", {"text": "later"}, "queue")
    again = store.admit(sid, "in-1", "user", {"text": "later"}, "queue")
    assert first.created and not again.created
    with pytest.raises(ConflictError):
        store.admit(sid, "in-1", "user", {"text": "other"}, "queue")
    assert [i.input_id for i in store.pending(sid)] == ["in-1"]


def test_list_fork_archive_delete(store: Any):
    sid = store.create_session(title="listed").id
    store.append(sid, conversation(1))
    assert sid in {r.id for r in store.list_sessions(limit=500).sessions}
    fork = store.fork(sid, title="forked")
    assert [m.text() for m in store.messages(fork.id)] == ["question 0", "answer 0"]
    store.set_archived(fork.id)
    assert store.get_session(fork.id).archived
    assert fork.id not in {r.id for r in store.list_sessions(limit=500).sessions}
    assert fork.id in {r.id for r in store.list_sessions(archived=True, limit=500).sessions}
    assert store.session_summaries([sid])[sid].child_sessions == 0
    assert store.children(sid) == []
    assert store.delete(fork.id).sessions == 1
    assert store.find_session(fork.id) is None


def test_prune_previews_archives_and_deletes(store: Any):
    def idle_sessions() -> tuple[list[str], int]:
        made = [store.create_session(title="idle").id for _ in range(2)]
        for sid in made:
            store.append(sid, conversation(1))
        time.sleep(0.01)
        return made, int(time.time() * 1000) + 1

    first, cutoff = idle_sessions()
    preview = store.prune(cutoff, "preview")
    assert preview.sessions >= 2 and all(store.find_session(s) for s in first)
    assert store.prune(cutoff, "archive") == preview  # (archiving updates them: not idle now)
    assert all(store.get_session(s).archived for s in first)
    second, cutoff = idle_sessions()
    preview = store.prune(cutoff, "preview")
    assert preview.sessions >= 4 and preview.messages >= 8
    assert store.prune(cutoff, "delete") == preview
    assert all(store.find_session(s) is None for s in first + second)


def test_listing_filters_by_agent_and_location(store: Any, tmp_path: Path):
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    a = store.create_session(title="a", agent="build", location=str(here)).id
    b = store.create_session(title="b", agent="plan", location=str(here)).id
    c = store.create_session(title="c", agent="plan", location=str(there)).id

    def listed(**filters: Any) -> set[str]:
        return {r.id for r in store.list_sessions(limit=500, **filters).sessions} & {a, b, c}

    assert listed() == {a, b, c}
    assert listed(agent="plan") == {b, c}
    assert listed(location=str(here)) == {a, b}
    assert listed(agent="plan", location=str(there)) == {c}
    assert listed(agent="build", location=str(there)) == set()
    page = store.list_sessions(limit=1, agent="plan", location=str(here))
    assert [r.id for r in page.sessions] == [b] and page.next_cursor is None
