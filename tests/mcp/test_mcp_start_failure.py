"""An MCP server that exits at start: its reason carries the tail of its stderr."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wakeful.config import McpServerConfig
from wakeful.runner.tools._mcp import McpPool

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
