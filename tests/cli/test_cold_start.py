"""The cheap commands (`--version`, `session list`, `session show`, `log`) start without loading
what only other commands need: the provider SDKs, prompt_toolkit, the server, MCP, llama.cpp
(issue 25; `bench/bench_cold_start.py` measures the time)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Wk
from wakeful.events import MessageAdded
from wakeful.messages import assistant, user
from wakeful.store import open_store

# Top-level packages none of the cheap commands may import.
HEAVY = ("anthropic", "openai", "prompt_toolkit", "fastapi", "uvicorn", "starlette", "mcp",
         "llama_cpp", "httpx")  # fmt: skip


def imported(stderr: str) -> set[str]:
    """Top-level package names in a `-X importtime` report."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.fixture
def session_id(db_url: str) -> str:
    store = open_store(db_url)
    try:
        row = store.create_session(title="cold")
        store.append(
            row.id, [MessageAdded(message=user("hi")), MessageAdded(message=assistant("yo"))]
        )
        return row.id
    finally:
        store.close()


def test_cheap_commands_load_no_sdk_ui_or_server(
    wk: Wk, session_id: str, cli_env: dict[str, str], workdir: Path
) -> None:
    commands = [["--version"], ["session", "list"], ["session", "show", session_id],
                ["log", "--session", session_id]]  # fmt: skip
    for args in commands:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "wakeful", *args], cwd=workdir,
            env=cli_env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        names = imported(done.stderr)
        assert "wakeful" in names  # the report is real: it lists our own package
        assert not names & set(HEAVY), (args, sorted(names & set(HEAVY)))
    assert "0.1.0" in wk("--version").stdout
    assert "cold" in wk("session", "list").stdout


def test_other_commands_still_load_what_they_need(wk: Wk) -> None:
    # `--help` lists every command, so each lazily registered command still resolves.
    out = wk("--help").stdout
    for name in ("approve", "chat", "compact", "config", "debug", "interrupt", "log", "run",
                 "schedule", "send", "serve", "session", "worker"):  # fmt: skip
        assert f"  {name} " in out
    assert "search" in wk("session", "--help").stdout
    assert "Usage" in wk("chat", "--help").stdout
