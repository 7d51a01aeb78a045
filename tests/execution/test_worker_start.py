"""SIGTERM sent to a `wakeful worker` as it starts (importing, opening its store, before its
handler is in place) stops it as it stops a running one: exit 0, its figures printed. The
command line holds SIGTERM from the start of `main` until the worker's handler takes it
(`wakeful.cli._sigterm`); another command killed as it starts still dies of the signal. A
transient store fault while the worker opens its store (another writer's lock past the busy
timeout) is waited out as a running worker waits one out, and SIGTERM still stops it.

Real subprocesses; the signal is sent once the process shows SIGTERM blocked and not yet caught
(`/proc/PID/status`), i.e. inside the command line's start-up."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .helpers import cli_env, create_session, finish, make_workspace, wakeful, write_script

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the signal masks in /proc (Linux)"
)

TERM = 1 << (signal.SIGTERM - 1)
FIXTURES = Path(__file__).parent.parent / "fixtures"


def _masks(pid: int) -> dict[str, int]:
    """The process's signal masks (blocked, caught, ...) from `/proc/PID/status`."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"):
            out[name] = int(value.strip(), 16)
    return out


def _term_while_starting(proc: subprocess.Popen[str], *, may_end: bool = False) -> bool:
    """Send SIGTERM once the process holds it and has no handler for it yet (its start-up);
    whether it was sent. With `may_end`, a process that ended before it was seen holding the
    signal (a short command on a loaded machine) returns False instead of failing."""
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None and may_end:
            return False
        assert proc.poll() is None, finish(proc)
        try:
            masks = _masks(proc.pid)
        except (FileNotFoundError, ProcessLookupError):  # (it ended meanwhile)
            continue
        if masks["SigBlk"] & TERM and not masks["SigCgt"] & TERM:  # held, no handler yet
            proc.send_signal(signal.SIGTERM)
            return True
        assert time.monotonic() < deadline, "the process never held SIGTERM"
        time.sleep(0.001)


def test_a_worker_killed_as_it_starts_stops_cleanly(db_url: str, tmp_path: Path) -> None:
    work = make_workspace(tmp_path)
    model = write_script(tmp_path / "script.json", [{"match": ".", "replies": [{"text": "ok"}]}])
    from wakeful.store import open_store

    store = open_store(db_url)
    create_session(store, "ses_start", model, ["one job"], workspace=work)
    store.close()
    proc = wakeful(["worker", "--format", "json"], cli_env(db_url, tmp_path), work)
    _term_while_starting(proc)
    code, out, err = finish(proc, timeout=120)
    assert code == 0, (code, out, err)  # as a running worker's SIGTERM: not -15
    stats = json.loads(out)
    assert stats["failed"] == [] and stats["claims_lost"] == 0, stats


def test_another_command_killed_as_it_starts_still_ends(tmp_path: Path) -> None:
    """`session list` is short: on a loaded machine it may end before it is seen holding
    SIGTERM (CI: exit 2, "no store"). Such a run proves nothing and is started again; the first
    run signalled in its start-up must die of the signal."""
    db = str(tmp_path / "s.db")
    for _ in range(20):
        proc = wakeful(["session", "list"], cli_env(db, tmp_path), tmp_path)
        if _term_while_starting(proc, may_end=True):
            break
        finish(proc)
    else:
        pytest.fail("20 runs of `session list` ended before they were seen holding SIGTERM")
    code, out, err = finish(proc, timeout=120)
    assert code == -signal.SIGTERM, (code, out, err)


def _locked_store(tmp_path: Path) -> tuple[str, Path]:
    """A SQLite store that opening must write to (a file of migration 33, upgraded in place),
    and a workspace whose writers give up on another writer's lock after 300 ms."""
    db = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema_v33.db", db)
    work = make_workspace(tmp_path)
    with (work / "wakeful.toml").open("a") as toml:
        toml.write("[store]\nbusy_timeout_ms = 300\n")
    return str(db), work


def test_a_worker_waits_out_a_store_locked_as_it_opens(tmp_path: Path) -> None:
    db, work = _locked_store(tmp_path)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer, past the busy timeout
    try:
        proc = wakeful(["worker", "--once"], cli_env(db, tmp_path), work)
        time.sleep(3)
        assert proc.poll() is None, finish(proc)  # before: exit 2, "database ... is busy"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    code, _out, err = finish(proc, timeout=120)
    assert code == 0, err
    assert "waiting it out" in err and "store works again opening the store" in err, err


def test_a_worker_waiting_for_its_store_stops_on_sigterm(tmp_path: Path) -> None:
    db, work = _locked_store(tmp_path)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with (tmp_path / "err.txt").open("w") as err_file:
            proc = wakeful(
                ["worker"], cli_env(db, tmp_path), work, stdout=subprocess.DEVNULL, stderr=err_file
            )
            deadline = time.monotonic() + 60
            while "waiting it out" not in (tmp_path / "err.txt").read_text():
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 0, (tmp_path / "err.txt").read_text()
