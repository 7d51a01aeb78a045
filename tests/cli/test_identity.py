"""A session's agent and model are its own: changed by a recorded `session.updated`, checked
before anything is written, and a stored model that can no longer be built blocks its turn."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import write_script
from wakeful.events import SessionUpdated, ToolCallEnded
from wakeful.store import open_store

HELLO = [{"match": ".", "replies": [{"text": "hello back"}]}]
WRITE = [
    {
        "match": "write",
        "replies": [
            {"tool_calls": [{"name": "write_file", "input": {"path": "out.txt", "content": "x"}}]},
            {"text": "done"},
        ],
    },
    {"match": ".", "replies": [{"text": "hello back"}]},
]


def sessions(wk) -> list[dict]:
    return json.loads(wk("session", "list", "--format", "json").stdout)


def nothing_stored(wk) -> bool:
    """No session, and on SQLite not even a database file (issue 38: nothing written)."""
    done = wk("session", "list", "--format", "json", check=False)
    if done.returncode == 2:
        return "no store at" in done.stderr
    return done.returncode == 0 and json.loads(done.stdout) == []


def run_json(wk, *args: str) -> dict:
    return json.loads(wk("run", "--format", "json", *args).stdout)


def test_a_fork_with_another_agent_runs_as_it_and_leaves_the_original(wk, workdir, db_url):
    model = write_script(workdir, WRITE)
    first = run_json(wk, "--model", model, "hello")
    sid = first["session_id"]
    fork = run_json(wk, "--session", sid, "--fork", "--agent", "plan", "please write out.txt")
    assert fork["session_id"] != sid and fork["outcome"] == "completed"
    assert not (workdir / "out.txt").exists()  # `plan` may not write
    store = open_store(db_url)
    try:
        original, forked = store.get_session(sid), store.get_session(fork["session_id"])
        assert (original.agent, forked.agent) == ("build", "plan")
        assert not store.events(sid, types=["session.updated"])
        [update] = [e.event for e in store.events(forked.id, types=["session.updated"])]
        assert update == SessionUpdated(agent="plan")
        [ended] = [e.event for e in store.events(forked.id, types=["tool.ended"])]
        assert isinstance(ended, ToolCallEnded) and ended.status == "failed"
        receipt = store.receipts(forked.id)[0]
        assert "agent:plan" in {source for _, source, _ in receipt.sections}
    finally:
        store.close()


def test_a_model_given_for_an_existing_session_is_recorded_before_the_turn(wk, workdir, db_url):
    first_model = write_script(workdir, HELLO)
    other = workdir.parent / "other.json"
    other.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "other"}]}]}))
    sid = run_json(wk, "--model", first_model, "one")["session_id"]
    again = run_json(wk, "--session", sid, "--model", f"scripted:{other}", "two")
    assert again["text"] == "other"
    store = open_store(db_url)
    try:
        assert store.get_session(sid).model == f"scripted:{other}"
        events = store.events(sid)
        update = next(e for e in events if e.event.type == "session.updated")
        second_turn = [e for e in events if e.event.type == "turn.started"][1]
        assert update.seq < second_turn.seq
        assert store.receipts(sid)[-1].model == f"scripted:{other}"
    finally:
        store.close()
    # The same values again write nothing.
    wk("run", "--session", sid, "--model", f"scripted:{other}", "three")
    store = open_store(db_url)
    try:
        assert len(store.events(sid, types=["session.updated"])) == 1
    finally:
        store.close()


BAD_MODELS = [
    ("scripted-typo:x.json", "unknown provider"),
    ("scripted:/nonexistent/script.json", "no script file"),
    ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ("openai:gpt-4.1", "OPENAI_API_KEY"),
]


@pytest.mark.parametrize(("model", "needle"), BAD_MODELS)
def test_a_model_that_cannot_be_built_creates_nothing(wk, model, needle):
    done = wk("run", "--model", model, "hi", check=False)
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert nothing_stored(wk)


@pytest.mark.parametrize(("model", "needle"), BAD_MODELS[1:3])
def test_a_bad_model_for_an_existing_session_or_fork_writes_nothing(
    wk, workdir, db_url, model, needle
):
    sid = run_json(wk, "--model", write_script(workdir, HELLO), "one")["session_id"]
    store = open_store(db_url)
    try:
        before = store.high_water(sid)
    finally:
        store.close()
    for extra in ((), ("--fork",)):
        done = wk("run", "--session", sid, *extra, "--model", model, "two", check=False)
        assert done.returncode == 2 and needle in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert [r["id"] for r in sessions(wk)] == [sid]
    store = open_store(db_url)
    try:
        assert store.high_water(sid) == before and store.pending(sid) == []
    finally:
        store.close()


def test_chat_refuses_a_model_that_cannot_be_built(wk):
    done = wk("chat", "--model", "scripted:/nonexistent/script.json", check=False)
    assert done.returncode == 2 and "no script file" in done.stderr
    assert nothing_stored(wk)


def test_a_stored_model_that_can_no_longer_be_built_blocks_the_turn(wk, workdir, db_url):
    script = workdir.parent / "gone.json"
    script.write_text(json.dumps({"rules": HELLO}))
    sid = run_json(wk, "--model", f"scripted:{script}", "one")["session_id"]
    script.unlink()
    wk("send", "--session", sid, "--no-wake", "two")
    done = wk("worker", "--once", "--format", "json", check=False)
    assert done.returncode == 3, done.stderr
    out = json.loads(done.stdout)
    assert out["blocked"] == [sid] and out["failed"] == []
    store = open_store(db_url)
    try:
        turns = store.turns(sid)
        assert [t.status for t in turns] == ["completed", "blocked"]
        assert "no script file" in (turns[-1].error or "")
        assert store.pending(sid) == []
    finally:
        store.close()
    # Nothing is left for a later worker to retry.
    again = wk("worker", "--once", "--format", "json")
    assert json.loads(again.stdout)["drains"] == 0
