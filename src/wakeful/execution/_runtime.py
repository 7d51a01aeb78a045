"""`Runtime`: the public async facade that wires store, config, provider, agent and tools.

`send` admits input durably (always before any execution) and, with `resume=True`, wakes the
coordinator; `run` sends and waits for the drain. `run_sync` is the one thin sync facade.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..config import Config, load_config
from ..errors import UsageError
from ..events import (
    ApprovalRequested,
    Delivery,
    InputKind,
    SessionCreated,
    SessionEvent,
    SessionUpdated,
)
from ..providers import Provider
from ..runner import (
    AskResult,
    LiveListener,
    Tool,
    Tracing,
    TurnResult,
    resolve_agent,
)
from ..store import (
    Admission,
    AdmissionRequest,
    InboxItem,
    PruneCounts,
    SessionRow,
    SqlStore,
    new_session_id,
    open_store,
    sent_message_id,
)
from ._actor import ActorMixin
from ._approve import admit_decision, pending_approvals
from ._children import Children
from ._coordinator import Coordinator
from ._drain import DrainOptions, DrainResult
from ._event_stream import EventStream, Streams
from ._follow import drive_input, input_outcome
from ._hooks import HookEvent, Hooks
from ._host import HostMixin
from ._interrupts import InterruptMixin
from ._move import existing_location
from ._off_loop import off_loop, wait_off_loop
from ._place import Place, PlacesMixin, config_stamp
from ._reads import Reads
from ._runtime_schedules import SchedulesMixin
from ._setup import SetupMixin
from ._shaping import ShapingMixin, ToolState
from ._toolbox import Toolbox

log = logging.getLogger("wakeful.runtime")

DEFAULT_MODEL = "local"
Ask = Callable[[str, dict[str, object]], Awaitable[AskResult]]


def default_model(config: Config) -> str:
    """The configured model (`$WAKEFUL_MODEL` over the files: `load_config`), else
    Anthropic/OpenAI when their key is set, else `local`."""
    if config.providers.model:
        return config.providers.model
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
    status: str = "pending"
    """The input's status as of admission (an input id sent again reads as it is now)."""
    item: InboxItem | None = None
    """The admitted item as stored (sent again: the original, as it is now)."""
    message_id: str | None = None
    """The transcript message the input becomes (or became), known at admission; None for a
    control item or a rejected input. Sent again with the same input id, the same."""

    @classmethod
    def of(cls, adm: Admission) -> SendResult:
        """The result of an admission (`SqlStore.admit`): its item and message id."""
        item = adm.item
        return cls(
            item.session_id,
            item.input_id,
            adm.created,
            adm.session_created,
            item.status,
            item,
            sent_message_id(item),
        )


class Runtime(
    PlacesMixin, SetupMixin, ShapingMixin, HostMixin, SchedulesMixin, InterruptMixin, ActorMixin
):
    """A store plus everything needed to drive its sessions in this process."""

    store: SqlStore  # the concrete store it opens (its mixins need only a `LocalStore`)

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
        ask: Ask | None = None,
        max_output_tokens: int | None = None,
        tools: Sequence[Tool] | None = None,
        tracer_provider: Any = None,
    ) -> None:
        # Tools of this process: `tools` (e.g. made with `wakeful.tools.tool`), `[tools]` of
        # each location's configuration, and its MCP servers (`docs/tools.md`).
        self.toolbox = Toolbox(list(tools or ()))
        self.ask = ask  # someone present to answer `ask` permissions; None: such calls pause
        self.workspace = Path(workspace or os.getcwd()).resolve()
        stamp = None if config is not None else config_stamp(self.workspace)  # None: given
        self.config = config or load_config(self.workspace)
        self._output_limit = max_output_tokens
        if max_output_tokens is not None:
            self.config = self.config.with_output_limit(max_output_tokens)
        self._places = {str(self.workspace): Place(self.workspace, self.config, stamp)}
        # Which locations this process runs sessions at (a worker's `--location`); None: any
        # directory present on this host.
        self.serves: Callable[[str], bool] | None = None
        self.store = store or open_store(
            db, options=self.config.store, encryption=self.config.encryption
        )
        self.model = model or default_model(self.config)
        self.agent_name = agent or self.config.default_agent
        self.listener = listener  # the single listener of earlier versions (LEGACY_KINDS only)
        self.hooks = Hooks()  # lifecycle hooks (`docs/hooks.md`)
        self._streams = Streams()  # open `events()` streams (`docs/events.md`)
        # OpenTelemetry spans (`docs/tracing.md`); None without the opentelemetry package.
        self.tracing = Tracing.create(tracer_provider)
        self._providers: dict[str, Provider] = {}
        self._providers_lock = threading.Lock()
        self._tool_state = ToolState(self, self.store.extension_state)
        self._model_checked = False  # `self.model` passed `check_model` (see `send`)
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
            self.store,
            self.coordinator,
            default_agent=self.agent_name,
            check_agent=lambda name, loc: resolve_agent(name, self.place(loc).config),
            workspace=str(self.workspace),
        )

    def add_tool(self, tool: Tool) -> None:
        """Offer `tool` (a `wakeful.tools.tool` function or any `Tool`) to the sessions this
        runtime drives: `build` and agents without a tool list get it, others when their list
        names it. `UsageError` for a bad name or one a built-in has."""
        self.toolbox.register(tool)

    def set_identity(
        self, session_id: str, *, agent: str | None = None, model: str | None = None
    ) -> bool:
        """Make `agent` and/or `model` the session's own from its next turn on, as one durable
        `session.updated` (visible in later receipts). Both are checked first (`UsageError`,
        nothing written); a value equal to the stored one writes nothing. Returns whether an
        update was written."""
        row = self.store.get_session(session_id)
        place = self.place(row.location)  # checked with the configuration where it runs
        if agent is not None:
            resolve_agent(agent, place.config)
        if model is not None:
            self.check_model(model, place)
        changes = {
            name: value
            for name, value in (("agent", agent), ("model", model))
            if value is not None and value != getattr(row, name)
        }
        if not changes:
            return False
        self.store.append(session_id, [SessionUpdated(**changes)])
        return True

    def events(
        self, session_id: str, *, durable: bool = True, after: int | None = None
    ) -> EventStream:
        """An async stream of the session's events, live (text deltas, tool progress, step and
        turn ends) and, with `durable`, the log's events after seq `after` (default: now),
        each once and in order (`docs/events.md`). Subscribed on return: make it before
        sending the input it should see; close it with `aclose` (or `async with`)."""
        start = self.store.high_water(session_id) if after is None else after
        return EventStream(self._streams, self.store, session_id, after=start, durable=durable)

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
        create: bool = True,
        actor: str | None = None,
    ) -> SendResult:
        """Admit one input (creating the session lazily), by `actor` (default `self.actor`);
        with `resume`, wake its drain.

        A session created here takes this runtime's agent and model; the model is checked
        first (`check_model`), so a model that cannot be built creates nothing. With `create`
        false an unknown session is a `NotFoundError` and nothing is written.

        Waking needs a running event loop; without one the input simply stays pending.
        """
        if payload is None:
            if text is None or not text.strip():
                raise UsageError("nothing to send: give a non-empty prompt")
            payload = {"text": text}
        sid = session_id or new_session_id()
        made: SessionCreated | None = None
        if create or session_id is None:
            if not self._model_checked and (
                session_id is None or self.store.find_session(sid) is None
            ):
                self.check_model(self.model)  # before anything is written: no stranded session
                self._model_checked = True  # once per runtime: a script is not parsed per send
            made = SessionCreated(
                title=title or (text or "")[:80] or None,
                agent=self.agent_name,
                model=self.model,
                metadata={"workspace": str(self.workspace)},
                location=str(self.workspace),
            )
        adm: Admission = self.store.admit(
            sid, input_id, kind, payload, delivery, create=made, actor=actor or self.actor
        )
        sent = self._admitted(sid, adm, kind, delivery)
        if resume:
            self._wake(sid)
        return sent

    def admit_together(self, requests: Sequence[AdmissionRequest]) -> list[SendResult | Exception]:
        """`send` of each request into its existing session, none woken (`resume=False`,
        `create=False`), in one store transaction (`SqlStore.admit_together`): each one's
        `SendResult`, or the error `send` would raise for it, in order (by `self.actor`
        where a request names no `actor`)."""
        requests = [r if r.actor else replace(r, actor=self.actor) for r in requests]
        return [
            out
            if isinstance(out, Exception)
            else self._admitted(r.session_id, out, r.kind, r.delivery)
            for r, out in zip(requests, self.store.admit_together(requests), strict=True)
        ]

    def _admitted(
        self, sid: str, adm: Admission, kind: InputKind, delivery: Delivery
    ) -> SendResult:
        """Tell the hooks of an admission; what `send` returns for it."""
        if self.hooks:
            self.hooks.emit(
                HookEvent(
                    "input_admitted",
                    sid,
                    {
                        "input_id": adm.item.input_id,
                        "kind": kind,
                        "delivery": delivery,
                        "created": adm.created,
                    },
                    self.store.clock.now_ms(),
                )
            )
        return SendResult.of(adm)

    @property
    def reads(self) -> Reads:
        """The runtime's store as entry points read it (`Reads`: the `Store` protocol and the
        reads only a local database answers); writes go through this class's methods."""
        return self.store

    def create_session(
        self,
        *,
        title: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        metadata: dict[str, JsonValue] | None = None,
        location: str | None = None,
        session_id: str | None = None,
        events: Sequence[SessionEvent] = (),
        owner: str | None = None,
    ) -> SessionRow:
        """Create a session (a fresh id unless `session_id`) with these fields as given (None:
        no agent, model or location recorded; `send` fills in this runtime's), holding `events`
        (an import's messages) and its `owner` (a server's user) written in the same
        transaction. The caller checks agent and model first (`place`, `check_model`)."""
        return self.store.create_session(
            session_id,
            title=title,
            agent=agent,
            model=model,
            metadata=metadata,
            location=location,
            events=events,
            owner=owner,
        )

    def fork(self, session_id: str, through_seq: int | None = None, **fields: Any) -> SessionRow:
        """A new session (of the original's owner) holding its messages through `through_seq`
        (default: all); the original is untouched. `fields` override title, agent, model,
        location."""
        return self.store.fork(session_id, through_seq, **fields)

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Set or clear the session's reversible archive marker."""
        self.store.set_archived(session_id, archived)

    def delete(self, session_id: str, *, actor: str | None = None) -> PruneCounts:
        """Delete the session and its descendants for good; return what went. Its tombstone
        (`store.access.deletions`) names `actor` (default: `self.actor`)."""
        return self.store.delete(session_id, actor=actor or self.actor)

    def compact(
        self,
        session_id: str,
        *,
        tail_turns: int | None = None,
        input_id: str | None = None,
        resume: bool = True,
        actor: str | None = None,
    ) -> SendResult:
        """Admit `actor`'s manual compaction request (a control item run at the session's next
        turn boundary, keeping `tail_turns` recent turns word for word: default `[compaction]`);
        with `resume`, wake the drain. `NotFoundError` for an unknown session."""
        payload: dict[str, JsonValue] = {"reason": "manual"}
        if tail_turns is not None:
            payload["tail_turns"] = tail_turns
        return self.send(
            session_id=session_id,
            input_id=input_id,
            kind="compaction",
            payload=payload,
            resume=resume,
            create=False,
            actor=actor,
        )

    def note_waiting(self, session_id: str, location: str) -> None:
        """Record that the session waits for a worker serving `location` (what `session show`
        and the API report as `waiting_for`)."""
        self.store.claims.note_waits({session_id: location})

    def active(self) -> list[str]:
        """The sessions this process drives now."""
        return self.coordinator.active()

    def wake(self, session_id: str) -> asyncio.Task[list[DrainResult]]:
        """Wake the session's drain in this process (coalesced with a running one, whose task
        is returned); needs a running event loop."""
        return self.coordinator.wake(session_id)

    async def drive(self, session_id: str) -> list[TurnResult]:
        """Drive the session's pending work now (`resume` without its existence check, for a
        caller that just admitted to the session); return the turns run here."""
        return self.turns_of(await self.coordinator.resume(session_id))

    def stop_local(self, session_id: str) -> bool:
        """Stop this process's drain of the session at once, writing nothing (an interrupt
        that only this process needs to see, e.g. Ctrl-C); whether one ran here. No store call:
        safe on the event loop (an unknown session simply has no drain here)."""
        return self.coordinator.interrupt(session_id)

    async def wait_idle(self) -> None:
        """Wait until this process drives no session."""
        await self.coordinator.wait_idle()

    def shut_down(self) -> None:
        """Stop driving: no drain starts or continues a turn from now on, and every local drain
        is interrupted (its session recovers wherever it is driven next)."""
        self.coordinator.options.shutdown.set()
        for sid in self.coordinator.active():
            self.coordinator.interrupt(sid)

    def _wake(self, session_id: str) -> None:
        """Wake the session's drain in this process when an event loop runs here (a caller
        without one leaves the admitted input to whichever driver comes next)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self.coordinator.wake(session_id)

    def move(
        self,
        session_id: str,
        path: str | Path,
        *,
        input_id: str | None = None,
        resume: bool = True,
        actor: str | None = None,
    ) -> SendResult:
        """Admit `actor`'s `move` of the session to the directory `path` (a control item
        applied at the next idle boundary: `docs/locations.md`); with `resume`, wake its drain.

        Refused before anything is stored: an unknown session (`NotFoundError`), a destination
        that is not a directory on this host (`UsageError`).
        """
        self.store.get_session(session_id)
        where = existing_location(path)
        return self.send(
            session_id=session_id,
            input_id=input_id,
            kind="move",
            payload={"location": where},
            resume=resume,
            actor=actor,
        )

    async def run(
        self, text: str, *, session_id: str | None = None, **kw: object
    ) -> list[TurnResult]:
        """Send `text` and drive the session until nothing is left; return the turns run."""
        sent = self.send(text, session_id=session_id, resume=False, **kw)  # type: ignore[arg-type]  # send's own keywords, passed through
        return await self.drive_input(sent.session_id, sent.input_id)

    async def drive_input(self, session_id: str, input_id: str) -> list[TurnResult]:
        """Drive the session until the input `input_id` is settled; return the turns run here,
        or, when another live process drives the session, the turn that took the input there
        (read from the store once it ended; its usage reads as zero)."""
        return await drive_input(self.coordinator, session_id, input_id)

    def input_outcome(self, session_id: str, input_id: str) -> TurnResult | None:
        """The ended turn that took the input, as stored (its usage reads as zero); None while
        the input is pending or its turn runs. A rejected input reads as a `failed` turn."""
        return input_outcome(self.store, session_id, input_id)

    async def resume(self, session_id: str) -> list[TurnResult]:
        """Drive a session's pending work (and recover it) now (`NotFoundError` for an
        unknown session: the drain's context read says so, before any claim)."""
        return self.turns_of(await self.coordinator.resume(session_id))

    @staticmethod
    def turns_of(results: Sequence[DrainResult]) -> list[TurnResult]:
        """Flatten drain results into the turns they ran."""
        return [t for r in results for t in r.turns]

    def approvals(self, session_id: str) -> list[ApprovalRequested]:
        """The session's calls waiting for a decision (`NotFoundError` for an unknown session)."""
        self.store.get_session(session_id)
        return pending_approvals(self.store, session_id)

    def approve(
        self,
        session_id: str,
        call_id: str,
        decision: str = "allow",
        *,
        resume: bool = True,
        actor: str | None = None,
    ) -> SendResult:
        """Admit `actor`'s decision (`allow`, `deny`, `always`; default actor: `self.actor`)
        on a waiting call; with `resume`, wake the session's drain (needs a running event
        loop, like `send`). The call runs, once, in whichever process drives the session
        next; see `docs/approvals.md`."""
        self.store.get_session(session_id)
        _, adm = admit_decision(self.store, session_id, call_id, decision, actor or self.actor)
        if resume:
            self._wake(session_id)
        return SendResult.of(adm)

    def close(self) -> None:
        """Close the store of a runtime that drives nothing (an entry point that failed before
        driving, or only admitted); one that drove sessions closes with `aclose`."""
        self.toolbox.close()
        self.store.close()

    async def aclose(self) -> None:
        """Wait for local drains, close providers and the store."""
        await self.coordinator.wait_idle()
        await self.hooks.flush()
        for provider in self._providers.values():
            await provider.aclose()
        await wait_off_loop(self.toolbox.close)
        await off_loop(self.store.close)  # it may index what search has not yet


def run_sync(text: str, **kw: object) -> list[TurnResult]:
    """Run one prompt to completion from synchronous code (opens and closes a `Runtime`)."""
    session_id = kw.pop("session_id", None)

    async def main() -> list[TurnResult]:
        rt = Runtime(**kw)  # type: ignore[arg-type]  # Runtime's own keywords, passed through
        try:
            return await rt.run(text, session_id=session_id)  # type: ignore[arg-type]  # a str or None, popped from kw
        finally:
            await rt.aclose()

    return asyncio.run(main())
