"""`Runtime`: the public async facade that wires store, config, provider, agent and tools.

`send` admits input durably (always before any execution) and, with `resume=True`, wakes the
coordinator; `run` sends and waits for the drain. `run_sync` is the one thin sync facade.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from ..config import Config, load_config
from ..errors import UsageError
from ..events import Delivery, InputKind, InterruptRequested, SessionCreated
from ..instructions import workspace_sources
from ..providers import Provider, make_provider
from ..runner import (
    Agent,
    LiveListener,
    PermissionPolicy,
    RunContext,
    ToolContext,
    TurnResult,
    builtin_tools,
    resolve_agent,
)
from ..store import Admission, SqlStore, new_session_id, open_store
from ._children import Children, delegation_of
from ._coordinator import Coordinator, SessionNotFoundError
from ._drain import DrainOptions, DrainResult

DEFAULT_MODEL = "local"


def default_model(config: Config) -> str:
    """The configured model, else Anthropic/OpenAI when their key is set, else `local`."""
    if config.providers.model:
        return config.providers.model
    if os.environ.get("WAKEFUL_MODEL"):
        return os.environ["WAKEFUL_MODEL"]
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5"
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:gpt-4.1"
    return DEFAULT_MODEL


@dataclass(frozen=True, slots=True)
class SendResult:
    """What `send` did: where the input went and whether this call created it."""

    session_id: str
    input_id: str
    created: bool
    session_created: bool


class Runtime:
    """A store plus everything needed to drive its sessions in this process."""

    def __init__(
        self,
        db: str | None = None,
        *,
        model: str | None = None,
        agent: str | None = None,
        workspace: str | Path | None = None,
        config: Config | None = None,
        store: SqlStore | None = None,
        listener: LiveListener | None = None,
        options: DrainOptions | None = None,
    ) -> None:
        self.workspace = Path(workspace or os.getcwd()).resolve()
        self.config = config or load_config(self.workspace)
        self.store = store or open_store(db)
        self.model = model or default_model(self.config)
        self.agent_name = agent or self.config.default_agent
        self.listener = listener
        self._providers: dict[str, Provider] = {}
        if options is None:
            ex = self.config.execution
            options = DrainOptions(
                lease_ms=ex.lease_ms,
                max_recovery_attempts=ex.max_recovery_attempts,
                poll_interval_ms=ex.poll_interval_ms,
            )
        self.coordinator = Coordinator(self.store, self._context, options)
        resolve_agent(self.agent_name, self.config)  # fail early on an unknown agent
        self.children = Children(
            self.store, self.coordinator, default_agent=self.agent_name,
            check_agent=lambda name: resolve_agent(name, self.config),
            workspace=str(self.workspace),
        )  # fmt: skip

    def _provider(self, spec: str) -> Provider:
        if spec not in self._providers:
            self._providers[spec] = make_provider(spec, **self.config.providers.options_for(spec))
        return self._providers[spec]

    def _context(self, session_id: str, interrupt: asyncio.Event) -> RunContext:
        """A run context for the session; the drain sets its claim once it holds one."""
        row = self.store.get_session(session_id)
        agent: Agent = resolve_agent(row.agent or self.agent_name, self.config)
        spec = row.model or agent.model or self.model
        top = row.parent_id is None  # delegation is one level deep: only top-level sessions
        settle = None
        if not top and delegation_of(self.store, session_id) == "background":
            settle = self.children.settler(session_id, row.parent_id or "", row.agent)
        return RunContext(
            store=self.store,
            provider=self._provider(spec),
            agent=agent,
            tools={n: t for n, t in builtin_tools(delegation=top).items() if n in agent.tools},
            tool_context=ToolContext(
                workspace=self.workspace,
                session_id=session_id,
                delegate=self.children if top else None,
            ),  # fmt: skip
            shutdown=self.coordinator.options.shutdown,
            settle=settle,
            policy=PermissionPolicy(self.config.permissions),
            retry=self.config.retry,
            compaction=self.config.compaction,
            model_spec=spec,
            listener=self.listener,
            interrupt=interrupt,
            instruction_sources=workspace_sources(self.workspace, self.config.instructions),
        )

    def send(
        self,
        text: str | None = None,
        *,
        session_id: str | None = None,
        input_id: str | None = None,
        kind: InputKind = "user",
        payload: dict[str, JsonValue] | None = None,
        delivery: Delivery = "steer",
        resume: bool = True,
        title: str | None = None,
    ) -> SendResult:
        """Admit one input (creating the session lazily); with `resume`, wake its drain.

        Waking needs a running event loop; without one the input simply stays pending.
        """
        if payload is None:
            if text is None or not text.strip():
                raise UsageError("nothing to send: give a non-empty prompt")
            payload = {"text": text}
        sid = session_id or new_session_id()
        create = SessionCreated(
            title=title or (text or "")[:80] or None, agent=self.agent_name, model=self.model,
            metadata={"workspace": str(self.workspace)},
        )  # fmt: skip
        adm: Admission = self.store.admit(sid, input_id, kind, payload, delivery, create=create)
        if resume:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                self.coordinator.wake(sid)
        return SendResult(sid, adm.item.input_id, adm.created, adm.session_created)

    async def run(
        self, text: str, *, session_id: str | None = None, **kw: object
    ) -> list[TurnResult]:
        """Send `text` and drive the session until nothing is left; return the turns run."""
        sent = self.send(text, session_id=session_id, resume=False, **kw)  # type: ignore[arg-type]
        return self.turns_of(await self.coordinator.resume(sent.session_id))

    async def resume(self, session_id: str) -> list[TurnResult]:
        """Drive a session's pending work (and recover it) now."""
        self.store.get_session(session_id)
        return self.turns_of(await self.coordinator.resume(session_id))

    @staticmethod
    def turns_of(results: Sequence[DrainResult]) -> list[TurnResult]:
        """Flatten drain results into the turns they ran."""
        return [t for r in results for t in r.turns]

    def interrupt(self, session_id: str) -> bool:
        """Hard-interrupt the session's turn, here or in whichever process drives it.

        Writes a durable `session.interrupt_requested` (another process's driver sees it within
        its poll interval) and stops a local drain at once. Returns whether one ran here.
        """
        if self.store.find_session(session_id) is None:
            raise SessionNotFoundError(f"no session {session_id}")
        [request] = self.store.append(session_id, [InterruptRequested()])
        return self.coordinator.interrupt(session_id, request.id)

    async def aclose(self) -> None:
        """Wait for local drains, close providers and the store."""
        await self.coordinator.wait_idle()
        for provider in self._providers.values():
            await provider.aclose()
        self.store.close()


def run_sync(text: str, **kw: object) -> list[TurnResult]:
    """Run one prompt to completion from synchronous code (opens and closes a `Runtime`)."""
    session_id = kw.pop("session_id", None)

    async def main() -> list[TurnResult]:
        rt = Runtime(**kw)  # type: ignore[arg-type]
        try:
            return await rt.run(text, session_id=session_id)  # type: ignore[arg-type]
        finally:
            await rt.aclose()

    return asyncio.run(main())
