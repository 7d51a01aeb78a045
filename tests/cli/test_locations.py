"""Sessions run at their own location, whichever process drives them (real subprocesses, both
backends): `run`, `send`, `worker` from another directory, `worker --location`, `--continue`
after a fork, `session move`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import write_script
from wakeful.events import location_id
from wakeful.store import SqlStore, open_store

NOTE = [
    {
        "match": "make note",
        "replies": [
            {
                "tool_calls": [
                    {"name": "write_file", "input": {"path": "note.txt", "content": "hi"}}
                ]
            },
            {"text": "noted"},
        ],
    },
    {"match": ".", "replies": [{"text": "hello"}]},
]


def workspace(root: Path, name: str, agents: str | None) -> Path:
    path = (root / name).resolve()
    path.mkdir()
    (path / ".git").mkdir()  # stop config discovery here
    if agents is not None:
        (path / "AGENTS.md").write_text(agents)
    return path


class Wakeful:
    """`python -m wakeful` run from any directory, with the test's store and home."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(self, cwd: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "wakeful", *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert done.returncode == code, (
            f"wakeful {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
        return done

    def json(self, cwd: Path, *args: str) -> dict:  # type: ignore[type-arg]
        return json.loads(self(cwd, *args, "--format", "json").stdout)  # type: ignore[no-any-return]


@pytest.fixture
def wkf(cli_env: dict[str, str]) -> Wakeful:
    return Wakeful(cli_env)


def agents_md_in_receipts(store: SqlStore, sid: str) -> set[str]:
    """The AGENTS.md texts the session's prompts rendered (from the receipts' blobs)."""
    texts: set[str] = set()
    for receipt in store.receipts(sid):
        for section, _source, digest in receipt.sections:
            if section == "system.instructions.AGENTS.md":
                texts.add(store.get_blob(digest).decode())
    return texts


def test_one_worker_from_elsewhere_drives_each_session_at_its_location(
    wkf: Wakeful, tmp_path: Path, db_url: str
):
    a = workspace(tmp_path, "a", "Rules of A.")
    b = workspace(tmp_path, "b", "Rules of B.")
    elsewhere = workspace(tmp_path, "elsewhere", "Rules of elsewhere.")
    model = write_script(tmp_path / "x", NOTE)
    made = {}
    for where in (a, b):
        out = wkf.json(where, "run", "--model", model, "greet")
        made[where] = out["session_id"]
        wkf(elsewhere, "send", "--session", out["session_id"], "--no-wake", "make note")
    assert not (a / "note.txt").exists() and not (b / "note.txt").exists()
    stats = wkf.json(elsewhere, "worker", "--once")
    assert stats["turns"] == 2 and stats["failed"] == []
    assert (a / "note.txt").read_text() == "hi" and (b / "note.txt").read_text() == "hi"
    assert not (elsewhere / "note.txt").exists()
    store = open_store(db_url)
    try:
        assert agents_md_in_receipts(store, made[a]) == {"Rules of A."}
        assert agents_md_in_receipts(store, made[b]) == {"Rules of B."}
    finally:
        store.close()
    row = wkf.json(elsewhere, "session", "show", made[b])
    assert row["location"] == str(b) and row["location_id"] == location_id(str(b))


def test_a_worker_serves_only_its_locations_and_the_others_say_why(wkf: Wakeful, tmp_path: Path):
    a = workspace(tmp_path, "a", "Rules of A.")
    b = workspace(tmp_path, "b", "Rules of B.")
    elsewhere = workspace(tmp_path, "elsewhere", None)
    model = write_script(tmp_path / "x", NOTE)
    sid = {w: wkf.json(w, "run", "--model", model, "greet")["session_id"] for w in (a, b)}
    for where in (a, b):
        wkf(elsewhere, "send", "--session", sid[where], "--no-wake", "make note")
    stats = wkf.json(elsewhere, "worker", "--once", "--location", str(a))
    assert stats["turns"] == 1 and stats["waiting"] == {sid[b]: str(b)}
    assert (a / "note.txt").exists() and not (b / "note.txt").exists()
    shown = wkf.json(elsewhere, "session", "show", sid[b])
    assert shown["pending"] and shown["waiting_for"] == str(b)
    text = wkf(elsewhere, "session", "show", sid[b]).stdout
    assert f"waiting for its location {b}" in text
    listed = wkf(elsewhere, "session", "list").stdout
    assert f"[waiting for its location {b}]" in listed
    # A worker serving every location present here takes it; the note goes.
    assert wkf.json(elsewhere, "worker", "--once")["turns"] == 1
    assert (b / "note.txt").exists()
    shown = wkf.json(elsewhere, "session", "show", sid[b])
    assert shown["waiting_for"] is None and shown["pending"] == []
    wkf(elsewhere, "worker", "--once", "--location", str(tmp_path / "missing"), code=2)


def test_a_session_whose_location_is_gone_waits_and_run_refuses_it(wkf: Wakeful, tmp_path: Path):
    a = workspace(tmp_path, "a", None)
    gone = workspace(tmp_path, "gone", None)
    model = write_script(tmp_path / "x", NOTE)
    sid = wkf.json(gone, "run", "--model", model, "greet")["session_id"]
    (gone / ".git").rmdir()
    gone.rmdir()
    sent = wkf(a, "send", "--session", sid, "make note")
    assert f"lives at {gone}, which is not a directory on this host" in sent.stderr
    stats = wkf.json(a, "worker", "--once")
    assert stats["turns"] == 0 and stats["failed"] == [] and stats["waiting"] == {sid: str(gone)}
    done = wkf(a, "run", "--session", sid, "more", code=2)
    assert "not a directory on this host" in done.stderr and "Traceback" not in done.stderr
    shown = wkf.json(a, "session", "show", sid)
    assert len(shown["pending"]) == 1 and not (a / "note.txt").exists()
    chat = subprocess.run(
        [sys.executable, "-m", "wakeful", "chat"],
        cwd=a,
        env=wkf.env,
        input=f"/resume {sid}\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"lives at {gone}, which is not a directory on this host" in chat.stdout + chat.stderr


def test_continue_right_after_a_fork_takes_the_fork(wkf: Wakeful, tmp_path: Path):
    a = workspace(tmp_path, "a", None)
    model = write_script(tmp_path / "x", NOTE)
    first = wkf.json(a, "run", "--model", model, "one")["session_id"]
    fork = wkf.json(a, "run", "--model", model, "--session", first, "--fork", "two")["session_id"]
    again = wkf.json(a, "run", "--model", model, "--continue", "three")["session_id"]
    assert again == fork != first
    listed = wkf(a, "session", "list").stdout
    assert f"fork of {first[:12]}" in listed


def test_move_rebinds_tools_and_instructions_at_an_idle_boundary(
    wkf: Wakeful, tmp_path: Path, db_url: str
):
    a = workspace(tmp_path, "a", "Rules of A.")
    b = workspace(tmp_path, "b", "Rules of B.")
    elsewhere = workspace(tmp_path, "elsewhere", None)
    model = write_script(tmp_path / "x", NOTE)
    sid = wkf.json(a, "run", "--model", model, "greet")["session_id"]
    before = wkf.json(elsewhere, "session", "show", sid)["last_seq"]
    done = wkf(elsewhere, "session", "move", sid, str(tmp_path / "missing"), code=2)
    assert done.stderr.count("\n") == 1 and "not a directory" in done.stderr
    assert wkf.json(elsewhere, "session", "show", sid)["last_seq"] == before  # nothing stored
    out = wkf.json(elsewhere, "session", "move", sid, "../b")  # relative to the caller
    assert out["location"] == str(b)
    shown = wkf.json(elsewhere, "session", "show", sid)
    assert shown["location"] == str(b) and shown["pending"] == []
    system = [m for m in shown["messages"] if m["role"] == "system"]
    assert f"moved from {a} to {b}" in system[0]["blocks"][0]["text"]  # a record: never redacted
    assert "Rules of B." not in system[1]["blocks"][0]["text"]  # instruction text is redacted
    shown = wkf.json(elsewhere, "session", "show", sid, "--show-sensitive")
    system = [m for m in shown["messages"] if m["role"] == "system"]
    assert "Rules of B." in system[1]["blocks"][0]["text"]  # the instruction delta
    assert (
        wkf.json(elsewhere, "run", "--model", model, "--session", sid, "make note")["outcome"]
        == "completed"
    )
    assert (b / "note.txt").read_text() == "hi" and not (a / "note.txt").exists()
    store = open_store(db_url)
    try:
        receipt = store.receipts(sid)[-1]
        texts = {m.id: m.text() for m in store.messages(sid)}
        sent = "\n".join(texts.get(mid, "") for mid in receipt.message_ids)
        assert "Rules of B." in sent and f"moved from {a} to {b}" in sent
        kinds = [e.event.type for e in store.events(sid)]
        moved = kinds.index("session.moved")
        assert kinds[moved - 1 : moved + 2] == ["inbox.delivered", "session.moved", "message.added"]
        assert "instructions.updated" in kinds[moved + 2 :]
    finally:
        store.close()
    # The move is chronological: after the greeting, before the note.
    roles = [m["role"] for m in wkf.json(elsewhere, "session", "show", sid)["messages"]]
    assert roles[:5] == ["user", "assistant", "system", "system", "user"]


def test_continue_and_children_are_exact_among_3000_sessions(
    wkf: Wakeful, tmp_path: Path, db_url: str
):
    places = [workspace(tmp_path, name, None) for name in ("a", "b", "c")]
    model = write_script(tmp_path / "x", NOTE)
    store = open_store(db_url)
    try:
        oldest = store.create_session(title="oldest", location=str(places[0])).id
        kids = []
        for i in range(3):  # oldest first: each a millisecond apart (equal times order by id)
            kids.append(store.create_session(parent_id=oldest, title=f"kid {i}").id)
            time.sleep(0.003)
        newest: dict[Path, str] = {}
        for place in places:  # a's sessions are all older than the 2,000 of b and c
            for _ in range(999):
                store.create_session(location=str(place))
            time.sleep(0.003)  # the newest by its time, not by a random id among equal times
            newest[place] = store.create_session(location=str(place)).id
    finally:
        store.close()
    for place in places:
        out = wkf.json(place, "run", "--model", model, "--continue", "again")
        assert out["session_id"] == newest[place]
    shown = wkf.json(places[1], "session", "show", oldest)
    assert shown["children"] == kids
    assert all(
        wkf.json(places[2], "session", "show", k)["location"] == str(places[0]) for k in kids[:1]
    )


def test_import_takes_the_importing_workspace_or_location(wkf: Wakeful, tmp_path: Path):
    a = workspace(tmp_path, "a", None)
    b = workspace(tmp_path, "b", None)
    model = write_script(tmp_path / "x", NOTE)
    sid = wkf.json(a, "run", "--model", model, "greet")["session_id"]
    export = tmp_path / "export.jsonl"
    wkf(a, "session", "export", sid, "-o", str(export))
    here = wkf.json(b, "session", "import", str(export))["id"]
    there = wkf.json(b, "session", "import", str(export), "--location", "../a")["id"]
    assert wkf.json(b, "session", "show", here)["location"] == str(b)
    assert wkf.json(b, "session", "show", there)["location"] == str(a)
    assert wkf.json(b, "run", "--model", model, "--continue", "again")["session_id"] == here
    done = wkf(b, "session", "import", str(export), "--location", "../nope", code=2)
    assert "no such directory" in done.stderr


def test_a_worker_that_does_not_serve_the_destination_leaves_a_moved_session_waiting(
    wkf: Wakeful, tmp_path: Path
):
    a = workspace(tmp_path, "a", "Rules of A.")
    b = workspace(tmp_path, "b", "Rules of B.")
    model = write_script(tmp_path / "x", NOTE)
    sid = wkf.json(a, "run", "--model", model, "greet")["session_id"]
    wkf(a, "session", "move", sid, str(b), "--no-wake")
    wkf(a, "send", "--session", sid, "--no-wake", "make note")
    stats = wkf.json(a, "worker", "--once", "--location", str(a))
    assert stats["turns"] == 0 and stats["waiting"] == {sid: str(b)}
    shown = wkf.json(a, "session", "show", sid)
    assert shown["location"] == str(b) and shown["waiting_for"] == str(b)
    assert len(shown["pending"]) == 1 and not (a / "note.txt").exists()
    assert wkf.json(a, "worker", "--once", "--location", str(b))["turns"] == 1
    assert (b / "note.txt").exists() and not (a / "note.txt").exists()


def test_each_sessions_workspace_config_sets_its_permissions(wkf: Wakeful, tmp_path: Path):
    a = workspace(tmp_path, "a", None)
    b = workspace(tmp_path, "b", None)
    (b / "wakeful.toml").write_text('[permissions]\nwrite_file = "deny"\n')
    elsewhere = workspace(tmp_path, "elsewhere", None)
    model = write_script(tmp_path / "x", NOTE)
    sid = {w: wkf.json(w, "run", "--model", model, "greet")["session_id"] for w in (a, b)}
    for where in (a, b):
        wkf(elsewhere, "send", "--session", sid[where], "--no-wake", "make note")
    assert wkf.json(elsewhere, "worker", "--once")["turns"] == 2
    assert (a / "note.txt").exists() and not (b / "note.txt").exists()  # denied in b
    # Moved to a, the session's writes are allowed again (permissions re-evaluated).
    wkf(elsewhere, "session", "move", sid[b], str(a))
    (a / "note.txt").unlink()
    wkf(elsewhere, "send", "--session", sid[b], "make note again")
    assert (a / "note.txt").exists()
