"""MCP servers switched on and off in one session (issue 37 item 30; the chat's `/mcp`).

A switch is durable: the session's extension state under the namespace `mcp`, key the server's
name, value `false` for off (no value: on, as configured), so it holds wherever and whenever
the session runs next, and `extension_state_set` hooks see it. It applies from the session's
next context (its next drain; a running turn finishes as it began). A server switched off
stays in the request: its tools are listed byte for byte as before, so the provider's cached
prefix (tools, system, history) holds, and its instruction source `mcp:NAME` says it is off,
which reaches the model as a chronological note after the history; a call of one of its tools
answers an error and is never sent to the server (`Toolbox.for_agent`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from ..store import SWITCH_NAMESPACE

MCP_NAMESPACE = SWITCH_NAMESPACE  # the store reads it with a session's facts


def switched_off(state: Mapping[str, JsonValue]) -> frozenset[str]:
    """The servers a session's `mcp` extension state switches off."""
    return frozenset(name for name, value in state.items() if value is False)
