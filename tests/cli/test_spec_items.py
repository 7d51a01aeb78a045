"""Smaller contradictions with the specs (issue 15, item 7), through the real command line."""

from __future__ import annotations

import json
import os

import pytest

from tests.cli.conftest import write_script
from wakeful.store import open_store

HELLO = [{"match": ".", "replies": [{"text": "hello back"}]}]


def run_json(wk, *args: str) -> dict:
    return json.loads(wk("run", "--format", "json", *args).stdout)


def test_interrupt_on_an_idle_session_writes_nothing_and_says_so(wk, workdir, db_url):
    sid = run_json(wk, "--model", write_script(workdir, HELLO), "one")["session_id"]
    store = open_store(db_url)
    try:
        before = store.high_water(sid)
    finally:
        store.close()
    done = wk("interrupt", "--session", sid)
    assert done.returncode == 0
    assert done.stdout.strip().splitlines() == [
        f"session {sid} is idle: nothing to interrupt (nothing written)"
    ]
    store = open_store(db_url)
    try:
        assert store.high_water(sid) == before
        assert not store.events(sid, types=["session.interrupt_requested"])
    finally:
        store.close()


def test_session_show_redacts_instruction_text_unless_show_sensitive(wk, workdir):
    model = write_script(workdir, HELLO)
    (workdir / "AGENTS.md").write_text("first rules\n")
    sid = run_json(wk, "--model", model, "one")["session_id"]
    (workdir / "AGENTS.md").write_text("the secret rule: always answer in French\n")
    run_json(wk, "--session", sid, "two")  # the change lands as a system message
    for fmt in ("text", "json"):
        shown = wk("session", "show", sid, "--format", fmt)
        assert "secret rule" not in shown.stdout and "[redacted: --show-sensitive]" in shown.stdout
        full = wk("session", "show", sid, "--format", fmt, "--show-sensitive")
        assert "secret rule" in full.stdout and "sensitive" in full.stderr


def test_the_instruction_delta_is_admitted_before_the_input_it_precedes(wk, workdir, db_url):
    """003: instruction deltas are admitted before input delivery, so the input sees them."""
    model = write_script(workdir, HELLO)
    (workdir / "AGENTS.md").write_text("first rules\n")
    sid = run_json(wk, "--model", model, "one")["session_id"]
    (workdir / "AGENTS.md").write_text("second rules\n")
    run_json(wk, "--session", sid, "two")
    store = open_store(db_url)
    try:
        events = [e.event for e in store.events(sid)]
        messages = store.messages(sid)
    finally:
        store.close()
    kinds = [e.type for e in events if e.type in ("instructions.updated", "inbox.delivered")]
    assert kinds == ["instructions.updated", "inbox.delivered"] * 2
    assert [m.role for m in messages] == ["user", "assistant", "system", "user", "assistant"]


@pytest.mark.parametrize("how", ["directory", "dangling-link", "fifo"])
def test_an_unreadable_instruction_source_blocks_the_first_delta(wk, workdir, db_url, how):
    """As root, chmod 000 reads anyway: a directory, a dangling link and a FIFO cannot be."""
    agents = workdir / "AGENTS.md"
    if how == "directory":
        agents.mkdir()
    elif how == "dangling-link":
        agents.symlink_to(workdir / "missing.md")
    else:
        os.mkfifo(agents)  # reading it would block: it must not be opened at all
    done = wk(
        "run",
        "--format",
        "json",
        "--model",
        write_script(workdir, HELLO),
        "one",
        check=False,
        timeout=30,
    )
    out = json.loads(done.stdout)
    assert done.returncode == 3 and out["outcome"] == "blocked"
    assert "instruction source AGENTS.md cannot be read" in out["error"]
    store = open_store(db_url)
    try:
        sid = out["session_id"]
        assert not store.events(sid, types=["instructions.updated"])  # nothing left out silently
        assert store.receipts(sid) == []  # no request without its instructions
        assert [t.status for t in store.turns(sid)] == ["blocked"]
    finally:
        store.close()
