"""`WakefulAgent`: the ACP agent side of `wakeful acp`, one method per protocol request.

Every session it serves is an ordinary wakeful session in the store: created at the editor's
working directory (the session's location), driven by this process's `Runtime`, and readable
and resumable by every other wakeful entry point. The agent keeps no state of its own beyond
the prompts running now: `session/load` works for any stored session, also one started by
`wakeful run`, a worker or the server, or by an agent process that was killed mid-turn (its
unfinished turn is recovered here, streamed like a prompt, before the load answers).

Errors a user can cause (an unknown session, a directory that does not exist, an agent or
model that cannot be used) answer the request with a JSON-RPC error naming the problem; nothing
is written for them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeAlias, TypeVar

from acp import PROTOCOL_VERSION, Client, RequestError
from acp.schema import (
    AcpMcpServer,
    AgentCapabilities,
    AuthenticateResponse,
    ClientCapabilities,
    CloseSessionResponse,
    ForkSessionResponse,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpServerStdio,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    SseMcpServer,
)

from .. import __version__
from ..errors import NotFoundError, UsageError, WakefulError
from ..execution import Runtime, off_loop
from ..runner import TurnResult, resolve_agent
from ..store import SessionRow
from . import _options, _updates
from ._drive import Driver, stop_reason
from ._prompt import PromptBlock, payload

log = logging.getLogger("wakeful.acp")
T = TypeVar("T")
P = ParamSpec("P")
# The editor's MCP servers are not connected: a session's tools come from its location's
# configuration (`[mcp.servers]`, docs/mcp.md), the same wherever it is driven.
McpServer: TypeAlias = HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio


async def _call(fn: Callable[P, T], *args: P.args, **kw: P.kwargs) -> T:
    """A store call in a worker thread (never on the loop the updates go out from); a wakeful
    error a user caused becomes the JSON-RPC error the editor shows."""
    try:
        return await off_loop(fn, *args, **kw)
    except NotFoundError as err:
        raise RequestError(-32002, str(err), {"error": "not_found"}) from None
    except UsageError as err:
        raise RequestError.invalid_params({"error": str(err)}) from None


class WakefulAgent:
    """The ACP `Agent` over a `Runtime` (see the module docstring)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.client: Client | None = None
        self._running: dict[str, Driver] = {}

    def on_connect(self, conn: Client) -> None:
        """Keep the connection to the editor (updates and permission requests go through it)."""
        self.client = conn

    def _client(self) -> Client:
        if self.client is None:  # the SDK connects before any request is routed
            raise RequestError.internal_error({"error": "no client connection"})
        return self.client

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **_: Any,
    ) -> InitializeResponse:
        """Protocol version and what this agent does: load sessions, list them, prompts with
        images, audio and embedded files."""
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=True, audio=True, embedded_context=True
                ),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            agent_info=Implementation(name="wakeful", title="wakeful", version=__version__),
        )

    async def authenticate(self, method_id: str, **_: Any) -> AuthenticateResponse | None:
        """No authentication methods: providers read their keys from the environment."""
        raise RequestError.invalid_params({"error": f"unknown authentication method {method_id}"})

    # -- sessions ----------------------------------------------------------------------------

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **_: Any,
    ) -> NewSessionResponse:
        """A new session living at `cwd` (its location: the tools' root and the workspace
        configuration), with this runtime's agent and model, checked first."""
        row = await _call(self._create, cwd)
        return NewSessionResponse(session_id=row.id, **await _call(self._state, row))

    def _create(self, cwd: str) -> SessionRow:
        rt = self.runtime
        place = rt.place(_directory(cwd))
        rt.check_model(rt.model, place)
        resolve_agent(rt.agent_name, place.config)
        return rt.create_session(
            agent=rt.agent_name,
            model=rt.model,
            location=str(place.root),
            metadata={"workspace": str(place.root), "client": "acp"},
        )

    def _state(self, row: SessionRow) -> dict[str, Any]:
        """The session's agent and model as modes and configuration options, read with the
        configuration of its location (`LocationUnavailableError` when that is not here)."""
        config = self.runtime.place(row.location).config
        agent = row.agent or self.runtime.agent_name
        model = row.model or self.runtime.model
        return {
            "modes": _options.modes(config, agent),
            "config_options": _options.config_options(config, agent, model),
        }

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **_: Any,
    ) -> LoadSessionResponse | None:
        """Replay the stored session to the editor, then drive what a crash or another process
        left unfinished (`_recover`). The session keeps its own location, also when the
        editor's `cwd` differs; one whose location is not a directory here is refused."""
        row, state = await self._open(session_id)
        client = self._client()
        messages = await _call(self.runtime.reads.messages, session_id)
        for update in _updates.replay(messages, _root(row)):
            await client.session_update(session_id, update)
        await self._recover(row)
        return LoadSessionResponse(**state)

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **_: Any,
    ) -> ResumeSessionResponse:
        """`load_session` without the replay (the editor still shows the conversation)."""
        row, state = await self._open(session_id)
        await self._recover(row)
        return ResumeSessionResponse(**state)

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **_: Any,
    ) -> ForkSessionResponse:
        """A new session holding the session's whole conversation (`Runtime.fork`), at the
        same location; the original is untouched."""
        await self._open(session_id)
        row = await _call(self.runtime.fork, session_id)
        return ForkSessionResponse(session_id=row.id, **await _call(self._state, row))

    async def close_session(self, session_id: str, **_: Any) -> CloseSessionResponse | None:
        """Nothing is held per session here; a running prompt is cancelled as by `cancel`."""
        if session_id in self._running:
            await self.cancel(session_id)
        return CloseSessionResponse()

    async def _open(self, session_id: str) -> tuple[SessionRow, dict[str, Any]]:
        row = await _call(self.runtime.reads.get_session, session_id)
        return row, await _call(self._state, row)

    async def _recover(self, row: SessionRow) -> None:
        """Drive what a crash or another process left unfinished (an open turn, pending
        input), streamed like a prompt, unless a live process drives it. Calls awaiting
        approval are not asked about here: the next prompt asks first."""
        if await _call(self._unfinished, row.id):
            driver = Driver(self.runtime, self._client(), row.id, _root(row))
            await self._drive(driver, None, ask=False)

    def _unfinished(self, session_id: str) -> bool:
        """Whether the session has work nobody drives: pending input or a claim a dead or
        lapsed driver left (a live claim of another process is that process's to finish)."""
        reads = self.runtime.reads
        if not reads.pending(session_id) and reads.current_claim(session_id) is None:
            return False
        return not self.runtime.busy(session_id)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_: Any
    ) -> ListSessionsResponse:
        """Top-level sessions newest first (one store page), those living at `cwd` when given."""
        page = await _call(self.runtime.reads.list_sessions, cursor=cursor)
        where = await off_loop(_resolved, cwd) if cwd else None
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=r.id,
                    cwd=r.location or "",
                    title=r.title,
                    updated_at=datetime.fromtimestamp(r.updated_ms / 1000, UTC).isoformat(),
                )
                for r in page.sessions
                if where is None or r.location == where
            ],
            next_cursor=page.next_cursor,
        )

    async def set_session_mode(
        self, session_id: str, mode_id: str, **_: Any
    ) -> SetSessionModeResponse | None:
        """Run the session as the agent `mode_id` from its next turn (a durable update)."""
        await _call(self.runtime.set_identity, session_id, agent=mode_id)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_: Any
    ) -> SetSessionConfigOptionResponse | None:
        """Set the session's agent (`mode`) or model (`model`) from its next turn."""
        if not isinstance(value, str) or config_id not in {
            _options.MODE_OPTION,
            _options.MODEL_OPTION,
        }:
            raise RequestError.invalid_params({"error": f"no option {config_id} of that type"})
        field = "agent" if config_id == _options.MODE_OPTION else "model"
        await _call(self.runtime.set_identity, session_id, **{field: value})
        row = await _call(self.runtime.reads.get_session, session_id)
        state = await _call(self._state, row)
        return SetSessionConfigOptionResponse(config_options=state["config_options"])

    # -- prompts -----------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[PromptBlock], **_: Any) -> PromptResponse:
        """Admit the prompt durably, then drive the session here, streaming its updates;
        calls that need permission are asked about first (also those an earlier, killed agent
        left waiting), and each answer is a durable approval decision."""
        try:
            body = payload(prompt)
        except WakefulError as err:
            raise RequestError.invalid_params({"error": str(err)}) from None
        row = await _call(self.runtime.reads.get_session, session_id)
        await _call(self.runtime.place, row.location)  # runnable here, before anything is admitted
        if session_id in self._running:
            raise RequestError.invalid_request({"error": "a prompt of this session is running"})
        driver = Driver(self.runtime, self._client(), session_id, _root(row))

        def admit() -> list[str]:
            sent = self.runtime.send(
                session_id=session_id, payload=body, resume=False, create=False
            )
            return [sent.input_id]

        turn = await self._drive(driver, admit, ask=True)
        return PromptResponse(stop_reason=stop_reason(turn, driver.cancelled.is_set()))

    async def _drive(
        self, driver: Driver, admit: Callable[[], list[str]] | None, *, ask: bool
    ) -> TurnResult | None:
        self._running[driver.session_id] = driver
        try:
            return await driver.run(admit, ask=ask)
        except WakefulError as err:
            raise RequestError.internal_error({"error": str(err)}) from None
        finally:
            self._running.pop(driver.session_id, None)

    async def cancel(self, session_id: str, **_: Any) -> None:
        """Stop the session's running prompt: a hard interrupt of its turn (durable, like
        `wakeful interrupt`), and an open permission question is left undecided."""
        driver = self._running.get(session_id)
        if driver is not None:
            driver.cancelled.set()
        try:
            # its store calls off the loop; the local drain's interrupt event set on it
            await self.runtime.ainterrupt(session_id)
        except WakefulError:  # an unknown session: nothing runs, nothing to stop
            log.debug("cancel of unknown session %s", session_id)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """No extension methods."""
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        """Extension notifications are ignored."""


def _root(row: SessionRow) -> Path:
    """Where the session's tools run (paths in updates are shown under it)."""
    return Path(row.location or ".")


def _resolved(path: str) -> str:
    return str(Path(path).resolve())


def _directory(cwd: str) -> str:
    """`cwd` as a session location: an existing directory, absolute (`UsageError` otherwise)."""
    path = Path(cwd)
    if not path.is_absolute() or not path.is_dir():
        raise UsageError(f"cwd must be an existing absolute directory: {cwd}")
    return str(path.resolve())
