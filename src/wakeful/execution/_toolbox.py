"""The tools this process offers a session: built-ins, tools installed packages register
(`wakeful.tools` entry points), tools registered on the runtime, tools of `[tools]` (by import
path) and the tools of `[mcp.servers.NAME]`, at the session's location.

A package offers tools without touching wakeful by declaring entry points whose values are
`Tool`s (made with `wakeful.tools.tool`) or lists of them:

    [project.entry-points."wakeful.tools"]
    shout = "wakeful_echo:shout"

They are read once per process, on the first turn that resolves its tools; one that cannot be
loaded (or takes a built-in's name) is a `UsageError` naming it, as a `[tools]` entry is.

Invariant: a `[tools]` entry that cannot be loaded here raises `UsageError`, so the session is
not driven by this process (its turn ends `blocked`, saying why); an MCP server that cannot
start does not: its instruction source says it is unavailable and its tools are not offered,
and the person is told once per process: a warning on the `wakeful` logger (which `run` and
`chat` print on stderr, as Python's last-resort handler does when no logging is configured).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path

from ..config import Config
from ..errors import UsageError
from ..instructions import Source
from ..runner import (
    Agent,
    McpPool,
    Tool,
    builtin_tools,
    load_tool,
    mcp_tools,
    select_tools,
    selects_prefix,
)
from ..runner.tools import check_tool_name

MCP_SOURCE = "mcp:"  # instruction source keys: `mcp:SERVER`
OFF_TEXT = (
    "MCP server {name} is switched off in this session: do not call its tools (a call answers "
    "an error and is not sent)."
)
log = logging.getLogger("wakeful.mcp")
TOOL_ENTRY_POINTS = "wakeful.tools"
_installed: dict[str, Tool] | None = None


def installed_tools() -> dict[str, Tool]:
    """The tools installed packages register through `wakeful.tools` entry points, by name
    (read once per process)."""
    global _installed
    if _installed is None:
        from importlib.metadata import entry_points

        found: dict[str, Tool] = {}
        for ep in entry_points(group=TOOL_ENTRY_POINTS):
            try:
                value = ep.load()
            except Exception as err:  # a broken package: one line, not a traceback
                raise UsageError(
                    f"tool entry point {ep.name} ({ep.value}) cannot be loaded: "
                    f"{type(err).__name__}: {err}"
                ) from None
            for t in value if isinstance(value, list | tuple) else [value]:
                if not (
                    isinstance(getattr(t, "name", None), str) and callable(getattr(t, "run", None))
                ):
                    raise UsageError(f"tool entry point {ep.name} ({ep.value}) is not a Tool")
                _check_name(t)
                found[t.name] = t
        _installed = found
    return _installed


def _check_name(tool: Tool) -> None:
    check_tool_name(tool.name)
    if tool.name in builtin_tools(delegation=True) or tool.name.startswith("mcp__"):
        raise UsageError(f"tool name {tool.name!r} is taken by a built-in or MCP tool")


class Toolbox:
    """Tools of one process; MCP servers are started on first use and reused until `close`."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self.registered: dict[str, Tool] = {}
        # How many times `register` ran: a runtime keeps what it resolved for an agent
        # (`_setup.Equipment`) until this changes.
        self.generation = 0
        self.mcp = McpPool()
        self._loaded: dict[tuple[str, str, str], Tool] = {}  # (root, name, path) -> tool
        self._warned: set[tuple[Path, str, str]] = set()  # (root, server, error) told once
        for t in tools or ():
            self.register(t)

    def register(self, tool: Tool) -> None:
        """Offer `tool` to sessions this process drives (`UsageError`: a bad or built-in name)."""
        _check_name(tool)
        self.registered[tool.name] = tool
        self.generation += 1

    def configured(self, root: Path, config: Config) -> dict[str, Tool]:
        """The `[tools]` of `config`, loaded once per process (`UsageError` naming the entry
        that cannot be loaded)."""
        out: dict[str, Tool] = {}
        for name, path in config.tools.items():
            key = (str(root), name, path)
            if key not in self._loaded:
                self._loaded[key] = load_tool(name, path, root)
            out[name] = self._loaded[key]
        return out

    def for_agent(
        self,
        agent: Agent,
        root: Path,
        config: Config,
        *,
        delegation: bool,
        off: Collection[str] = (),
    ) -> tuple[Agent, dict[str, Tool], list[Source]]:
        """The agent with its tool list resolved to names, its tools, and the MCP servers'
        instruction sources. Starts the MCP servers the agent may use (blocking: call it off
        the event loop). A server in `off` (switched off in the session, `_mcp_switch.py`) is
        still listed, so the request's tools stay the same, but its source says it is off and
        its tools answer an error without calling it."""
        available: dict[str, Tool] = dict(builtin_tools(delegation=delegation))
        available.update(installed_tools())
        available.update(self.registered)
        available.update(self.configured(root, config))
        sources: list[Source] = []
        for name, server in sorted(config.mcp.servers.items()):
            if not selects_prefix(agent.tools, f"mcp__{name}__"):
                continue
            state = self.mcp.state(name, server, root)
            if state.error is not None and (root, name, state.error) not in self._warned:
                self._warned.add((root, name, state.error))
                log.warning("MCP server %s did not start: %s", name, " ".join(state.error.split()))
            text = OFF_TEXT.format(name=name) if name in off else state.instruction_text()
            sources.append(Source(f"{MCP_SOURCE}{name}", _const(text)))
            for t in mcp_tools(self.mcp, state, server, root, off=name in off):
                available.setdefault(t.name, t)
        tools = select_tools(agent.tools, available)
        return replace(agent, tools=tuple(tools)), tools, sources

    def close(self) -> None:
        """Stop the MCP servers this process started."""
        self.mcp.close()


def _const(text: str) -> Callable[[], str | None]:
    return lambda: text
