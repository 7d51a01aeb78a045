"""Shared pieces of the fault tests: processes that hold locks, PostgreSQL connection control,
checks that a process's output holds no traceback.

The real-process helpers and the after-the-fact invariant checks come from the execution tests
(`tests/execution/helpers.py`), so both suites check the same invariants.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from tests.pg import ADMIN_URL
from wakeful.store._postgres import WORK_CHANNEL

HOLD_LOCK = str(Path(__file__).with_name("scripts") / "hold_lock.py")


def hold_lock(db: str, seconds: float, workspace: Path | None = None) -> subprocess.Popen[str]:
    """Start a process holding the store's write lock (see `scripts/hold_lock.py`); return
    once it holds it."""
    args = [sys.executable, HOLD_LOCK, db, str(seconds), *([str(workspace)] if workspace else [])]
    proc = subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "held", (line, proc.stderr.read() if proc.stderr else "")
    return proc


def backends(url: str, query: str | None = None) -> list[int]:
    """Server pids of the database's connections (not this admin one), optionally only those
    whose last query is `query`."""
    name = url.rsplit("/", 1)[1]
    sql = "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
    params: list[str] = [name]
    if query is not None:
        sql += " AND query = %s"
        params.append(query)
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        return [int(r[0]) for r in admin.execute(sql, params)]


def terminate(url: str) -> int:
    """End every connection to the database (`pg_terminate_backend`); return how many."""
    pids = backends(url)
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    return len(pids)


def listening(url: str) -> bool:
    """Whether some connection of the database is LISTENing where a worker waits (the
    admissions' channel)."""
    return bool(backends(url, f"LISTEN {WORK_CHANNEL}"))


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A real filesystem of `size` (e.g. `1m`) mounted at `path` for the block: a disk that
    fills up, or one remounted read-only (`remount(path, "ro")`). Mounting needs root: without
    it the test is skipped, saying so, and fails under CI=true (where it must run)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        reason = f"cannot mount a tmpfs (needs root): {done.stderr.strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def remount(path: Path, mode: str) -> None:
    """Remount the tmpfs at `path` read-only (`ro`) or read-write (`rw`)."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True)


@contextmanager
def lockable_dir(path: Path) -> Iterator[Callable[[bool], None]]:
    """A directory that can be made read-only and back; yields the switch. As root (who may
    write whatever the file modes say) it is a tmpfs remounted read-only; otherwise the modes
    of the directory and its files are taken away."""
    if os.geteuid() == 0:
        with tmpfs(path, "8m"):
            yield lambda ro: remount(path, "ro" if ro else "rw")
        return
    path.mkdir(parents=True, exist_ok=True)

    def switch(ro: bool) -> None:
        for item in [path, *path.iterdir()]:
            writable = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
            mode = item.stat().st_mode
            item.chmod(mode & ~writable if ro else mode | stat.S_IWUSR)

    try:
        yield switch
    finally:
        switch(False)


def fill(path: Path, leave_bytes: int) -> Path:
    """Fill the filesystem holding `path` until `leave_bytes` are free; return the filler."""
    filler = path / "filler"
    fs = os.statvfs(path)
    filler.write_bytes(b"\0" * max(fs.f_bavail * fs.f_frsize - leave_bytes, 0))
    return filler


def assert_clean(output: str) -> None:
    """No traceback and no unretrieved task exception in a process's output."""
    assert "Traceback" not in output, output
    assert "never retrieved" not in output, output
