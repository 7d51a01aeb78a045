"""Issue 16, item 5: a FIFO in the workspace hangs no tool, and an interrupt leaves no process.

A real `wakeful run` drives scripted tool calls: `grep` over a workspace holding a FIFO ends
(the FIFO is skipped, `read_file` refuses it at once), and SIGINT during a `shell` call kills
the command's `setsid` child too, not only its process group, and the run exits 130; a second
SIGINT while the first one's turn cannot end exits 130 at once, without a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.execution.helpers import (
    check_session,
    cli_env,
    create_session,
    finish,
    make_workspace,
    wait_for,
    wakeful,
    write_script,
)
from wakeful.runner.tools import ToolContext
from wakeful.runner.tools._shell import Shell, ShellInput
from wakeful.store import open_store

from .helpers import assert_clean, hold_lock

SID = "ses_tools"


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie is dead: it only waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def run_session(tmp_path: Path, work: Path, rule: dict[str, object]) -> subprocess.Popen[str]:
    """Create the session with one prompt answered by `rule` and start `wakeful run` on it."""
    db = str(tmp_path / "sessions.db")
    store = open_store(db)
    create_session(
        store, SID, write_script(tmp_path / "script.json", [rule]), ["go"], workspace=work
    )
    store.close()
    return wakeful(["run", "--session", SID, "--format", "json"], cli_env(db, tmp_path), work)


def test_grep_and_read_file_do_not_hang_on_a_fifo(tmp_path: Path):
    work = make_workspace(tmp_path)
    (work / "notes.txt").write_text("the needle is here\n")
    os.mkfifo(work / "pipe")
    calls = [
        {"name": "grep", "input": {"pattern": "needle"}},
        {"name": "read_file", "input": {"path": "pipe"}},
        {"name": "grep", "input": {"pattern": "needle", "path": "pipe"}},
    ]
    proc = run_session(
        tmp_path,
        work,
        {
            "match": "go",
            "replies": [
                {"tool_calls": calls},
                {"text": "searched"},
            ],
        },
    )
    try:
        code, _out, err = finish(proc, timeout=60)
    finally:
        if proc.poll() is None:  # (before the fix: blocked reading the FIFO)
            proc.kill()
            proc.communicate()
    assert code == 0, err
    store = open_store(str(tmp_path / "sessions.db"))
    results = [r for m in store.messages(SID) for r in m.tool_results()]
    assert [r.is_error for r in results] == [False, True, True]
    assert "notes.txt:1: the needle is here" in str(results[0].output)
    assert "pipe" not in str(results[0].output)
    assert "pipe is a FIFO (named pipe), not a regular file" in str(results[1].output)
    check_session(store, SID)
    store.close()


def test_an_interrupt_kills_the_setsid_child_of_a_shell_call(tmp_path: Path):
    work = make_workspace(tmp_path)
    command = (
        "setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' > /dev/null 2>&1 & "
        "(sh -c 'echo $$ > orphan.pid; exec sleep 300' &); sleep 300"
    )
    proc = run_session(
        tmp_path,
        work,
        {
            "match": "go",
            "replies": [
                {"tool_calls": [{"name": "shell", "input": {"command": command}}]},
                {"text": "ran"},
            ],
        },
    )
    pids: list[int] = []
    try:
        wait_for(
            lambda: all(
                (work / f).exists() and (work / f).read_text().strip()
                for f in ("daemon.pid", "orphan.pid")
            )
        )
        pids = [int((work / f).read_text()) for f in ("daemon.pid", "orphan.pid")]
        assert all(alive(p) for p in pids)
        proc.send_signal(signal.SIGINT)
        code, _out, err = finish(proc, timeout=30)
        assert code == 130, err
        assert_clean(err)
        wait_for(lambda: not any(alive(p) for p in pids), timeout=5)
    finally:
        for pid in pids:  # (before the fix the `setsid` one survived the interrupt)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    store = open_store(str(tmp_path / "sessions.db"))
    assert [t.status for t in store.turns(SID)] == ["interrupted"]
    check_session(store, SID)
    store.close()


def test_a_second_interrupt_exits_130_without_a_traceback(tmp_path: Path):
    # The first Ctrl-C cancels the call, but its result cannot be saved: another process holds
    # the store's write lock, so `run` keeps waiting (issue 16, item 1). The second one leaves.
    work = make_workspace(tmp_path)
    with (work / "wakeful.toml").open("a") as f:
        f.write("[store]\nbusy_timeout_ms = 200\n")
    proc = run_session(
        tmp_path,
        work,
        {
            "match": "go",
            "replies": [
                {
                    "tool_calls": [
                        {"name": "shell", "input": {"command": "touch started; sleep 300"}}
                    ]
                },
                {"text": "ran"},
            ],
        },
    )
    db = str(tmp_path / "sessions.db")
    locker = None
    try:
        wait_for(lambda: (work / "started").exists())
        locker = hold_lock(db, 300)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert proc.poll() is None, "the first interrupt did not wait for the result to be saved"
        proc.send_signal(signal.SIGINT)
        code, _out, err = finish(proc, timeout=30)
    finally:
        if locker is not None:
            locker.kill()
            locker.communicate()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert code == 130, err
    assert_clean(err)
    # The call is settled by the next drain (the owner died holding the claim).
    done = wakeful(["worker", "--once"], cli_env(db, tmp_path), work)
    assert finish(done, timeout=60)[0] == 0
    store = open_store(db)
    assert [c.status for c in store.tool_calls(SID)] == ["failed"]
    check_session(store, SID)
    store.close()


def test_a_timeout_kills_the_setsid_child_too(tmp_path: Path):
    work = make_workspace(tmp_path)
    command = "setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' > /dev/null 2>&1 & sleep 300"
    shell = {"name": "shell", "input": {"command": command, "timeout_s": 1}}
    proc = run_session(
        tmp_path,
        work,
        {
            "match": "go",
            "replies": [
                {"tool_calls": [shell]},
                {"text": "gave up"},
            ],
        },
    )
    code, _out, err = finish(proc, timeout=60)
    pid = int((work / "daemon.pid").read_text())
    try:
        assert code == 0, err
        wait_for(lambda: not alive(pid), timeout=5)
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


async def test_cancelling_a_shell_call_while_it_starts_leaves_no_process(tmp_path: Path):
    # The shell may run (and start children) before `subprocess_shell` has returned; a cancel
    # in that window used to kill the shell alone. Cancel at 40 moments across the start.
    ctx = ToolContext(workspace=tmp_path, session_id="ses_tools")
    survivors = []
    for step in range(40):
        (tmp_path / "child.pid").unlink(missing_ok=True)
        task = asyncio.ensure_future(
            Shell().run(ShellInput(command="sleep 30 & echo $! > child.pid; wait"), ctx)
        )
        await asyncio.sleep(step * 0.0005)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.1)
        pid_file = tmp_path / "child.pid"
        written = pid_file.read_text().strip() if pid_file.exists() else ""
        if written and alive(int(written)):
            survivors.append(int(written))
            os.kill(int(written), signal.SIGKILL)
    assert survivors == []
