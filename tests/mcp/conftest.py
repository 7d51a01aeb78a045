"""Real MCP servers for the tests (`mcp_server.py`, written with the SDK), stdio and HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER = Path(__file__).with_name("mcp_server.py")


def stdio_server(record: Path, **env: str) -> dict[str, object]:
    """`[mcp.servers.NAME]` of a stdio server that records into `record`."""
    return {
        "command": [sys.executable, str(SERVER), "stdio"],
        "env": {"MCP_RECORD": str(record), **env},
    }


def script(path: Path, replies: list[dict[str, object]], match: str = ".") -> str:
    """A scripted-provider script answering every prompt with `replies`; its model spec."""
    path.write_text(json.dumps({"rules": [{"match": match, "replies": replies}]}))
    return f"scripted:{path}"


def call(name: str, **args: object) -> dict[str, object]:
    """A scripted reply making one tool call."""
    return {"tool_calls": [{"name": name, "input": args}]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A streamable-HTTP MCP server in its own process: (its URL, its record file)."""
    port = _free_port()
    record = tmp_path / "http-record.txt"
    env = {**os.environ, "MCP_RECORD": str(record)}
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise AssertionError("the HTTP MCP server did not start") from None
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp", record
    proc.send_signal(signal.SIGKILL)
    proc.wait()
