"""Issue 16, item 9: every result says what happened.

With the real `wakeful` command: `run --session ""` is an error, not a new session; a store on
a read-only filesystem can be listed (and a write says it is read-only); `worker --once` exits
1 when drains failed and input is left; of two concurrent `run`s on one session each reports
the turn that took its prompt; `read_file` names a directory or FIFO for what it is; an empty
store file is refused, and a new store on a full disk leaves no file behind; a damaged claims
page is found before `run` admits anything into the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.execution.helpers import (
    WAKEFUL,
    cli_env,
    create_session,
    finish,
    make_workspace,
    wait_for,
    wakeful,
    write_script,
)
from wakeful.runner.tools import ToolContext
from wakeful.runner.tools._base import ToolFailure
from wakeful.runner.tools._files import ReadFile, ReadFileInput
from wakeful.store import open_store

from .helpers import fill, lockable_dir, tmpfs


def wk(tmp_path: Path, db: str, *args: str) -> subprocess.CompletedProcess[str]:
    work = make_workspace(tmp_path)
    return subprocess.run(
        [WAKEFUL, *args],
        cwd=work,
        env=cli_env(db, tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )


def echo_model(tmp_path: Path, **top: object) -> str:
    rules = [{"match": "(.*)", "replies": [{"text": "you said it"}]}]
    return write_script(tmp_path / "script.json", rules, **top)


def enqueued(db: str) -> int:
    """Admissions in the file, read from the events table alone (no other page is touched)."""
    with sqlite3.connect(db) as conn:
        return int(
            conn.execute("SELECT count(*) FROM events WHERE type = 'inbox.enqueued'").fetchone()[0]
        )


def test_an_empty_session_option_is_an_error(tmp_path: Path):
    db = str(tmp_path / "sessions.db")
    done = wk(tmp_path, db, "run", "--session", "", "--model", echo_model(tmp_path), "hello")
    assert done.returncode == 2 and done.stderr.strip() == "error: --session: must not be empty"
    store = open_store(db)
    assert store.list_sessions().sessions == []
    store.close()


def test_a_read_only_store_is_listed(tmp_path: Path):
    with lockable_dir(tmp_path / "ro") as read_only:
        db = str(tmp_path / "ro" / "sessions.db")
        done = wk(tmp_path, db, "run", "--model", echo_model(tmp_path), "remember this")
        assert done.returncode == 0, done.stderr
        read_only(True)
        try:
            listed = wk(tmp_path, db, "session", "list", "--format", "json")
            assert listed.returncode == 0, listed.stderr
            [row] = json.loads(listed.stdout)
            assert row["title"] == "remember this"
            shown = wk(tmp_path, db, "session", "show", row["id"])
            assert shown.returncode == 0 and "you said it" in shown.stdout
            sent = wk(tmp_path, db, "send", "--session", row["id"], "--no-wake", "more")
            assert sent.returncode == 2
            assert (
                sent.stderr.strip() == f"error: {db} is read-only: this needs to write to the store"
            )
        finally:
            read_only(False)


def test_worker_once_exits_3_when_a_stored_model_cannot_be_built(tmp_path: Path):
    """The session's stored model cannot be built: its turn ends `blocked` with the reason
    (settled once, not retried by every later worker) and `worker --once` says so (exit 3)."""
    db = str(tmp_path / "sessions.db")
    work = make_workspace(tmp_path)
    store = open_store(db)
    create_session(
        store, "ses_broken", f"scripted:{tmp_path / 'missing.json'}", ["hello"], workspace=work
    )
    store.close()
    code, out, err = finish(
        wakeful(["worker", "--once", "--format", "json"], cli_env(db, tmp_path), work)
    )
    assert code == 3, err
    assert json.loads(out)["blocked"] == ["ses_broken"] and json.loads(out)["failed"] == []
    assert "1 sessions had a turn blocked" in err and "ses_broken" in err
    store = open_store(db)
    [turn] = store.turns("ses_broken")
    assert turn.status == "blocked" and "no script file" in (turn.error or "")
    assert store.pending("ses_broken") == []  # settled, not left for every later worker
    store.close()


def test_two_concurrent_runs_each_report_their_own_turn(tmp_path: Path):
    db = str(tmp_path / "sessions.db")
    work = make_workspace(tmp_path)
    # the first turn takes about 2 s
    model = write_script(
        tmp_path / "script.json",
        [
            {"match": "^first", "replies": [{"text": "the first answer, streamed slowly " * 6}]},
            {"match": "^second", "replies": [{"text": "the second answer"}]},
        ],
        chunk_delay_ms=150,
    )
    store = open_store(db)
    store.create_session("ses_two", model=model, metadata={"workspace": str(work)})
    env = cli_env(db, tmp_path)
    first = wakeful(["run", "--session", "ses_two", "--format", "json", "first"], env, work)
    try:
        wait_for(lambda: bool(store.turns("ses_two")))  # the first run holds the session now
        assert first.poll() is None
        second = wakeful(["run", "--session", "ses_two", "--format", "json", "second"], env, work)
        code2, out2, err2 = finish(second)
        code1, out1, err1 = finish(first)
    finally:
        store.close()
    assert (code1, code2) == (0, 0), (err1, err2)
    one, two = json.loads(out1), json.loads(out2)
    # The second prompt steers into the first run's turn (or, had that ended, gets its own):
    # either way each run reports the turn that took its prompt, as the store has it.
    assert one["turn_id"] and two["turn_id"]  # (the second used to report no turn, no text)
    assert two["outcome"] == "completed" and two["text"] == "the second answer"
    store = open_store(db)
    turns = {t.turn_id: t.status for t in store.turns("ses_two")}
    store.close()
    assert turns[one["turn_id"]] == turns[two["turn_id"]] == "completed"


async def test_read_file_names_a_directory_or_fifo_for_what_it_is(tmp_path: Path):
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "pipe")
    ctx = ToolContext(workspace=tmp_path, session_id="ses_tool")
    for path, what in (("folder", "a directory"), ("pipe", "a FIFO (named pipe)")):
        with pytest.raises(ToolFailure) as failure:
            await ReadFile().run(ReadFileInput(path=path), ctx)
        assert str(failure.value) == f"{path} is {what}, not a regular file"


def test_an_empty_store_file_is_refused(tmp_path: Path):
    db = tmp_path / "sessions.db"
    db.touch()
    done = wk(tmp_path, str(db), "session", "list")
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {db} is an empty file, not a wakeful database")
    assert db.stat().st_size == 0  # untouched


def test_a_new_store_on_a_full_disk_leaves_no_file_behind(tmp_path: Path):
    with tmpfs(tmp_path / "small", "1m") as mount:
        db = mount / "sessions.db"
        filler = fill(mount, 64 * 1024)  # a new store takes about 160 KiB
        export = tmp_path / "export.jsonl"
        export.write_text('{"wakeful_export": 1, "session": {"title": "t"}}\n')
        # only a command that writes creates a store (`session list` on no file is an error)
        done = wk(tmp_path, str(db), "session", "import", str(export))
        assert done.returncode == 2
        assert done.stderr.strip() == f"error: cannot create the database at {db}: the disk is full"
        assert sorted(p.name for p in mount.iterdir()) == ["filler"]
        filler.unlink()
        done = wk(tmp_path, str(db), "session", "import", str(export))
        assert done.returncode == 0, done.stderr
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_damaged_claims_page_is_found_before_anything_is_admitted(tmp_path: Path):
    db = str(tmp_path / "sessions.db")
    done = wk(tmp_path, db, "run", "--model", echo_model(tmp_path), "--format", "json", "hello")
    assert done.returncode == 0, done.stderr
    sid = json.loads(done.stdout)["session_id"]
    with sqlite3.connect(db) as conn:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'claims'").fetchone()[
            0
        ]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(db, "r+b") as f:  # garbage over the claims table's page
        f.seek((root - 1) * size)
        f.write(b"\xde\xad\xbe\xef" * (size // 4))
    before = enqueued(db)
    for args in (["run", "--session", sid, "again"], ["send", "--session", sid, "again"]):
        done = wk(tmp_path, db, *args)
        assert done.returncode == 2
        assert done.stderr.startswith(f"error: {db} is damaged (database disk image is malformed)")
    assert enqueued(db) == before
