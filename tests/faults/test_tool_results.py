"""Issue 16, item 1: a tool result that cannot be saved is never lost, nor its call left
`running` for good.

A real `wakeful run` drives a scripted `shell` call that appends a line to a ledger. While the
call's result is being saved, another process holds SQLite's write lock past the busy timeout
(`BEGIN IMMEDIATE` in a real subprocess), or the real filesystem holding the store (a small
tmpfs) is full: the driver keeps its claim and retries until the result is saved, and the turn
completes with the tool run once. A driver killed while it retries, and a call left `running`
by a dead driver whose claim was released, are settled by the next drain of the session.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from tests.execution.helpers import (
    check_session,
    cli_env,
    create_session,
    finish,
    ledger_lines,
    make_workspace,
    wait_for,
    wakeful,
    write_script,
)
from wakeful.events import TurnEnded
from wakeful.execution._recovery import PARTIAL_RESULT
from wakeful.store import SqlStore, fence, open_store

from .helpers import assert_clean, fill, hold_lock, tmpfs

SID = "ses_results"
# The side effect, then a handshake: the test makes the store fail (lock, full disk) and says
# so with `go.flag` before the call returns, so the fault is there when its result is saved.
COMMAND = (
    "echo side.effect >> ledger.txt; touch ran.flag; while [ ! -e go.flag ]; do sleep 0.02; done"
)


def start_run(tmp_path: Path, db: str, **env: str) -> subprocess.Popen[str]:
    """Create the session on the store `db` (a 200 ms busy timeout) and start `wakeful run` on
    it, its environment extended by `env`; the first reply is `COMMAND`, the second the final
    answer."""
    work = make_workspace(tmp_path)
    with (work / "wakeful.toml").open("a") as f:
        f.write("[store]\nbusy_timeout_ms = 200\n")
    model = write_script(
        tmp_path / "script.json",
        [
            {
                "match": "^go$",
                "replies": [
                    {"tool_calls": [{"name": "shell", "input": {"command": COMMAND}}]},
                    {"text": "the ledger has its line"},
                ],
            },
            {"match": "^next$", "replies": [{"text": "next done"}]},
        ],
    )
    store = open_store(db)
    create_session(store, SID, model, ["go"], workspace=work)
    store.close()
    args = ["run", "--session", SID, "--format", "json"]
    return wakeful(args, cli_env(db, tmp_path, **env), work)


def call_status(store: SqlStore) -> list[str]:
    return [c.status for c in store.tool_calls(SID)]


def results(store: SqlStore) -> list[str]:
    return [str(r.output) for m in store.messages(SID) for r in m.tool_results()]


def test_a_result_saved_while_another_process_holds_the_lock_is_retried(tmp_path: Path):
    db = str(tmp_path / "sessions.db")
    run = start_run(tmp_path, db)
    work = tmp_path / "work"
    try:
        wait_for(lambda: (work / "ran.flag").exists())
        locker = hold_lock(db, 2.0)  # ten busy timeouts, exactly while the result is saved
        (work / "go.flag").touch()
        finish(locker, timeout=30)
        code, _out, err = finish(run, timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert code == 0, err
    assert_clean(err)
    assert err.count("store fault saving tool results") == 1, err  # logged once, not per try
    assert "store works again saving tool results" in err
    store = open_store(db)
    assert call_status(store) == ["completed"]
    assert [t.status for t in store.turns(SID)] == ["completed"]
    assert ledger_lines(work) == {"side.effect": 1}
    check_session(store, SID, ledger_lines(work))
    store.close()


def test_a_result_saved_on_a_full_disk_is_retried_until_space_is_freed(tmp_path: Path):
    with tmpfs(tmp_path / "small", "4m") as mount:
        db = str(mount / "sessions.db")
        run = start_run(tmp_path, db)
        work = tmp_path / "work"
        store = open_store(db)
        try:
            wait_for(lambda: (work / "ran.flag").exists())
            filler = fill(mount, 0)
            (work / "go.flag").touch()
            time.sleep(1.5)  # the save fails, again and again, and the driver waits
            assert run.poll() is None, "the driver gave up on a full disk"
            assert call_status(store) == ["running"]
            filler.unlink()
            code, _out, err = finish(run, timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
        assert code == 0, err
        assert_clean(err)
        assert err.count("store fault saving tool results") == 1, err
        assert "the disk is full" in err
        assert call_status(store) == ["completed"]
        assert [t.status for t in store.turns(SID)] == ["completed"]
        assert ledger_lines(work) == {"side.effect": 1}
        check_session(store, SID, ledger_lines(work))
        store.close()


def test_a_driver_killed_while_it_retries_is_settled_by_the_next_drain(tmp_path: Path):
    with tmpfs(tmp_path / "small", "4m") as mount:
        db = str(mount / "sessions.db")
        run = start_run(tmp_path, db)
        work = tmp_path / "work"
        store = open_store(db)
        try:
            wait_for(lambda: (work / "ran.flag").exists())
            filler = fill(mount, 0)
            (work / "go.flag").touch()
            time.sleep(1.5)
            assert run.poll() is None, "the driver gave up on a full disk"
            run.send_signal(signal.SIGKILL)
            run.communicate()
            assert call_status(store) == ["running"]
            filler.unlink()
            env = cli_env(db, tmp_path)
            done = wakeful(["run", "--session", SID, "--format", "json", "next"], env, work)
            code, _out, err = finish(done, timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
        assert code == 0, err
        assert call_status(store) == ["failed"]
        assert results(store) == [PARTIAL_RESULT]
        assert ledger_lines(work) == {"side.effect": 1}  # not replayed
        check_session(store, SID, ledger_lines(work))
        store.close()


def test_a_running_call_whose_claim_was_released_is_settled_by_the_next_drain(tmp_path: Path):
    db = str(tmp_path / "sessions.db")
    work = tmp_path / "work"
    work.mkdir()
    (work / "go.flag").touch()  # no handshake: the driver dies once the side effect ran
    run = start_run(tmp_path, db, WAKEFUL_CRASH_AT="tool.done")
    assert finish(run, timeout=60)[0] == -signal.SIGKILL
    store = open_store(db)
    assert call_status(store) == ["running"]
    # What a driver did before when it could not save the result: it ended the turn `failed`
    # and released the claim, so no takeover was ever due; here it died right after.
    claim = store.current_claim(SID)
    assert claim is not None
    [turn] = store.turns(SID)
    failed = TurnEnded(
        turn_id=turn.turn_id,
        outcome="failed",
        error="database is busy",
        error_kind="StoreBusyError",
    )
    store.append(SID, [failed], fence(claim))
    assert store.claims.release(claim)
    nxt = wakeful(
        ["run", "--session", SID, "--format", "json", "next"], cli_env(db, tmp_path), work
    )
    code, _out, err = finish(nxt, timeout=60)
    assert code == 0, err
    assert call_status(store) == ["failed"]
    assert results(store) == [PARTIAL_RESULT]
    assert [t.status for t in store.turns(SID)] == ["failed", "completed"]
    assert ledger_lines(work) == {"side.effect": 1}  # not replayed
    check_session(store, SID, ledger_lines(work))  # the result sits before the next input
    store.close()
