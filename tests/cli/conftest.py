from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.allow import allow_writes

Wk = Callable[..., subprocess.CompletedProcess[str]]


def _env(db: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {
        "WAKEFUL_DB": db,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local"),
    }
    allow_writes(home / ".config")
    return env


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").mkdir()  # stop config discovery at the workspace
    return work


@pytest.fixture
def cli_env(db_url: str, tmp_path: Path) -> dict[str, str]:
    return _env(db_url, tmp_path)


@pytest.fixture
def wk(cli_env: dict[str, str], workdir: Path) -> Wk:
    """Run `python -m wakeful ARGS` in the workspace; return the completed process."""

    def run(
        *args: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "wakeful", *args],
            cwd=workdir,
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"wakeful {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
            )
        return done

    return run


@pytest.fixture
def spawn(cli_env: dict[str, str], workdir: Path) -> Callable[..., subprocess.Popen[str]]:
    """Start `python -m wakeful ARGS` in the background."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "wakeful", *args],
            cwd=workdir,
            env=cli_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        return proc

    yield start  # type: ignore[misc]
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def write_script(workdir: Path, rules: list[dict], **top: object) -> str:
    path = workdir.parent / "script.json"
    path.write_text(json.dumps({"rules": rules, **top}))
    return f"scripted:{path}"
