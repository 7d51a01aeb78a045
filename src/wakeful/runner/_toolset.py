"""Which tools a turn offers: an agent's tool list (names and glob patterns) applied to the
tools this process has (built-ins, registered, `[tools]`, MCP).

Invariant: the offered order is the agent's list order, a pattern expanding in the order of the
available tools, so the `tools` section of a receipt is stable across processes.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

from .tools import Tool


def select_tools(entries: tuple[str, ...], available: Mapping[str, Tool]) -> dict[str, Tool]:
    """The tools of `available` that `entries` (names or glob patterns) select, in order."""
    chosen: dict[str, Tool] = {}
    for entry in entries:
        if entry in available:
            chosen.setdefault(entry, available[entry])
            continue
        for name, tool in available.items():
            if fnmatch.fnmatchcase(name, entry):
                chosen.setdefault(name, tool)
    return chosen


def selects_prefix(entries: tuple[str, ...], prefix: str) -> bool:
    """Whether some entry could select a tool whose name starts with `prefix` (an MCP server's
    tools are `mcp__SERVER__...`): the server need not start when none can."""
    probe = prefix + "x"
    return any(e.startswith(prefix) or fnmatch.fnmatchcase(probe, e) for e in entries)
