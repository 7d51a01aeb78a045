"""One turn: drive promoted input to a terminal outcome, step by step.

Each step reloads history from the store, assembles the prompt, persists its receipt *before*
the request is sent (invariant 7), streams the reply (deltas go to live listeners only),
persists the assistant message, persists every tool call before it runs (invariant 6), and
publishes tool outcomes in call order. Retries are durable (invariant 9) and every exit path
writes a `turn.ended` (invariant 10). With a claim, every write is fenced (invariant 5).
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from ..clock import Clock, SystemClock
from ..config import CompactionConfig, RetryConfig
from ..errors import (
    ClaimLostError,
    ContentFilterError,
    ContextOverflowError,
    ProviderError,
    UsageError,
    WakefulError,
)
from ..events import (
    MessageAdded,
    Outcome,
    RetryCleared,
    RetryScheduled,
    SessionEvent,
    TurnEnded,
    TurnStarted,
    UsageRecorded,
    WorkStateUpdated,
)
from ..instructions import InstructionSync, Source
from ..messages import Message, TextBlock, TextOrigin, WireBuilder, new_message_id
from ..providers import Finish, Provider, ReasoningDelta, TextDelta, ToolCallDelta, Usage
from ..store import ClaimToken, SqlStore
from ._agents import Agent
from ._compaction import Compactor
from ._crashpoints import crash_point
from ._live import LiveEvent, LiveListener
from ._pricing import cost_usd
from ._prompt import (
    Section,
    build_request,
    make_receipt,
    params_section,
    request_digest,
    section_blobs,
    tools_section,
)
from ._retry import backoff_ms, error_kind, is_retryable, terminal_outcome
from ._tool_step import run_tools, started_events
from ._work_state import render_work_state
from .tools import PermissionPolicy, Tool, ToolContext, tool_spec

CONTINUE_AFTER_CUT = (
    "Your previous reply was cut off before it finished (the stream ended early). "
    "Continue from where it stopped; do not repeat what you already said."
)


class Interrupted(Exception):
    """Raised inside a turn when its interrupt event is set."""


@dataclass
class RunContext:
    """Everything a turn needs besides the session: store, model, agent, tools, policies."""

    store: SqlStore
    provider: Provider
    agent: Agent
    tools: Mapping[str, Tool]
    tool_context: ToolContext
    policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    retry: RetryConfig = field(default_factory=RetryConfig)
    model_spec: str = ""
    claim: ClaimToken | None = None
    clock: Clock = field(default_factory=SystemClock)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    listener: LiveListener | None = None
    interrupt: asyncio.Event = field(default_factory=asyncio.Event)
    ask: Callable[[str, dict[str, object]], Awaitable[bool]] | None = None
    instruction_sources: Sequence[Source] = ()
    rng: random.Random = field(default_factory=random.Random)
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    # Set when an interrupt means "this process is shutting down": the turn then stays open
    # (no `turn.ended`) and `Interrupted` propagates, so the next driver resumes it.
    shutdown: asyncio.Event | None = None
    # Writes a turn's `turn.ended` (fenced by the claim it is given) together with what must
    # commit with it (a background child's report to its parent); None appends the event alone.
    settle: Callable[[TurnEnded, TurnResult, ClaimToken | None], None] | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended, with its steps and token usage."""

    turn_id: str
    outcome: Outcome
    steps: int
    usage: Usage
    error: str | None = None
    error_kind: str | None = None
    final_text: str = ""


class TurnRunner:
    """Runs turns of one session under one `RunContext`."""

    def __init__(self, ctx: RunContext, session_id: str) -> None:
        self.ctx = ctx
        self.sid = session_id
        self._usage = Usage(0, 0)
        self._final_text = ""
        self._compaction = Compactor(ctx, session_id)  # owns the active-history view
        self._stored_sections: set[str] = set()  # section blobs this runner already stored
        self._retry_pending = False  # a retry.scheduled not yet cleared by a recorded reply
        self._retry_read = False  # the stored retry state was read (at the first step)
        self._wire = WireBuilder()  # to_wire, linear in what each step added
        self._tools_section: Section | None = None
        self._instructions = InstructionSync(ctx.store, session_id, ctx.instruction_sources)
        # A reply whose calls are all read-only, committed with their results (`_hold_reply`).
        self._held: list[SessionEvent] = []
        self._work: dict[str, JsonValue] | None = None  # the session's work state, once read

    # -- plumbing -------------------------------------------------------------------------

    def _append(self, events: Sequence[SessionEvent], blobs: Sequence[bytes] = ()) -> None:
        """Commit `events` (fenced), after a held reply if there is one (see `_hold_reply`)."""
        held, self._held = self._held, []
        if held or events or blobs:
            self.ctx.store.append(self.sid, [*held, *events], self.ctx.claim, blobs=blobs)
        if self._work is not None:  # keep the work-state copy what the store now holds
            for event in events:
                if isinstance(event, WorkStateUpdated):
                    self._work[event.kind] = event.value

    def _live(self, kind: str, **data: object) -> None:
        if self.ctx.listener is not None:
            self.ctx.listener(LiveEvent(self.sid, kind, data))  # type: ignore[arg-type]

    def _check_interrupt(self) -> None:
        if self.ctx.interrupt.is_set():
            raise Interrupted

    # -- the turn -------------------------------------------------------------------------

    async def run(self, input_ids: Sequence[str] = (), turn_id: str | None = None) -> TurnResult:
        """Drive the turn to a terminal outcome; resume `turn_id` when given (after a crash)."""
        tid = turn_id or f"turn_{secrets.token_hex(8)}"
        if turn_id is None:
            self._append([TurnStarted(turn_id=tid, input_ids=tuple(input_ids))])
        steps = 0
        try:
            steps = await self._steps(tid)
            crash_point("turn.ending")
            return self._end(tid, "completed", steps)
        except Interrupted:
            if self.ctx.shutdown is not None and self.ctx.shutdown.is_set():
                raise
            return self._end(tid, "interrupted", steps, "interrupted by the user")
        except ClaimLostError:
            raise
        except WakefulError as err:
            return self._end(tid, terminal_outcome(err), steps, str(err), error_kind(err))

    def settle(
        self,
        turn_id: str,
        outcome: Outcome,
        final_text: str = "",
        error: str | None = None,
        kind: str | None = None,
    ) -> TurnResult:
        """End an open turn without another step (recovery found it finished, or gave up)."""
        self._final_text = final_text
        return self._end(turn_id, outcome, 0, error, kind)

    def _end(
        self,
        tid: str,
        outcome: Outcome,
        steps: int,
        error: str | None = None,
        kind: str | None = None,
    ) -> TurnResult:
        if self._held:  # a held reply goes before the end, whoever writes the end
            self._append([])
        end = TurnEnded(turn_id=tid, outcome=outcome, error=error, error_kind=kind)
        result = TurnResult(tid, outcome, steps, self._usage, error, kind, self._final_text)
        if self.ctx.settle is not None:
            self.ctx.settle(end, result, self.ctx.claim)
        else:
            self._append([end])
        self._live("turn_end", outcome=outcome, error=error)
        return result

    async def _steps(self, tid: str) -> int:
        allowance = self.ctx.agent.max_steps
        step = 0
        while True:
            self._check_interrupt()
            if step > 0 and await self._promote_steers():
                allowance = self.ctx.agent.max_steps
            if allowance <= 0:
                raise UsageError(
                    f"agent {self.ctx.agent.name} used its {self.ctx.agent.max_steps} steps"
                )
            step += 1
            allowance -= 1
            message = await self._attempts(tid, step)
            if message.tool_calls():
                await self._tools(tid, message)
                continue
            if await self._promote_steers():
                allowance = self.ctx.agent.max_steps
                continue
            return step

    async def _promote_steers(self) -> bool:
        delivered = self.ctx.store.promote(self.sid, idle=False, claim=self.ctx.claim)
        for d in delivered:  # a manual compaction request runs at this step boundary
            if d.message is None and d.item.kind == "compaction":
                await self._compaction.control(d.item, in_turn=True)
                self._check_interrupt()
        return any(d.message is not None for d in delivered)

    # -- one step, several physical attempts -----------------------------------------------

    async def _attempts(self, tid: str, step: int) -> Message:
        # A retry left by an earlier driver can only be found before this runner's first
        # step; after it, every retry state is one this runner wrote and tracks itself.
        state = None if self._retry_read else self.ctx.store.retry_state(self.sid)
        self._retry_read = True
        self._retry_pending = self._retry_pending or state is not None
        attempt = 1
        if state is not None and state.turn_id == tid:
            attempt = state.attempt
            await self._wait_until(state.deadline_ms)
        message_id = new_message_id()
        overflowed = False  # one overflow compaction per step; a second overflow is terminal
        while True:
            self._check_interrupt()
            partial: list[str] = []
            try:
                message = await self._attempt(tid, step, attempt, message_id, partial)
            except ProviderError as err:
                if isinstance(err, ContentFilterError):
                    self._keep_partial(tid, message_id, partial, err)
                    raise
                if isinstance(err, ContextOverflowError) and not partial and not overflowed:
                    overflowed = True
                    await self._compaction.recover_overflow(tid, step, err)
                    attempt += 1  # rebuild the same step from the compacted history
                    continue
                if not is_retryable(err) or attempt > self.ctx.retry.max_retries:
                    raise
                if partial:
                    self._keep_partial(tid, message_id, partial, err, continuation=True)
                    message_id = new_message_id()
                attempt += 1
                await self._schedule_retry(tid, step, attempt, err)
                continue
            return message

    async def _attempt(
        self, tid: str, step: int, attempt: int, message_id: str, partial: list[str]
    ) -> Message:
        ctx = self.ctx
        sections = self._sections(attempt)  # syncs instructions first: a change lands in history
        history = self._history()
        if await self._compaction.before_request(tid, step, sections):
            sections = self._sections(attempt)  # the boundary started a new instruction epoch
            history = self._history()
        self._check_interrupt()
        request = build_request(sections, history, ctx.provider.name, self._wire)
        digest = request_digest(ctx.provider, request)
        receipt = make_receipt(
            sections, history, digest, receipt_id=f"rcp_{secrets.token_hex(8)}", turn_id=tid,
            step=step, attempt=attempt, model=ctx.model_spec or ctx.provider.model,
        )  # fmt: skip
        fresh = [s for s in sections if s.digest not in self._stored_sections]
        crash_point("receipt.before")
        self._append([receipt], section_blobs(fresh))
        crash_point("receipt.after")
        self._stored_sections.update(s.digest for s in fresh)
        self._live("step", step=step, attempt=attempt)
        finish = await self._stream(request, partial)
        message = finish.message.model_copy(
            update={
                "id": message_id,
                "metadata": {"turn_id": tid, "step": step, "model": ctx.provider.model},
            }
        )
        self._final_text = message.text()
        runs_tools = finish.reason != "content_filter"
        events = self._reply_events(tid, message, finish.usage)
        if runs_tools and self._hold_reply(message):
            self._held = [*events, *started_events(message)]
        else:
            self._append([*events, *(started_events(message) if runs_tools else [])])
            crash_point("reply.saved")
        self._compaction.observe(finish.usage.input_tokens, sections)
        if finish.reason == "content_filter":
            raise ContentFilterError("the provider stopped the reply with a content filter")
        return message

    def _history(self) -> list[Message]:
        """Active history (after the newest compaction boundary), read incrementally."""
        return self._compaction.messages()

    def _sections(self, attempt: int) -> list[Section]:
        ctx = self.ctx
        sections = [Section("system.agent", f"agent:{ctx.agent.name}", ctx.agent.system_prompt)]
        base = self._instructions(ctx.claim, self._compaction.generation)
        sections += [Section(f"system.instructions.{key}", key, text) for key, text in base.values]
        if self._work is None:  # read once: after that only this runner's tool steps change it
            self._work = ctx.store.work_state(self.sid)
        work = render_work_state(self._work)
        if work:
            sections.append(Section("system.runtime.work_state", "store", work))
        if self._tools_section is None:  # the agent's tools are fixed for the runner's life
            specs = [tool_spec(ctx.tools[name]) for name in ctx.agent.tools if name in ctx.tools]
            self._tools_section = tools_section(specs, f"agent:{ctx.agent.name}")
        sections.append(self._tools_section)
        sections.append(params_section(ctx.provider.model, ctx.provider.max_output_tokens, attempt))
        return sections

    def _reply_events(self, tid: str, message: Message, usage: Usage) -> list[SessionEvent]:
        """The reply's events: the message, its usage, and the clearing of a pending retry.

        They commit with the calls' `tool.started` before any tool runs (invariant 6), or, when
        every call is read-only, with the calls' results (`_hold_reply`)."""
        cost = cost_usd(
            self.ctx.model_spec or self.ctx.provider.model, usage.input_tokens, usage.output_tokens
        )
        self._usage = Usage(
            self._usage.input_tokens + usage.input_tokens,
            self._usage.output_tokens + usage.output_tokens,
        )
        events: list[SessionEvent] = [
            MessageAdded(message=message, turn_id=tid),
            UsageRecorded(
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost_usd=cost
            ),
        ]
        if self._retry_pending:  # known from the step's start and from `_schedule_retry`
            events.append(RetryCleared())
        self._retry_pending = False
        return events

    def _hold_reply(self, message: Message) -> bool:
        """Whether the reply may wait for its calls' results to commit with them: it has calls
        and each names a read-only tool (or none the agent has, which answers with an error).
        Such a call changes nothing outside the session, so there is nothing to protect by
        making it durable first (invariant 6); a crash before the commit loses the reply, as a
        crash mid-stream does, and the step is asked again. One commit instead of two."""
        calls = message.tool_calls()
        tools = self.ctx.tools
        return bool(calls) and all(c.name not in tools or tools[c.name].read_only for c in calls)

    async def _stream(self, request: object, partial: list[str]) -> Finish:
        stream_task = asyncio.ensure_future(self._consume(request, partial))
        interrupt_task = asyncio.ensure_future(self.ctx.interrupt.wait())
        try:
            done, _ = await asyncio.wait(
                {stream_task, interrupt_task}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            interrupt_task.cancel()
        if stream_task not in done:
            stream_task.cancel()
            await asyncio.gather(stream_task, return_exceptions=True)
            raise Interrupted
        return stream_task.result()

    async def _consume(self, request: object, partial: list[str]) -> Finish:
        async for event in self.ctx.provider.stream(request):  # type: ignore[arg-type]
            if isinstance(event, TextDelta):
                crash_point("stream.delta")
                partial.append(event.text)
                self._live("text", text=event.text)
            elif isinstance(event, ReasoningDelta):
                self._live("reasoning", text=event.text)
            elif isinstance(event, ToolCallDelta):
                self._live(
                    "tool_input",
                    call_id=event.call_id,
                    name=event.name,
                    json=event.input_json_fragment,
                )
            elif isinstance(event, Finish):
                return event
        from ..errors import IncompleteStreamError

        raise IncompleteStreamError("the provider stream ended without a finish")

    def _keep_partial(
        self,
        tid: str,
        message_id: str,
        partial: list[str],
        err: ProviderError,
        continuation: bool = False,
    ) -> None:
        """Persist streamed text an error cut off; with `continuation`, ask the model to go on."""
        if not partial:
            return
        kept = Message(
            id=message_id, role="assistant", blocks=(TextBlock(text="".join(partial)),),
            metadata={"turn_id": tid, "partial": True, "error_kind": err.kind},
        )  # fmt: skip
        events: list[SessionEvent] = [MessageAdded(message=kept, turn_id=tid)]
        if continuation:
            origin = TextOrigin(kind="event", source="wakeful")
            note = Message(role="user", blocks=(TextBlock(text=CONTINUE_AFTER_CUT, origin=origin),))
            events.append(MessageAdded(message=note, turn_id=tid))
        self._append(events)

    # -- retry -------------------------------------------------------------------------------

    async def _schedule_retry(self, tid: str, step: int, attempt: int, err: ProviderError) -> None:
        delay = backoff_ms(attempt - 1, self.ctx.retry, err.retry_after_ms, self.ctx.rng)
        deadline = self.ctx.clock.now_ms() + delay
        self._retry_pending = True
        self._append([
            RetryScheduled(
                turn_id=tid, step=step, attempt=attempt, deadline_ms=deadline,
                error_kind=err.kind, error=str(err),
            )
        ])  # fmt: skip
        self._live("retry", attempt=attempt, delay_ms=delay, error_kind=err.kind)
        crash_point("retry.wait")
        await self._wait_until(deadline)

    async def _wait_until(self, deadline_ms: int) -> None:
        """Wait for a durable deadline; new pending input or an interrupt cuts it short."""
        poll_s = self.ctx.retry.poll_interval_ms / 1000
        while (left := deadline_ms - self.ctx.clock.now_ms()) > 0:
            self._check_interrupt()
            if any(i.delivery == "steer" for i in self.ctx.store.pending(self.sid)):
                return
            await self.ctx.sleep(min(poll_s, left / 1000))

    # -- tools -------------------------------------------------------------------------------

    async def _tools(self, tid: str, message: Message) -> None:
        ctx = self.ctx
        await run_tools(
            message, tools=ctx.tools, tool_context=ctx.tool_context, policy=ctx.policy, ask=ctx.ask,
            append=self._append, live=self._live, interrupt=ctx.interrupt, turn_id=tid,
        )  # fmt: skip
        self._check_interrupt()
