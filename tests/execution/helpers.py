"""Shared pieces of the execution tests: real `wakeful` processes, scripts, invariant checks.

`check_session` (from `wakeful._checks`, which bench/ shares) is the after-the-fact check of
docs/design.md's invariants on what the store holds; the crash and concurrency suites run it on
every session they touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.allow import allow_writes
from wakeful._checks import (
    LEDGER,
    check_session,
    create_session,
    epochs,
    job_rule,
    job_script,
    kill_after,
    ledger_lines,
    shell,
    twice,
    write_script,
)

WAKEFUL = str(Path(sys.executable).with_name("wakeful"))
SCRIPTS = Path(__file__).with_name("scripts")


def cli_env(db: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a `wakeful` subprocess: its store, a private HOME, no API keys."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("WAKEFUL_CRASH_AT", None)
    env |= {
        "WAKEFUL_DB": db,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local"),
    }
    allow_writes(home / ".config")
    return env | extra


def make_workspace(root: Path, *, lease_ms: int = 30_000, poll_ms: int = 20) -> Path:
    """A workspace with fast retry and polling in its `wakeful.toml` (stops config discovery)."""
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / ".git").mkdir(exist_ok=True)
    (work / "wakeful.toml").write_text(
        "[retry]\ninitial_delay_ms = 40\nmax_delay_ms = 400\npoll_interval_ms = 10\n"
        f"[execution]\nlease_ms = {lease_ms}\npoll_interval_ms = {poll_ms}\n"
    )
    return work


def wakeful(
    args: Sequence[str], env: dict[str, str], cwd: Path, **popen: object
) -> subprocess.Popen[str]:
    """Start the installed `wakeful` command (output piped unless `popen` says otherwise)."""
    pipes: dict[str, object] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return subprocess.Popen(  # type: ignore[call-overload]
        [WAKEFUL, *args], cwd=cwd, env=env, text=True, **{**pipes, **popen}
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    """Wait for a process; return (returncode, stdout, stderr)."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def wait_for(predicate: Callable[[], bool], timeout: float = 30, every: float = 0.02) -> None:
    """Poll observable state until `predicate()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
        time.sleep(every)


__all__ = [
    "LEDGER",
    "check_session",
    "create_session",
    "epochs",
    "job_rule",
    "job_script",
    "kill_after",
    "ledger_lines",
    "shell",
    "twice",
    "write_script",
]
