"""One turn: drive promoted input to a terminal outcome, step by step.

Each step reads what is new in its history, assembles the prompt, persists its receipt
*before* the request is sent (invariant 7), streams the reply (deltas go to live listeners
only), persists the assistant message, persists every tool call before it runs (invariant 6),
and publishes tool outcomes in call order. Retries are durable (invariant 9) and every exit
path writes a `turn.ended` (invariant 10). All durable state goes through the turn's
`SessionPort` (fenced by the driver's claim, invariant 5); the runner owns its active-history
view and calls compaction as a collaborator. Tool results, whose side effects already
happened, are saved through transient store faults (`_save_results`), with the claim kept. A
final reply is held and commits with the steers that arrived while it streamed (one
transaction), or with the turn's end. After a read-only tool step the next step's first attempt
is built ahead and its receipt written by the step boundary's transaction when nothing is
delivered there (`_build_ahead`): one write per such step.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import JsonValue

from ..errors import (
    ClaimLostError,
    ContentFilterError,
    ContextOverflowError,
    NotFoundError,
    ProviderError,
    StepLimitError,
    StoreError,
    WakefulError,
)
from ..events import (
    ApprovalDecided,
    ApprovalRequested,
    Decision,
    MessageAdded,
    Outcome,
    ReceiptRecorded,
    RetryCleared,
    RetryScheduled,
    SessionEvent,
    TurnEnded,
    TurnStarted,
    WorkStateUpdated,
)
from ..instructions import Baseline
from ..messages import (
    Message,
    Repair,
    TextBlock,
    TextOrigin,
    WireBuilder,
    new_message_id,
    shared_prefix,
)
from ..providers import (
    Finish,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageReport,
)
from ..store import Delivered, InboxItem, Outage, blob_digest, is_transient, media_refs
from ._aborted import Streamed, aborted_events
from ._active import ActiveHistory
from ._approvals import AwaitingApproval, preview
from ._compaction import IDLE_REASON, CompactionResult, Compactor
from ._context import Ask, AskResult, Interrupted, RunContext, TurnResult
from ._crashpoints import crash_point
from ._live import LiveKind
from ._media import MediaResolver
from ._port import SessionPort
from ._pricing import add_usage, usage_event
from ._prompt import (
    ReceiptChain,
    Section,
    build_request,
    make_receipt,
    params_section,
    request_digest,
    section_blobs,
    tools_section,
)
from ._retry import backoff_ms, error_kind, is_retryable, terminal_outcome
from ._stream import stream_to_finish
from ._tool_step import run_tools, started_events
from ._work_state import WORK_STATE_SECTION, render_work_state
from .tools import permission_key, tool_spec

log = logging.getLogger("wakeful.runner")
T = TypeVar("T")

CONTINUE_AFTER_CUT = (
    "Your previous reply was cut off before it finished (the stream ended early). "
    "Continue from where it stopped; do not repeat what you already said."
)


@dataclass(frozen=True, slots=True)
class _Prepared:
    """An attempt's request and receipt, built before the receipt is written (`_prepare`).

    `fresh`: built ahead of a step boundary (`_build_ahead`), the held messages the boundary
    writes, which end `history` (the history the request carries)."""

    sections: list[Section]
    history: list[Message]
    request: ModelRequest
    receipt: ReceiptRecorded
    fresh: tuple[Message, ...] = ()


class TurnRunner:
    """Runs turns of one session under one `RunContext`, through the session's port."""

    def __init__(
        self, ctx: RunContext, port: SessionPort, receipts: ReceiptChain | None = None
    ) -> None:
        """`receipts`: the chain of an earlier runner of the session in this process (its
        turns' receipts then extend each other's); none: this runner's first lists every id."""
        self.ctx = ctx
        self.port = port
        self.sid = port.session_id
        self._usage = Usage(0, 0)
        self._final_text = ""
        self._truncated = False  # the newest reply was cut by the output limit
        self._history = ActiveHistory(port)  # the runner's view; compaction reads it
        self._receipts = receipts if receipts is not None else ReceiptChain()
        self._compaction = Compactor(ctx, port, self._history, self._receipts)
        self._retry_pending = False  # a retry.scheduled not yet cleared by a recorded reply
        self._retry_read = False  # the stored retry state was read (at the first step)
        self._wire = WireBuilder()  # to_wire, linear in what each step added
        self._repairs: set[tuple[str, str | None, int]] = set()  # pairing repairs published
        self._tools_section: Section | None = None
        self._work: dict[str, JsonValue] | None = None  # the session's work state, once read
        self._grants: set[str] = set()  # tools allowed `always` in this session (read at start)
        self._streamed = Streamed()  # the current attempt's reasoning and reported usage
        self._step_count = 0  # steps begun in the current turn (`TurnResult.steps`)
        self._blobs: dict[str, bytes] = {}  # media blobs read through the port, by digest
        self._scanned: set[str] = set()  # messages whose media refs were read
        self._scanned_history: tuple[Message, ...] = ()  # the history `_resolved` last read
        self._step_held = False  # the held events are a read-only tool step, not a final reply
        self._media = MediaResolver(self._blob)  # media refs, resolved for the wire
        self._receipt_id: str | None = None  # the current attempt's receipt
        self._ahead: _Prepared | None = None  # the next attempt, its receipt already written

    # -- plumbing -------------------------------------------------------------------------

    async def _commit(
        self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes] | None = None
    ) -> None:
        """Commit `events` (fenced) through the port, after a held reply if there is one."""
        await self.port.commit(events, blobs)
        self._committed(events)

    def _committed(self, events: Sequence[SessionEvent]) -> None:
        """Keep the work-state copy what the store now holds after `events` committed."""
        if self._work is not None:
            for event in events:
                if isinstance(event, WorkStateUpdated):
                    self._work[event.kind] = event.value

    def _live(self, kind: LiveKind, **data: JsonValue) -> None:
        self.port.publish(kind, data)

    def _check_interrupt(self) -> None:
        if self.ctx.interrupt.is_set():
            raise Interrupted

    # -- the turn -------------------------------------------------------------------------

    async def run(
        self, input_ids: Sequence[str] = (), turn_id: str | None = None, *, decisions: bool = False
    ) -> TurnResult:
        """Drive the turn to a terminal outcome; resume `turn_id` when given (after a crash).

        `decisions`: the turn was started by approval decisions alone; with no decided step to
        run it ends at once, without asking the model anything.
        """
        tid = turn_id or f"turn_{secrets.token_hex(8)}"
        self._ahead = None
        if turn_id is None:
            await self._commit([TurnStarted(turn_id=tid, input_ids=tuple(input_ids))])
        self._step_count = 0  # every step begun, whatever ends the turn
        self._live("turn_start", turn_id=tid, input_ids=list(input_ids), agent=self.ctx.agent.name)
        try:
            await self._steps(tid, decisions)
            crash_point("turn.ending")
            return await self._end(tid, "completed", self._step_count)
        except AwaitingApproval as err:
            return await self._end(tid, "paused", self._step_count, str(err), "awaiting_approval")
        except Interrupted:
            if self.ctx.shutting_down():
                raise
            return await self._end(tid, "interrupted", self._step_count, "interrupted by the user")
        except ClaimLostError:
            raise
        except WakefulError as err:
            outcome = terminal_outcome(err)
            return await self._end(tid, outcome, self._step_count, str(err), error_kind(err))

    async def compact(self, item: InboxItem) -> CompactionResult:
        """Run the compaction `item` asks for between turns (no turn open), given the sections
        the next step would send when it needs them: a summary asks with them first (the
        provider's prompt cache), an idle compaction also estimates them."""
        sections = await self._summary_sections(idle=item.payload.get("reason") == IDLE_REASON)
        return await self._compaction.control(item, in_turn=False, sections=sections)

    async def _summary_sections(self, *, idle: bool = False) -> list[Section] | None:
        """The sections the next step would send (read as a step reads them: instructions
        synced) when a compaction's summary asks with them first (the provider's prompt cache)
        or an `idle` compaction estimates them; None when neither needs them."""
        if self._compaction.reuses_cache or idle:
            return await self._sections(1)
        return None

    async def settle(
        self,
        turn_id: str,
        outcome: Outcome,
        final_text: str = "",
        error: str | None = None,
        kind: str | None = None,
    ) -> TurnResult:
        """End an open turn without another step (recovery found it finished, or gave up)."""
        self._final_text = final_text
        return await self._end(turn_id, outcome, 0, error, kind)

    async def _end(
        self,
        tid: str,
        outcome: Outcome,
        steps: int,
        error: str | None = None,
        kind: str | None = None,
    ) -> TurnResult:
        cut = self._truncated and outcome == "completed"
        end = TurnEnded(turn_id=tid, outcome=outcome, error=error, error_kind=kind, truncated=cut)
        result = TurnResult(tid, outcome, steps, self._usage, error, kind, self._final_text, cut)
        # After a held reply, whoever writes the end; a store fault is waited out (the turn
        # did end so: a dropped connection must not turn `completed` into `failed`).
        await self._waited_out("ending the turn", lambda _retry: self.port.end(end, result))
        self._live("turn_end", outcome=outcome, error=error, truncated=cut)
        return result

    async def _steps(self, tid: str, decisions: bool = False) -> int:
        allowance = self.ctx.agent.max_steps
        step = 0
        if not await self._decided_step(tid) and decisions:
            return 0
        while True:
            self._check_interrupt()
            if step > 0:
                ahead = await self._build_ahead(tid, step + 1) if allowance > 0 else None
                if await self._promote_steers(wait_out=True, ahead=ahead):
                    allowance = self.ctx.agent.max_steps
            if allowance <= 0:
                raise StepLimitError(
                    f"agent {self.ctx.agent.name} used its {self.ctx.agent.max_steps} steps"
                )
            step += 1
            self._step_count = step
            allowance -= 1
            message, steered = await self._attempts(tid, step)
            if message.tool_calls():
                await self._tools(tid, message)
                continue
            if steered:  # the final reply was written with steers that arrived meanwhile
                allowance = self.ctx.agent.max_steps
                continue
            return step

    async def _promote_steers(
        self, *, wait_out: bool = False, ahead: _Prepared | None = None
    ) -> bool:
        # An instruction change goes before the steers it precedes (003), in their transaction;
        # a held final reply goes first of all. `wait_out`: between two steps, a store fault is
        # waited out (`_waited_out`); a held final reply's failed write is the caller's to retry.
        # `ahead`: the next step's first attempt, built ahead (`_build_ahead`): its receipt is
        # written last in the same transaction when nothing is delivered (one write per step).
        final = self.port.holding and not self._step_held  # a final reply, not a tool step
        then: list[SessionEvent] = [] if ahead is None else [ahead.receipt]
        blobs = {} if ahead is None else section_blobs(ahead.sections)

        def promote(_retry: bool) -> Awaitable[tuple[list[Delivered], bool]]:
            return self.port.promote_steers_then(self._compaction.generation, then, blobs)

        if ahead is not None:
            crash_point("receipt.before")
        delivered, wrote = await (
            self._waited_out("delivering steers", promote) if wait_out else promote(False)
        )
        self._step_held = False
        if final:
            crash_point("reply.saved")
        if wrote and ahead is not None:  # the next attempt uses it (`_attempt`)
            self._receipts.committed(ahead.receipt, ahead.history)
            self._history.expect(ahead.fresh)
            self._ahead = ahead
            crash_point("receipt.after")
        for d in delivered:
            if d.message is not None:
                self._live("input_delivered", input_id=d.item.input_id, delivery="steer")
        for d in delivered:  # a manual compaction request runs at this step boundary
            if d.message is None and d.item.kind == "compaction":
                sections = await self._summary_sections()
                await self._compaction.control(d.item, in_turn=True, sections=sections)
                self._check_interrupt()
        return any(d.message is not None for d in delivered)

    # -- one step, several physical attempts -----------------------------------------------

    async def _attempts(self, tid: str, step: int) -> tuple[Message, bool]:
        """The step's reply, after its retries; with whether steers were delivered with a final
        reply (which is written here, so that store contention on that write is retried like a
        failed request: `_schedule_retry`)."""
        # A retry left by an earlier driver can only be found before this runner's first
        # step; after it, every retry state is one this runner wrote and tracks itself.
        state = None if self._retry_read else await self.port.retry_state()
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
            final = False  # the attempt's final reply is held, its write not yet done
            try:
                message = await self._attempt(tid, step, attempt, message_id, partial)
                final = not message.tool_calls() and self.port.holding
                steered = await self._promote_steers() if final else False
            except Interrupted:
                if not final:  # cut before its reply was recorded
                    await self._keep_aborted(tid, step, message_id, partial)
                raise
            except ProviderError as err:
                if final:  # from a compaction at the boundary after the recorded reply
                    raise
                if isinstance(err, ContentFilterError):
                    await self._keep_partial(tid, message_id, partial, err)
                    raise
                if isinstance(err, ContextOverflowError) and not partial and not overflowed:
                    overflowed = True
                    await self._compaction.recover_overflow(tid, step, err)
                    attempt += 1  # rebuild the same step from the compacted history
                    continue
                if not is_retryable(err) or attempt > self.ctx.retry.max_retries:
                    raise
                if partial:
                    await self._keep_partial(tid, message_id, partial, err, continuation=True)
                    message_id = new_message_id()
                attempt += 1
                await self._schedule_retry(tid, step, attempt, err)
                continue
            except StoreError as err:  # contention (000): nothing of the reply is durable yet
                if not is_transient(err) or attempt > self.ctx.retry.max_retries:
                    raise
                if final and self.port.holding:  # the final reply's write failed: ask again
                    self.port.drop_held()
                elif final:  # the reply is durable (a later write failed): not a retry
                    raise
                attempt += 1
                await self._schedule_retry(tid, step, attempt, err)
                continue
            return message, steered

    async def _attempt(
        self, tid: str, step: int, attempt: int, message_id: str, partial: list[str]
    ) -> Message:
        ctx = self.ctx
        self._streamed = Streamed()  # an interrupt before the stream keeps nothing of before
        self._receipt_id = None
        prepared = await self._written_ahead(tid, step, attempt)
        written = prepared is not None  # its receipt went with the step boundary's write
        if prepared is None:
            # instructions first: a change lands in history
            sections = await self._sections(attempt)
            history = await self._messages()
            if await self._compaction.before_request(tid, step, sections):
                sections = await self._sections(attempt)  # the boundary started a new epoch
                history = await self._messages()
            self._check_interrupt()
            prepared = await self._prepare(tid, step, attempt, sections, history)
        else:
            self._check_interrupt()
        sections, request, receipt = prepared.sections, prepared.request, prepared.receipt
        self._live("step_start", turn_id=tid, step=step, attempt=attempt,
                   model=ctx.provider.model, provider=ctx.provider.name)  # fmt: skip
        if not written:
            ids = ctx.trace_ids(self.sid) if ctx.trace_ids is not None else None
            if ids is not None:  # the step's span, opened by `step_start`
                receipt = receipt.model_copy(update={"trace_id": ids[0], "span_id": ids[1]})
            crash_point("receipt.before")
            await self._commit([receipt], section_blobs(sections))  # the port stores each once
            self._receipts.committed(receipt, prepared.history)
            crash_point("receipt.after")
        self._live("step", step=step, attempt=attempt)
        self._receipt_id = receipt.receipt_id
        finish = await self._stream(request, partial)
        self._step_end(tid, step, attempt, finish)
        meta: dict[str, JsonValue] = {"turn_id": tid, "step": step, "model": ctx.provider.model}
        self._truncated = finish.reason == "length"
        if self._truncated:  # stopped at the output limit: shown as cut, never silently whole
            meta["truncated"] = True
        message = finish.message.model_copy(update={"id": message_id, "metadata": meta})
        self._final_text = message.text()
        runs_tools = finish.reason != "content_filter"
        events = self._reply_events(tid, message, finish.usage, receipt.receipt_id)
        waiting = self._needs_approval(message) if runs_tools and ctx.ask is None else []
        if waiting:  # nobody here can decide: the calls wait, durably, instead of starting
            await self._commit([*events, *waiting])
            crash_point("approval.requested")
            raise AwaitingApproval(tuple(waiting))
        if runs_tools and self._hold_reply(message):
            self.port.hold([*events, *started_events(message)])
        elif runs_tools and not message.tool_calls():  # a final reply: see `_promote_steers`
            self.port.hold(events)
        else:
            await self._commit([*events, *(started_events(message) if runs_tools else [])])
            crash_point("reply.saved")
        self._compaction.observe(finish.usage.input_tokens, sections)
        if finish.reason == "content_filter":
            raise ContentFilterError("the provider stopped the reply with a content filter")
        return message

    async def _prepare(
        self,
        tid: str,
        step: int,
        attempt: int,
        sections: list[Section],
        history: list[Message],
        fresh: tuple[Message, ...] = (),
    ) -> _Prepared:
        """The attempt's request from `sections` and `history`, and its receipt (not written;
        without the step span's trace ids, which exist once `step_start` is published)."""
        ctx = self.ctx
        request = build_request(
            sections, await self._resolved(history), ctx.provider.name, self._wire_repaired
        )
        receipt = make_receipt(
            sections, history, request_digest(ctx.provider, request),
            receipt_id=f"rcp_{secrets.token_hex(8)}", turn_id=tid, step=step, attempt=attempt,
            model=ctx.model_spec or ctx.provider.model, base=self._receipts.last,
        )  # fmt: skip
        return _Prepared(sections, history, request, receipt, fresh)

    async def _build_ahead(self, tid: str, step: int) -> _Prepared | None:
        """The first attempt of `step`, built before the boundary that ends a read-only tool
        step, for that boundary to write its receipt (`_promote_steers`): exactly as `_attempt`
        would build it after the boundary when nothing is delivered there. None when it could
        differ or cannot be known without the store: no read-only step is held as the active
        history last read left it (its reply first among the held events), an interrupt is
        set, an instruction source changed (a delta is due), compaction would run before the
        request, or a tracing SDK records spans (the receipt names the step's span, opened by
        `step_start`)."""
        held = self.port.held
        if not (self._step_held and held and isinstance(held[0], MessageAdded)):
            return None
        if held[0].message.role != "assistant" or self.ctx.interrupt.is_set():
            return None
        if self.ctx.trace_ids is not None and self.ctx.trace_ids(self.sid) is not None:
            return None
        base = self.port.instructions_unchanged(self._compaction.generation)
        if base is None:
            return None
        sections = await self._sections(1, base)
        fresh = tuple(e.message for e in held if isinstance(e, MessageAdded))
        if await self._compaction.due(sections, fresh):
            return None
        history = [*self._history.messages(), *fresh]
        return await self._prepare(tid, step, 1, sections, history, fresh)

    async def _written_ahead(self, tid: str, step: int, attempt: int) -> _Prepared | None:
        """The attempt built ahead whose receipt the step boundary wrote, when it is this one
        and the active history now read is, message for message (by identity: `expect`), the
        one its request carries. A mismatch (which a correct port never produces) leaves that
        receipt without a request, as an interrupt after `receipt.after` does, and the attempt
        is built again."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        receipt = ahead.receipt
        if (receipt.turn_id, receipt.step, receipt.attempt) != (tid, step, attempt):
            return None
        history = await self._messages()
        if len(history) == len(ahead.history) == shared_prefix(history, ahead.history):
            return ahead
        log.warning("the receipt %s written ahead does not match %s", receipt.receipt_id, self.sid)
        return None

    async def _resolved(self, history: Sequence[Message]) -> list[Message]:
        """`history` with media refs resolved for the wire (`_media.py`): the blobs the messages
        refer to are read through the port first, each once per runner."""
        kept = shared_prefix(self._scanned_history, history)  # in C; only what is new is read
        for message in history[kept:]:
            if message.id not in self._scanned:
                self._scanned.add(message.id)
                for ref in media_refs(message):
                    if ref not in self._blobs and (data := await self.port.blob(ref)) is not None:
                        self._blobs[ref] = data
        self._scanned_history = tuple(history)
        return self._media(history)

    def _blob(self, digest: str) -> bytes:
        try:
            return self._blobs[digest]
        except KeyError:
            raise NotFoundError(f"no blob {digest}") from None

    def _wire_repaired(self, messages: Sequence[Message], provider: str) -> list[Message]:
        """The wire copy of a request; each pairing repair is published (once per runner)."""

        def on_repair(repair: Repair) -> None:
            # A call's repair is the same repair at any position (a compaction moves it).
            key = (repair.kind, repair.call_id, repair.index if repair.call_id is None else -1)
            if key not in self._repairs:
                self._repairs.add(key)
                self._live("pairing_repair", repair=repair.kind, call_id=repair.call_id,
                           index=repair.index)  # fmt: skip

        return self._wire(messages, provider, on_repair=on_repair)

    def _step_end(self, tid: str, step: int, attempt: int, finish: Finish) -> None:
        usage = finish.usage
        self._live(
            "step_end", turn_id=tid, step=step, attempt=attempt, finish_reason=finish.reason,
            model=self.ctx.provider.model, input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens, cached_tokens=usage.cache_read_tokens,
            tool_calls=len(finish.message.tool_calls()),
        )  # fmt: skip

    async def _messages(self) -> list[Message]:
        """Active history (after the newest compaction boundary), read incrementally."""
        await self._history.refresh()
        return self._history.messages()

    async def _sections(self, attempt: int, base: Baseline | None = None) -> list[Section]:
        """The sections of an attempt's request; `base`: the instruction baseline, when the
        caller has it (else it is read, after a delta when a source changed)."""
        ctx = self.ctx
        sections = [Section("system.agent", f"agent:{ctx.agent.name}", ctx.agent.system_prompt)]
        if base is None:
            base = await self.port.instructions(self._compaction.generation)
        sections += [Section(f"system.instructions.{key}", key, text) for key, text in base.values]
        if self._work is None:  # read once: after that only this runner's tool steps change it
            self._work = await self.port.work_state()
        work = render_work_state(self._work)
        if work:  # after the history: a todo update must not change the cached prefix
            sections.append(Section(WORK_STATE_SECTION, "store", work))
        if self._tools_section is None:  # the agent's tools are fixed for the runner's life
            specs = [tool_spec(ctx.tools[name]) for name in ctx.agent.tools if name in ctx.tools]
            self._tools_section = tools_section(specs, f"agent:{ctx.agent.name}")
        sections.append(self._tools_section)
        tail = await self._compaction.tail_section()
        if tail is not None:  # the `tail` strategy's hide point: older tool results hidden
            sections.append(tail)
        sections.append(
            params_section(ctx.provider.model, ctx.provider.max_output_tokens, attempt, self.sid)
        )
        return sections

    def _reply_events(
        self, tid: str, message: Message, usage: Usage, receipt_id: str | None
    ) -> list[SessionEvent]:
        """The reply's events: the message, its usage, and the clearing of a pending retry.

        They commit with the calls' `tool.started` before any tool runs (invariant 6), or, when
        every call is read-only, with the calls' results (`_hold_reply`)."""
        self._usage = add_usage(self._usage, usage)
        events: list[SessionEvent] = [
            MessageAdded(message=message, turn_id=tid),
            usage_event(self.ctx.model_spec or self.ctx.provider.model, usage, receipt_id),
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

    async def _stream(self, request: ModelRequest, partial: list[str]) -> Finish:
        """Stream the step's reply: deltas published live, streamed text kept in `partial`."""

        def on_delta(event: StreamEvent) -> None:
            if isinstance(event, TextDelta):
                crash_point("stream.delta")
                partial.append(event.text)
                self._live("text", text=event.text)
            elif isinstance(event, ReasoningDelta):
                self._streamed.reasoning.append(event.text)
                self._live("reasoning", text=event.text)
            elif isinstance(event, UsageReport):
                self._streamed.usage = event.usage
            elif isinstance(event, ToolCallDelta):
                self._live(
                    "tool_input",
                    call_id=event.call_id,
                    name=event.name,
                    json=event.input_json_fragment,
                )

        finish = await stream_to_finish(self.ctx.provider, request, self.ctx.interrupt, on_delta)
        if finish is None:
            raise Interrupted
        return finish

    async def _keep_aborted(self, tid: str, step: int, message_id: str, partial: list[str]) -> None:
        """Keep what an interrupted attempt streamed as an aborted message (`_aborted.py`). On a
        shutdown a store fault is logged, not raised: the turn stays open for the next driver
        and the step is asked again either way."""
        shutdown = self.ctx.shutting_down()
        events = aborted_events(
            turn_id=tid, step=step, message_id=message_id, text=partial, streamed=self._streamed,
            model=self.ctx.model_spec or self.ctx.provider.model, receipt_id=self._receipt_id,
            cause="shutdown" if shutdown else "interrupt",
        )  # fmt: skip
        self._streamed = Streamed()
        if not events:
            return
        try:
            await self._commit(events)
        except StoreError as err:
            if not shutdown or isinstance(err, ClaimLostError):
                raise
            log.warning("could not keep the output cut short in %s: %s", self.sid, err)

    async def _keep_partial(
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
        await self._commit(events)

    # -- retry -------------------------------------------------------------------------------

    async def _schedule_retry(
        self, tid: str, step: int, attempt: int, err: ProviderError | StoreError
    ) -> None:
        """Persist the retry's deadline, then wait for it. For store contention the deadline
        may not be writable either: then it is logged and waited for in memory (a restarted
        driver finds no retry state and asks the step again at once)."""
        after = err.retry_after_ms if isinstance(err, ProviderError) else None
        delay = backoff_ms(attempt - 1, self.ctx.retry, after, self.ctx.rng)
        deadline = self.ctx.clock.now_ms() + delay
        kind = error_kind(err)
        scheduled = RetryScheduled(
            turn_id=tid, step=step, attempt=attempt, deadline_ms=deadline, error_kind=kind,
            error=str(err),
        )  # fmt: skip
        try:
            await self._commit([scheduled])
            self._retry_pending = True
        except StoreError as fault:
            if isinstance(err, ProviderError) or not is_transient(fault):
                raise
            log.warning("retry of %s not durable (store still busy): %s", self.sid, fault)
        self._live("retry", attempt=attempt, delay_ms=delay, error_kind=kind)
        crash_point("retry.wait")
        await self._wait_until(deadline)

    async def _wait_until(self, deadline_ms: int) -> None:
        """Wait for a durable deadline; new pending input or an interrupt cuts it short."""
        poll_s = self.ctx.retry.poll_interval_ms / 1000
        while (left := deadline_ms - self.ctx.clock.now_ms()) > 0:
            self._check_interrupt()
            try:
                if any(i.delivery == "steer" for i in await self.port.pending()):
                    return
            except StoreError as err:  # only a hint: looked at again at the next poll
                if not is_transient(err):
                    raise
            await self.ctx.sleep(min(poll_s, left / 1000))

    # -- tools -------------------------------------------------------------------------------

    async def _tools(
        self, tid: str, message: Message, approved: dict[str, bool] | None = None
    ) -> None:
        ctx = self.ctx
        if approved is None:
            approved = await self._ask(message)
        await run_tools(
            message, tools=ctx.tools, tool_context=ctx.tool_context, policy=ctx.policy, ask=None,
            save=self._save_results, live=self._live, interrupt=ctx.interrupt, turn_id=tid,
            approved=approved,  # every `ask` call was decided above (or waits, or is declined)
            now_ms=ctx.clock.now_ms,
        )  # fmt: skip
        self._check_interrupt()

    async def _save_results(
        self, events: Sequence[SessionEvent], blobs: Sequence[bytes] = ()
    ) -> None:
        """Commit a tool step's results: their side effects ran, so a store fault is waited out
        (`_waited_out`); a retry first looks whether an earlier try committed after all."""
        if self.port.holding and not blobs:
            # The reply is held (its calls are all read-only, `_hold_reply`): its results wait
            # with it for the step boundary's write, which comes next (`_promote_steers`). A
            # crash before it loses the step, as a crash during the calls does, and the step is
            # asked again: nothing outside the session changed. One commit per step fewer.
            self.port.hold(events)
            self._step_held = True
            self._committed(events)
            return
        stored = {blob_digest(b): b for b in blobs}

        async def save(retry: bool) -> None:
            await (self.port.recommit if retry else self.port.commit)(events, stored)

        await self._waited_out("saving tool results", save, crash="tool.saving")
        self._committed(events)

    async def _waited_out(
        self, what: str, call: Callable[[bool], Awaitable[T]], *, crash: str | None = None
    ) -> T:
        """`call(retry)` until it succeeds: a transient store fault (a lock held past the busy
        timeout, a lost connection, a full disk) is waited out, for as long as it lasts, with
        the claim kept (the lease keeper goes on renewing it); `retry` says an earlier try
        failed (it committed nothing: `StoreError.retryable`). For what must not be asked
        again: tool results (their side effects ran), the step boundary's delivery and the
        turn's end (a turn does not end `failed` because a connection dropped there). The backoff
        doubles up to `Outage`'s bound; the outage is logged when it begins and ends.

        A lost claim (`ClaimLostError`), any other store error, or a shutdown ends the wait by
        raising: the calls stay `running` and the next drain's recovery settles them.
        """
        outage = Outage(log, f"{what} of {self.sid}")
        retry = False
        while True:
            try:
                result = await call(retry)
            except StoreError as err:
                if not is_transient(err):
                    raise
                delay = outage.failed(err)
            else:
                outage.ok()
                return result
            if self.ctx.shutting_down():
                raise Interrupted
            if crash is not None:
                crash_point(crash)
            await self.ctx.sleep(delay)
            retry = True

    # -- approvals ---------------------------------------------------------------------------

    def _needs_approval(self, message: Message) -> list[ApprovalRequested]:
        """The calls of `message` whose permission is `ask` (valid input, a known tool, not
        allowed `always` in this session): what someone must decide before they run."""
        out: list[ApprovalRequested] = []
        for call in message.tool_calls():
            tool = self.ctx.tools.get(call.name)
            if tool is None or self.ctx.policy.decide(permission_key(tool, call.name)) != "ask":
                continue
            if call.name in self._grants:
                continue
            try:
                tool.input_model.model_validate(call.input)
            except ValueError:  # the call fails anyway: nobody is asked to approve it
                continue
            shown = preview(call.name, dict(call.input), self.ctx.tool_context.workspace)
            out.append(
                ApprovalRequested(
                    call_id=call.id, message_id=message.id, name=call.name,
                    input=dict(call.input), preview=shown,
                )
            )  # fmt: skip
        return out

    async def _ask(self, message: Message) -> dict[str, bool]:
        """Calls allowed `always` in this session run; ask the interactive callback about each
        other call needing approval, one at a time; the decisions are durable
        (`approval.decided`) before any call runs."""
        ask = self.ctx.ask
        decided = {c.id: True for c in message.tool_calls() if c.name in self._grants}
        if ask is None:
            return decided
        events: list[SessionEvent] = []
        for request in self._needs_approval(message):
            if request.name in self._grants:  # an `always` given for an earlier call here
                decided[request.call_id] = True
                continue
            decision = await self._asked(ask, request)
            if decision == "always":
                self._grants.add(request.name)
            decided[request.call_id] = decision != "deny"
            events.append(
                ApprovalDecided(call_id=request.call_id, decision=decision, name=request.name)
            )
        if events:
            await self._commit(events)
        return decided

    async def _decided_step(self, tid: str) -> bool:
        """At the turn's start: read the session's grants and, when calls wait for approval,
        pause again (some are undecided) or run them as decided (the step the pause left).
        Returns whether it ran a step."""
        log = await self.port.approvals()
        self._grants = set(log.grants)
        step = log.step
        if step is None:
            return False
        if step.pending:
            raise AwaitingApproval(step.pending)
        message = next((m for m in await self._messages() if m.id == step.message_id), None)
        if message is None:  # not in the active history (cannot happen short of a bad log)
            message = await self.port.message(step.message_id)
        if message is None:
            raise NotFoundError(f"the message {step.message_id} awaiting approval is not stored")
        await self._commit(started_events(message))
        crash_point("approval.started")
        approved = {c.id: True for c in message.tool_calls() if c.name in self._grants}
        approved |= {cid: d != "deny" for cid, d in step.decisions.items()}
        await self._tools(tid, message, approved)
        return True

    async def _asked(
        self,
        ask: Ask,
        request: ApprovalRequested,
    ) -> Decision:
        """The callback's answer as a decision. An interrupt while asking (or before) denies:
        the step still publishes a result for every call, then the interrupt ends the turn."""
        if self.ctx.interrupt.is_set():
            return "deny"
        asking = asyncio.ensure_future(ask(request.name, dict(request.input)))
        waiter = asyncio.ensure_future(self.ctx.interrupt.wait())
        try:
            await asyncio.wait({asking, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not asking.done():
            asking.cancel()
            await asyncio.gather(asking, return_exceptions=True)
            return "deny"
        try:
            answer = asking.result()
        except Exception:  # a failing callback denies; it must not crash the turn
            return "deny"
        return _decision(answer)


def _decision(answer: AskResult) -> Decision:
    """An answer of the approval callback as a decision (anything unclear denies)."""
    if answer is True or answer == "allow":
        return "allow"
    if answer == "always":
        return "always"
    return "deny"
