"""MCP client tools: servers of `[mcp.servers.NAME]`, started once per process and reused, their
tools offered as `mcp__SERVER__TOOL`.

`McpPool` owns the connections. They live on an event loop of their own, in a daemon thread:
the official SDK's transports are anyio task groups that must be entered and left in one task,
and a connection outlives the drains that use it; the pool's methods are therefore callable from
any thread (a drain builds its context in a worker thread) and `call` from any event loop.

Invariant: nothing here raises into a turn. A server that cannot start, or dies during a call,
is an `is_error` result naming the server and why (with the tail of its stderr), after the
durable retries `ToolUnavailable` allows (`run_tool_call`: a call never sent, or one of a tool
the server annotates idempotent or read-only); the next use starts it again. An MCP call is never read-only: its `tool.started` is committed before it is
sent, so a crash in between ends it "may have partially run", never replayed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fnmatch
import hashlib
import importlib.util
import json
import os
import tempfile
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TextIO, TypeVar

from pydantic import BaseModel, ConfigDict, JsonValue

from ...config import McpServerConfig
from ._base import ToolContext, ToolOutcome, ToolUnavailable

PREFIX = "mcp__"
MAX_NAME = 64
STDERR_TAIL = 2000  # characters of a server's stderr quoted in an error
_T = TypeVar("_T")
MISSING_SDK = "the mcp package is not installed here (pip install 'wakeful[mcp]')"


def tool_name(server: str, remote: str) -> str:
    """The name the model sees for the server's tool `remote` (characters outside
    `[A-Za-z0-9_-]` become `_`; cut to 64)."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in remote)
    return f"{PREFIX}{server}__{safe}"[:MAX_NAME]


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as the server listed it."""

    name: str
    description: str
    schema: dict[str, JsonValue]
    idempotent: bool = False  # its annotations say `idempotentHint` or `readOnlyHint`


@dataclass(frozen=True, slots=True)
class ServerState:
    """What a server offers now: its tools and instructions, or why it is unavailable."""

    name: str
    tools: tuple[RemoteTool, ...] = ()
    instructions: str | None = None
    error: str | None = None

    def instruction_text(self) -> str:
        """The server's instruction source value: its tools and instructions (a change of
        either is recorded as an instruction delta), or why it is unavailable."""
        if self.error is not None:
            return f"MCP server {self.name} is unavailable: {self.error}"
        names = ", ".join(tool_name(self.name, t.name) for t in self.tools) or "none"
        head = f"MCP server {self.name}. Tools: {names}."
        return f"{head}\n\n{self.instructions.strip()}" if self.instructions else head


class McpUnavailableError(Exception):
    """A server could not be started (`sent` false), or its connection ended during a call
    (`sent` true: the call may have partially run)."""

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass(eq=False)
class _Connection:
    name: str
    config: McpServerConfig
    root: Path
    session: Any = None  # mcp.ClientSession once ready
    stderr: TextIO | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Future[None] | None = None  # done once the session is initialized
    task: asyncio.Task[None] | None = None

    def stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self.stderr.flush()
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - STDERR_TAIL * 4))
            tail = self.stderr.read()[-STDERR_TAIL:].strip()
            return f" (stderr: {tail})" if tail else ""
        return ""

    def release(self) -> None:
        """Close the stderr file (the connection is dropped or replaced)."""
        if self.stderr is not None:
            self.stderr.close()


class McpPool:
    """The MCP connections of one process, keyed by workspace root, server name and config."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conns: dict[str, _Connection] = {}
        self._lock = threading.Lock()

    # -- the pool's own loop --------------------------------------------------------------------

    def _start_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="wakeful-mcp", daemon=True
                )
                self._thread.start()
                self._loop = loop
            return self._loop

    def _submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self._start_loop())

    # -- public -----------------------------------------------------------------------------------

    def state(self, name: str, config: McpServerConfig, root: Path) -> ServerState:
        """Start (or reuse) the server and list its tools now; blocks the calling thread, so
        call it off the event loop. Never raises for the server's own failure: the state then
        carries the error."""
        timeout = config.startup_timeout_s + 5
        try:
            return self._submit(self._state(name, config, root)).result(timeout)
        except concurrent.futures.TimeoutError:
            return ServerState(name, error=f"did not answer within {config.startup_timeout_s}s")

    async def call(
        self, name: str, config: McpServerConfig, root: Path, remote: str, args: dict[str, Any]
    ) -> Any:
        """Call the server's tool `remote` (starting the server when it is not running); the
        SDK's `CallToolResult`. Raises `McpUnavailableError` when the server cannot be started
        or its connection ends during the call. Cancelling it cancels the request."""
        future = self._submit(self._call(name, config, root, remote, args))
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop every server and the pool's thread (waits a few seconds at most)."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close_all(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
            if not self._thread.is_alive():
                loop.close()

    # -- on the pool's loop -----------------------------------------------------------------------

    @staticmethod
    def _key(name: str, config: McpServerConfig, root: Path) -> str:
        digest = hashlib.sha256(config.model_dump_json().encode()).hexdigest()[:16]
        return f"{root}\0{name}\0{digest}"

    async def _connection(self, name: str, config: McpServerConfig, root: Path) -> _Connection:
        key = self._key(name, config, root)
        conn = self._conns.get(key)
        if conn is None or conn.closed.is_set():
            if conn is not None:
                conn.release()
            conn = _Connection(name, config, root)
            conn.ready = asyncio.get_running_loop().create_future()
            self._conns[key] = conn
            conn.task = asyncio.ensure_future(_serve(conn, conn.ready))
        assert conn.ready is not None
        try:  # a connection another call is starting is waited for, not used half-open
            await asyncio.wait_for(asyncio.shield(conn.ready), config.startup_timeout_s)
        except TimeoutError:
            conn.closed.set()
            raise McpUnavailableError(
                f"did not start within {config.startup_timeout_s}s{conn.stderr_tail()}"
            ) from None
        except McpUnavailableError:
            conn.closed.set()
            raise
        return conn

    async def _state(self, name: str, config: McpServerConfig, root: Path) -> ServerState:
        if importlib.util.find_spec("mcp") is None:
            return ServerState(name, error=MISSING_SDK)
        for attempt in (1, 2):  # a server that exited since its last use is started again
            try:
                conn = await self._connection(name, config, root)
                listed = await asyncio.wait_for(_list_tools(conn.session), config.startup_timeout_s)
                break
            except McpUnavailableError as err:
                return ServerState(name, error=str(err))
            except Exception as err:  # a listing that failed: the connection is suspect
                self._drop(name, config, root)
                if attempt == 2 or not _connection_ended(err):
                    return ServerState(name, error=f"listing its tools failed: {_describe(err)}")
        allowed = config.allowed_tools
        tools = tuple(
            t
            for t in listed
            if allowed is None or any(fnmatch.fnmatchcase(t.name, p) for p in allowed)
        )
        return ServerState(name, tools, conn.session.instructions)

    async def _call(
        self, name: str, config: McpServerConfig, root: Path, remote: str, args: dict[str, Any]
    ) -> Any:
        conn = await self._connection(name, config, root)
        try:
            return await conn.session.call_tool(
                remote, args, read_timeout_seconds=float(config.timeout_s)
            )
        except asyncio.CancelledError:
            raise
        except Exception as err:
            if _connection_ended(err):
                conn.closed.set()
                await asyncio.sleep(0.05)  # let the transport notice the exit, for stderr
                raise McpUnavailableError(
                    f"its connection ended during the call{conn.stderr_tail()}", sent=True
                ) from None
            raise

    def _drop(self, name: str, config: McpServerConfig, root: Path) -> None:
        conn = self._conns.pop(self._key(name, config, root), None)
        if conn is not None:
            conn.closed.set()
            if conn.task is not None:  # its stderr is read until the task ends
                conn.task.add_done_callback(lambda _: conn.release())

    async def _close_all(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.closed.set()
        tasks = [c.task for c in conns if c.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=8)
        for conn in conns:
            conn.release()


def _connection_ended(err: Exception) -> bool:
    """Whether `err` means the connection is gone (the SDK's "connection closed" code, which it
    also gives a stream that ended without a response), not an error the server answered."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(err, MCPError):
        return err.code == CONNECTION_CLOSED
    return isinstance(err, OSError | EOFError) or type(err).__module__.startswith("httpx")


def _describe(err: BaseException) -> str:
    if isinstance(err, BaseExceptionGroup) and err.exceptions:
        return _describe(err.exceptions[0])
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


async def _serve(conn: _Connection, ready: asyncio.Future[None]) -> None:
    """Open the transport and the session, then hold them until `conn.closed` is set."""
    from mcp import ClientSession

    # The stderr file outlives the transport's stack (`_Connection.release` closes it): a server
    # that exits at start is described after the stack closed, and a call whose connection
    # ended reads it after this task ended; both quote its tail.
    if conn.config.command is not None:
        conn.stderr = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
    try:
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(_transport(conn))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            conn.session = session
            ready.set_result(None)
            await conn.closed.wait()
    except BaseException as err:  # noqa: BLE001 - every failure of a server is its error text
        if not ready.done():
            ready.set_exception(McpUnavailableError(f"{_describe(err)}{conn.stderr_tail()}"))
        if isinstance(err, asyncio.CancelledError):
            raise
    finally:
        conn.closed.set()
        if not ready.done():
            ready.set_exception(McpUnavailableError(f"it exited{conn.stderr_tail()}"))


def _transport(conn: _Connection) -> Any:
    cfg = conn.config
    if cfg.url is not None:
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(cfg.url)
    from mcp.client.stdio import StdioServerParameters, stdio_client

    assert cfg.command is not None  # the config validator: command or url
    cwd = conn.root / cfg.cwd if cfg.cwd else conn.root
    params = StdioServerParameters(
        command=cfg.command[0], args=cfg.command[1:], env=cfg.env or None, cwd=cwd
    )
    assert conn.stderr is not None  # `_serve` opens it for a command
    return stdio_client(params, errlog=conn.stderr)


async def _list_tools(session: Any) -> list[RemoteTool]:
    tools: list[RemoteTool] = []
    cursor: str | None = None
    while True:
        from mcp.types import PaginatedRequestParams

        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        for t in page.tools:
            schema = t.input_schema if isinstance(t.input_schema, dict) else {"type": "object"}
            hints = t.annotations
            safe = hints is not None and bool(hints.idempotent_hint or hints.read_only_hint)
            tools.append(RemoteTool(t.name, t.description or t.title or t.name, schema, safe))
        cursor = page.next_cursor
        if not cursor:
            return tools


# -- the tools --------------------------------------------------------------------------------


class _McpInput(BaseModel):
    """Any JSON object: the server validates its own input."""

    model_config = ConfigDict(extra="allow")
    server_schema: ClassVar[dict[str, JsonValue]] = {"type": "object"}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The schema the server listed, as it is."""
        return dict(cls.server_schema)


_MODELS: dict[str, type[_McpInput]] = {}


def _input_model(schema: dict[str, JsonValue]) -> type[_McpInput]:
    key = json.dumps(schema, sort_keys=True)
    model = _MODELS.get(key)
    if model is None:
        model = type("McpInput", (_McpInput,), {"server_schema": schema})
        _MODELS[key] = model
    return model


class McpTool:
    """One tool of an MCP server, as a wakeful `Tool` (never read-only; `idempotent` when the
    server's annotations say it is idempotent or read-only: retried after a lost connection)."""

    read_only = False

    def __init__(
        self,
        pool: McpPool,
        server: str,
        config: McpServerConfig,
        root: Path,
        remote: RemoteTool,
        *,
        listed: bool = True,
        off: bool = False,
    ) -> None:
        self.pool, self.server, self.config, self.root = pool, server, config, root
        self.listed = listed  # False: a stand-in for a server that did not start when listed
        self.off = off  # switched off in the session: still listed, never called
        self.remote = remote.name
        self.name = tool_name(server, remote.name)
        self.description = remote.description
        self.idempotent = remote.idempotent
        self._model = _input_model(remote.schema)

    @property
    def input_model(self) -> type[BaseModel]:
        """Passes any object through; its schema is the server's."""
        return self._model

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutcome:
        """Call the tool on its server. A server that listed its tools but cannot start again,
        or whose connection ends during the call, is `ToolUnavailable` (retried when the call
        was not sent, or when the tool is idempotent; else, as once the retries are spent, an
        error result); a timeout too. A server that never started is an error result."""
        if self.off:
            text = (
                f"MCP server {self.server} is switched off in this session; the call was not sent"
            )
            return ToolOutcome(text, is_error=True)
        payload = args.model_dump() if isinstance(args, BaseModel) else dict(args)
        try:
            result = await self.pool.call(self.server, self.config, self.root, self.remote, payload)
        except McpUnavailableError as err:
            note = "; the call may have partially run" if err.sent else "; the call was not sent"
            text = f"MCP server {self.server}: {err}{note}"
            if not self.listed:  # it never started here: no passing fault, say so at once
                return ToolOutcome(text, is_error=True)
            raise ToolUnavailable(text, sent=err.sent) from None
        except Exception as err:  # an error the server answered (JSON-RPC), or a timeout
            from mcp.shared.exceptions import MCPError
            from mcp_types import REQUEST_TIMEOUT

            if isinstance(err, MCPError) and err.code == REQUEST_TIMEOUT:
                text = (
                    f"no answer within {self.config.timeout_s}s (timeout_s); the call may have "
                    "partially run, and may still be running"
                )
                raise ToolUnavailable(f"MCP server {self.server}: {text}") from None
            text = err.message if isinstance(err, MCPError) else _describe(err)
            return ToolOutcome(f"MCP server {self.server}: {text}", is_error=True)
        return _outcome(result)


def _outcome(result: Any) -> ToolOutcome:
    parts: list[str] = []
    for block in getattr(result, "content", None) or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            inner = block.resource
            parts.append(getattr(inner, "text", None) or f"[resource {inner.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{kind} {getattr(block, 'mime_type', '')}]".replace(" ]", "]"))
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    is_error = bool(getattr(result, "is_error", False))
    return ToolOutcome("\n".join(parts) or ("(error)" if is_error else "(no output)"), is_error)


def mcp_tools(
    pool: McpPool, state: ServerState, config: McpServerConfig, root: Path, *, off: bool = False
) -> list[Any]:
    """The server's tools as wakeful tools. While it is unavailable, the tools `allowed_tools`
    names exactly stand in (any input; a call tries to start the server and says why it
    cannot), so the model gets a clear error, not "unknown tool". `off`: the server is
    switched off in the session; its tools are listed as they are (the request's tools stay
    the same) and a call answers an error without being sent."""
    remote = state.tools
    if state.error is not None:
        names = [n for n in config.allowed_tools or () if not set(n) & set("*?[")]
        unavailable = f"(unavailable: MCP server {state.name} did not start)"
        remote = tuple(RemoteTool(n, unavailable, {"type": "object"}) for n in names)
    listed = state.error is None
    return [McpTool(pool, state.name, config, root, t, listed=listed, off=off) for t in remote]
