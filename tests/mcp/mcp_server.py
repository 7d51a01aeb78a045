"""A real MCP server for the tests, written with the official SDK (`MCPServer`).

Run as `python mcp_server.py stdio` or `python mcp_server.py http PORT`. Its tools:
`add` (a + b), `pid` (its process id), `record` (appends a line to the file `$MCP_RECORD`, so a test can count how
many times a call really ran), `crash` (the server exits mid-call), `block` (records, then waits
forever: a call a test kills the driver in), `big` (`size` bytes of numbered lines: a result over
the cap on tool results). `$MCP_INSTRUCTIONS` sets the server instructions;
`$MCP_EXTRA_TOOL` adds a tool named by it (a changed tool list).
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer(
    "test-server", instructions=os.environ.get("MCP_INSTRUCTIONS", "Use add to add numbers.")
)


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def _record(text: str) -> None:
    with open(os.environ["MCP_RECORD"], "a", encoding="utf-8") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())


@server.tool()
def record(text: str) -> str:
    """Append a line to the record file."""
    _record(text)
    return f"recorded {text}"


@server.tool()
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


@server.tool()
def block(text: str) -> str:
    """Record the line (and this server's pid in `$MCP_RECORD.pid`), then never answer."""
    with open(os.environ["MCP_RECORD"] + ".pid", "w", encoding="utf-8") as f:
        f.write(str(os.getpid()))
    _record(text)
    time.sleep(3600)
    return "unreachable"


@server.tool()
def big(size: int) -> str:
    """`size` bytes of numbered lines."""
    return numbered(size)


def numbered(size: int) -> str:
    """`size` bytes of lines `line N` padded to 32 bytes (the tests rebuild it to compare)."""
    lines = "".join(f"line {i:<26}\n" for i in range(size // 32 + 1))
    return lines[:size]


if os.environ.get("MCP_EXTRA_TOOL"):

    @server.tool(name=os.environ["MCP_EXTRA_TOOL"])
    def extra() -> str:
        """An extra tool."""
        return "extra"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
