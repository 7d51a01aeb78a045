"""A `wakeful run` killed with SIGKILL while an MCP call is in flight (after its `tool.started`
is durable, before its result): the next driver answers the call "may have partially run" and
never sends it again."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.execution.helpers import (
    check_session,
    cli_env,
    finish,
    make_workspace,
    wait_for,
    wakeful,
)
from wakeful.execution._recovery import PARTIAL_RESULT
from wakeful.store import open_store

from .conftest import SERVER, call, script

pytestmark = pytest.mark.slow


def add_server(work: Path, record: Path) -> None:
    command = json.dumps([sys.executable, str(SERVER), "stdio"])
    with (work / "wakeful.toml").open("a") as f:
        f.write(f"[mcp.servers.calc]\ncommand = {command}\n")
        f.write(f"env = {{ MCP_RECORD = {json.dumps(str(record))} }}\n")


def test_sigkill_of_the_driver_mid_call_is_not_replayed(tmp_path: Path) -> None:
    work = make_workspace(tmp_path)
    record = tmp_path / "record.txt"
    add_server(work, record)
    db = str(tmp_path / "sessions.db")
    env = cli_env(db, tmp_path)
    model = script(tmp_path / "s.json", [call("mcp__calc__block", text="once"), {"text": "ok"}])
    proc = wakeful(["run", "--model", model, "block once"], env, work)
    server_pid = 0
    try:
        wait_for(lambda: record.exists() and record.read_text() == "once\n", timeout=90)
        proc.send_signal(signal.SIGKILL)
        assert finish(proc)[0] == -signal.SIGKILL
        server_pid = int(Path(f"{record}.pid").read_text())
        store = open_store(db)
        [row] = store.list_sessions().sessions
        [running] = store.tool_calls(row.id)
        assert running.status == "running" and running.name == "mcp__calc__block"
        code, out, err = finish(wakeful(["run", "--session", row.id], env, work), timeout=120)
        assert code == 0, err
        assert record.read_text() == "once\n"  # the call was not sent again
        [result] = [r for m in store.messages(row.id) for r in m.tool_results()]
        assert result.is_error and result.output == PARTIAL_RESULT
        assert [c.status for c in store.tool_calls(row.id)] == ["failed"]
        check_session(store, row.id)
        store.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            finish(proc)
        if server_pid:  # the killed driver's server is still blocked in the call
            with contextlib.suppress(ProcessLookupError):
                os.kill(server_pid, signal.SIGKILL)
