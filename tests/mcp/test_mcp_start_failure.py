"""An MCP server that exits at start: its reason carries the tail of its stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.execution.helpers import cli_env, finish, make_workspace, wakeful
from wakeful.config import McpServerConfig
from wakeful.runner.tools._mcp import McpPool

from .conftest import call, script

pytestmark = pytest.mark.slow


def test_a_server_that_exits_at_start_is_described_with_its_stderr(tmp_path: Path) -> None:
    crash = "import sys; sys.stderr.write('notes: missing NOTES_DIR\\n'); sys.exit(3)"
    config = McpServerConfig(command=[sys.executable, "-c", crash], startup_timeout_s=30)
    pool = McpPool()
    try:
        state = pool.state("notes", config, tmp_path)
    finally:
        pool.close()
    assert state.error is not None and "notes: missing NOTES_DIR" in state.error
    assert "MCP server notes is unavailable" in state.instruction_text()


def _crashing_workspace(tmp_path: Path) -> Path:
    work = make_workspace(tmp_path)
    crash = "import sys; sys.stderr.write('notes: missing NOTES_DIR\\n'); sys.exit(3)"
    with (work / "wakeful.toml").open("a") as f:
        f.write(f"[mcp.servers.notes]\ncommand = {json.dumps([sys.executable, '-c', crash])}\n")
        f.write('allowed_tools = ["add_note"]\n')
    return work


@pytest.mark.parametrize("command", ["run", "chat"])
def test_the_person_is_told_once_on_stderr(tmp_path: Path, command: str) -> None:
    work = _crashing_workspace(tmp_path)
    env = cli_env(str(tmp_path / "sessions.db"), tmp_path)
    model = script(tmp_path / "s.json", [call("mcp__notes__add_note", text="x"), {"text": "ok"}])
    if command == "run":
        proc = wakeful(["run", "--model", model, "note this"], env, work)
        code, _out, err = finish(proc, timeout=120)
    else:
        proc = wakeful(["chat", "--model", model], env, work, stdin=subprocess.PIPE)
        out, err = proc.communicate("note this\nand this\n", timeout=120)
        code = proc.returncode
    assert code == 0, err
    told = [line for line in err.splitlines() if "MCP server notes did not start" in line]
    assert len(told) == 1 and "notes: missing NOTES_DIR" in told[0], err
