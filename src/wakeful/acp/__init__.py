"""wakeful as an Agent Client Protocol (ACP) agent: editors (Zed and others) drive durable
sessions over JSON-RPC on stdio (`wakeful acp`, `docs/acp.md`).

Needs the `acp` extra (the `agent-client-protocol` package). `WakefulAgent` implements the
protocol's agent side over a `Runtime`; `serve_stdio` runs it on this process's stdin/stdout
until the editor closes the connection.
"""

from __future__ import annotations

from ..execution import Runtime
from ._agent import WakefulAgent
from ._drive import OPTIONS

__all__ = ["OPTIONS", "WakefulAgent", "serve_stdio"]


async def serve_stdio(runtime: Runtime) -> None:
    """Serve `runtime` as an ACP agent on stdin/stdout until the editor closes stdin; then
    stop its drains (an unfinished turn recovers wherever the session is driven next) and
    close it."""
    from acp import run_agent

    try:
        await run_agent(WakefulAgent(runtime))
    finally:
        runtime.shut_down()
        await runtime.aclose()
