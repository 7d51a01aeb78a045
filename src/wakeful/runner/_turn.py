"""One turn: drive promoted input to a terminal outcome, step by step.

Each step reads what is new in its history, assembles the prompt, persists its receipt
*before* the request is sent (invariant 7), streams the reply (deltas go to live listeners
only), persists the assistant message, persists every tool call before it runs (invariant 6),
and publishes tool outcomes in call order. Retries are durable (invariant 9) and every exit
path writes a `turn.ended` (invariant 10). All durable state goes through the turn's
`SessionPort` (fenced by the driver's claim, invariant 5); the runner owns its active-history
view and calls compaction as a collaborator.

The turn is a small state machine (`_turn_state.py`, with its diagram): `TurnState` is what the
turn knows, replaced at each transition, and each handler here runs one node (an attempt, a
retry's wait, the tools, a step boundary, a held final reply) and returns the next, so the
turn reads as the loop in `_steps`. A step's tool calls (decisions, running, results saved
through transient store faults with the claim kept) are `ToolCallsMixin` (`_turn_tools.py`).
What a step sends is built by `RequestBuilder` (`_request_builder.py`), also ahead of the
boundary that ends a read-only tool step, whose write then carries the next step's receipt.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import assert_never

from pydantic import JsonValue

from .._ids import new_turn_id
from ..errors import (
    ClaimLostError,
    ContentFilterError,
    ContextOverflowError,
    ProviderError,
    StepLimitError,
    StoreError,
    WakefulError,
)
from ..events import (
    Outcome,
    RetryScheduled,
    SessionEvent,
    TurnEnded,
    TurnStarted,
    WorkStateUpdated,
)
from ..messages import Message, new_message_id
from ..store import Delivered, InboxItem, is_transient
from ._aborted import Streamed
from ._active import ActiveHistory
from ._approvals import AwaitingApproval
from ._budget_gate import BUDGET_KIND, BudgetExceeded
from ._compaction import IDLE_REASON, CompactionResult, Compactor
from ._context import Interrupted, RunContext, TurnResult
from ._crashpoints import crash_point
from ._jobs import REPORT_PREFIX, reports_in, settled_jobs
from ._live import LiveKind
from ._loop_guard import LOOP_KIND, LoopDetected, LoopGuard
from ._model_call import ModelCall
from ._port import SessionPort
from ._prompt import ReceiptChain, Section, section_blobs
from ._request_builder import RequestBuilder
from ._retry import backoff_ms, error_kind, is_retryable, terminal_outcome
from ._spend_gate import check_spend, share_retry_after
from ._step_done import hosted_call_events, hosted_calls, step_done
from ._tool_retry import ToolRetries
from ._turn_state import (
    Attempt,
    Boundary,
    End,
    FinalReply,
    Node,
    Prepared,
    Retry,
    RunTools,
    TurnState,
)
from ._turn_tools import ToolCallsMixin
from ._waits import wait_until, waited_out

log = logging.getLogger("wakeful.runner")


class TurnRunner(ToolCallsMixin):
    """Runs turns of one session under one `RunContext`, through the session's port.

    What changes while a turn runs is one value, the turn's `TurnState`, replaced at each
    transition; the rest are its collaborators (the active history, compaction, the request
    builder and the receipt chain), which keep what they read.
    """

    def __init__(
        self, ctx: RunContext, port: SessionPort, receipts: ReceiptChain | None = None
    ) -> None:
        """`receipts`: the chain of an earlier runner of the session in this process (its
        turns' receipts then extend each other's); none: this runner's first lists every id."""
        self.ctx = ctx
        self.port = port
        self.sid = port.session_id
        self._history = ActiveHistory(port)  # the runner's view; compaction reads it
        self._receipts = receipts if receipts is not None else ReceiptChain()
        self._compaction = Compactor(ctx, port, self._history, self._receipts)
        self._requests = RequestBuilder(ctx, port, self._history, self._compaction, self._receipts)
        self._call = ModelCall(
            ctx, port, self._requests, self._receipts, self._compaction, self._commit
        )
        self._state = TurnState(turn_id="")  # no turn yet: `run` and `settle` start one
        self._open_step: int | None = None  # the step begun and not yet done (`_step_done`)
        self._hosted: list[dict[str, JsonValue]] = []  # the hosted calls of its reply
        self._guard = LoopGuard(ctx.loop_guard)
        self._tool_retries = ToolRetries()

    # -- the turn -------------------------------------------------------------------------

    async def run(
        self, input_ids: Sequence[str] = (), turn_id: str | None = None, *, decisions: bool = False
    ) -> TurnResult:
        """Drive the turn to a terminal outcome; resume `turn_id` when given (after a crash).

        `decisions`: the turn was started by approval decisions alone; with no decided step to
        run it ends at once, without asking the model anything.
        """
        tid = turn_id or new_turn_id()
        await self._resolve()
        if turn_id is None:
            await self._commit([TurnStarted(turn_id=tid, input_ids=tuple(input_ids))])
        self._state = TurnState(tid, allowance=self.ctx.agent.max_steps)
        self._guard = LoopGuard(self.ctx.loop_guard)  # counts this turn's calls only
        self._live("turn_start", turn_id=tid, input_ids=list(input_ids), agent=self.ctx.agent.name)
        try:
            await self._settle_jobs(await self._inputs(input_ids))
            completed = await self._steps(decisions)
            crash_point("turn.ending")
            return await self._end(completed)
        except AwaitingApproval as err:
            return await self._end(End("paused", str(err), "awaiting_approval"))
        except LoopDetected as err:
            return await self._end(End("paused", str(err), LOOP_KIND))
        except BudgetExceeded as err:
            return await self._end(End("paused", str(err), BUDGET_KIND))
        except Interrupted:
            if self.ctx.shutting_down():
                raise
            return await self._end(End("interrupted", "interrupted by the user"))
        except ClaimLostError:
            raise
        except WakefulError as err:
            return await self._end(End(terminal_outcome(err), str(err), error_kind(err)))

    async def compact(self, item: InboxItem) -> CompactionResult:
        """Run the compaction `item` asks for between turns (no turn open), given the sections
        the next step would send when it needs them: a summary asks with them first (the
        provider's prompt cache), an idle compaction also estimates them."""
        sections = await self._summary_sections(idle=item.payload.get("reason") == IDLE_REASON)
        return await self._compaction.control(item, in_turn=False, sections=sections)

    async def settle(
        self,
        turn_id: str,
        outcome: Outcome,
        final_text: str = "",
        error: str | None = None,
        kind: str | None = None,
    ) -> TurnResult:
        """End an open turn without another step (recovery found it finished, or gave up)."""
        self._state = TurnState(turn_id, final_text=final_text)
        return await self._end(End(outcome, error, kind))

    async def _end(self, end: End) -> TurnResult:
        """Write the turn's end (after anything held) and return its result."""
        state = self._state
        cut = state.truncated and end.outcome == "completed"
        ended = TurnEnded(
            turn_id=state.turn_id,
            outcome=end.outcome,
            error=end.error,
            error_kind=end.kind,
            truncated=cut,
        )
        result = TurnResult(
            state.turn_id,
            end.outcome,
            state.step,
            state.usage,
            end.error,
            end.kind,
            state.final_text,
            cut,
        )
        # After a held reply, whoever writes the end; a store fault is waited out (the turn
        # did end so: a dropped connection must not turn `completed` into `failed`).
        await waited_out(
            self.ctx, f"ending the turn of {self.sid}", lambda _retry: self.port.end(ended, result)
        )
        self._step_done(end.outcome == "completed", end.error)
        self._live("turn_end", outcome=end.outcome, error=end.error, truncated=cut)
        return result

    # -- the steps: each handler runs one node and returns the next -----------------------

    async def _steps(self, decisions: bool) -> End:
        """The turn's loop, until it completes (every other end is raised, and `run` ends the
        turn with the outcome the exception says)."""
        node = await self._opening(decisions)
        while not isinstance(node, End):
            node = await self._next(node)
        return node

    async def _next(self, node: Attempt | Retry | RunTools | Boundary | FinalReply) -> Node:
        """Run `node` by its handler; what it returns happens next."""
        if isinstance(node, Attempt):
            return await self._attempt(node)
        if isinstance(node, Retry):
            return await self._retry(node)
        if isinstance(node, RunTools):
            return await self._run_tools(node)
        if isinstance(node, Boundary):
            return await self._boundary(node)
        if isinstance(node, FinalReply):
            return await self._final_reply(node)
        assert_never(node)

    async def _opening(self, decisions: bool) -> Node:
        """The turn's start: a step left waiting for approvals runs first (or pauses again);
        a turn started by decisions alone with none to run ends. Then the first step, which
        resumes the retry an earlier driver scheduled in this turn (its deadline is durable)."""
        if not await self._decided_step() and decisions:
            return End("completed")
        self._check_interrupt()
        first = self._begin_step()
        stored = await self.port.retry_state()
        if stored is None:
            return first
        self._state = self._state.retrying()
        if stored.turn_id != self._state.turn_id:
            return first
        await wait_until(self.ctx, self.port, stored.deadline_ms)
        return replace(first, attempt=stored.attempt)

    def _begin_step(self, ahead: Prepared | None = None) -> Attempt:
        """The next step's first attempt (`ahead`: built before the boundary that wrote its
        receipt), once the allowance allows another step."""
        agent = self.ctx.agent
        if self._state.allowance <= 0:
            raise StepLimitError(f"agent {agent.name} used its {agent.max_steps} steps")
        self._state = self._state.begin_step()
        self._open_step, self._hosted = self._state.step, []
        return Attempt(ahead=ahead)

    def _step_done(self, ended: bool, error: str | None = None) -> None:
        """Publish the open step's one terminal event (`_step_done.py`), once."""
        if self._open_step is None:
            return
        step, self._open_step = self._open_step, None
        self.port.publish(
            "step_done", step_done(self._state.turn_id, step, ended, error, self._hosted)
        )

    async def _attempt(self, node: Attempt) -> Node:
        """One physical attempt of the current step. Its reply says what comes next: its calls
        run, a final reply waits for the boundary's write; a fault is retried. A step's first
        attempt checks the budget first (`BudgetExceeded`: the turn pauses); each, once built,
        waits for the shared rate limit (`_spend_gate.py`, in `ModelCall.send`)."""
        self._check_interrupt()
        await check_spend(self.ctx, self._commit, self._live, node.attempt)
        streamed = Streamed()  # what this attempt streamed, kept when it is cut
        try:
            message = await self._ask_model(node, streamed)
        except Interrupted:
            await self._call.keep_aborted(self._state, node, streamed)
            raise
        except ProviderError as err:
            return await self._provider_failed(node, err, streamed.text)
        except StoreError as err:  # contention (000): nothing of the reply is durable yet
            if not is_transient(err) or node.attempt > self.ctx.retry.max_retries:
                raise
            return Retry(node.again(), err)
        self._hosted = hosted_calls(message)
        for kind, data in hosted_call_events(self._hosted):  # hosted calls are calls too
            self.port.publish(kind, data)
        if message.tool_calls():
            return RunTools(message)
        if self.port.holding:
            return FinalReply(node)
        return End("completed")

    async def _provider_failed(self, node: Attempt, err: ProviderError, partial: list[str]) -> Node:
        """What follows a failed request: the one overflow compaction a step allows, then the
        same step rebuilt; a durable retry with backoff; or the error ends the turn."""
        if isinstance(err, ContentFilterError):
            await self._call.keep_partial(self._state, node.message_id, partial, err)
            raise err
        if isinstance(err, ContextOverflowError) and not partial and not node.overflowed:
            state = self._state
            await self._compaction.recover_overflow(state.turn_id, state.step, err)
            return node.again(overflowed=True)  # the same step from the compacted history
        if not is_retryable(err) or node.attempt > self.ctx.retry.max_retries:
            raise err
        if not partial:
            return Retry(node.again(), err)
        await self._call.keep_partial(self._state, node.message_id, partial, err, True)
        return Retry(node.again(message_id=new_message_id()), err)

    async def _retry(self, node: Retry) -> Attempt:
        """Persist the retry's deadline, wait for it, then make the attempt. For store
        contention the deadline may not be writable either: then it is logged and waited for
        in memory (a restarted driver finds no retry state and asks the step again at once)."""
        err, attempt, state = node.error, node.then.attempt, self._state
        after = err.retry_after_ms if isinstance(err, ProviderError) else None
        delay = backoff_ms(attempt - 1, self.ctx.retry, after, self.ctx.rng)
        deadline = self.ctx.clock.now_ms() + delay
        await share_retry_after(self.ctx, err)  # a 429's retry-after slows every process
        kind = error_kind(err)
        scheduled = RetryScheduled(
            turn_id=state.turn_id,
            step=state.step,
            attempt=attempt,
            deadline_ms=deadline,
            error_kind=kind,
            error=str(err),
            delay_ms=delay,
            status_code=err.status_code if isinstance(err, ProviderError) else None,
            code=err.code if isinstance(err, ProviderError) else None,
            max_attempts=self.ctx.retry.max_retries + 1,
        )
        try:
            await self._commit([scheduled])
            self._state = self._state.retrying()
        except StoreError as fault:
            if isinstance(err, ProviderError) or not is_transient(fault):
                raise
            log.warning("retry of %s not durable (store still busy): %s", self.sid, fault)
        self._live("retry", attempt=attempt, delay_ms=delay, error_kind=kind)
        crash_point("retry.wait")
        await wait_until(self.ctx, self.port, deadline)
        return node.then

    async def _resolve(self, *, files: bool = True) -> None:
        """Take the session's agent, model, tools and configuration as they stand now (issue 37
        item 22; `RunContext.refresh`), from the next step. The turn keeps its state and its
        collaborators, handed the new context (the port its instruction sources). `files=False`
        (after a step boundary's write): the configuration files were looked at just before it,
        and only the facts its unit read are compared (no thread hop when they stand)."""
        fresh = await self.ctx.refresh(files=files) if self.ctx.refresh is not None else None
        if fresh is None:
            return
        self.ctx = fresh
        self.port.use_sources(fresh.instruction_sources)
        self._compaction.use(fresh)
        self._requests.use(fresh)
        self._call.ctx = fresh

    async def _run_tools(self, node: RunTools) -> Boundary:
        """Run the reply's calls; the step boundary follows (holding the step when its reply
        and results wait for it)."""
        return Boundary(held_step=await self._tools(node.message))

    async def _boundary(self, node: Boundary) -> Attempt:
        """Write what is held, deliver pending steers (renewing the allowance); a held read-only
        step's next attempt is built ahead; `_resolve` before and after (a switch: no receipt)."""
        self._check_interrupt()
        await self._resolve()
        state, ahead = self._state, None
        if node.held_step and state.allowance > 0:
            ahead = await self._requests.build_ahead(state.turn_id, state.step + 1, self.port.held)
        steered, written = await self._promote_steers(ahead)
        self._step_done(True)  # its reply and results are durable now
        await self._resolve(files=False)  # what the write saw of the session
        if steered:
            self._state = self._state.renewed(self.ctx.agent.max_steps)
        return self._begin_step(written)

    async def _final_reply(self, node: FinalReply) -> Node:
        """Write the held final reply with the steers that arrived while it streamed (one
        transaction): with some, the turn goes on (a fresh allowance); with none, it completes.
        Store contention on that write drops the held reply and asks the step again, like a
        failed request (the reply durable, a later failure is not a retry)."""
        try:
            delivered, _ = await self.port.promote_steers_then(self._compaction.generation, [], {})
        except StoreError as err:
            retries = node.attempt.attempt <= self.ctx.retry.max_retries
            if not (is_transient(err) and retries and self.port.holding):
                raise
            self.port.drop_held()
            return Retry(node.attempt.again(), err)
        crash_point("reply.saved")
        self._step_done(True)
        if not await self._delivered(delivered):
            return End("completed")
        self._state = self._state.renewed(self.ctx.agent.max_steps)
        return Boundary(held_step=False)

    # -- the step boundary's write ----------------------------------------------------------

    async def _promote_steers(self, ahead: Prepared | None) -> tuple[bool, Prepared | None]:
        """The boundary between two steps: the held events, an instruction change before the
        steers it precedes (003) and the steers, in one transaction, a store fault waited out;
        `ahead` (the next step's first attempt) written last in it when nothing is delivered.
        Returns whether steers were delivered, and `ahead` when its receipt was written."""
        then: list[SessionEvent] = [] if ahead is None else [ahead.receipt]
        blobs = {} if ahead is None else section_blobs(ahead.sections)

        async def promote(_retry: bool) -> tuple[list[Delivered], bool]:
            return await self.port.promote_steers_then(self._compaction.generation, then, blobs)

        if ahead is not None:
            crash_point("receipt.before")
        delivered, wrote = await waited_out(self.ctx, f"delivering steers of {self.sid}", promote)
        written = ahead if wrote else None
        if written is not None:  # the next attempt sends it (`RequestBuilder.written`)
            self._receipts.committed(written.receipt, written.history)
            self._history.expect(written.fresh)
            crash_point("receipt.after")
        return await self._delivered(delivered), written

    async def _inputs(self, input_ids: Sequence[str]) -> list[Message]:
        """The messages the turn's inputs became (the child reports among them matter)."""
        if not any(i.startswith(REPORT_PREFIX) for i in input_ids):
            return []
        await self._history.refresh()
        wanted = set(input_ids)
        return [m for m in self._history.messages() if (m.metadata or {}).get("input_id") in wanted]

    async def _settle_jobs(self, messages: Sequence[Message]) -> None:
        """Mark the background children whose reports `messages` hold as done in `jobs`."""
        reports = reports_in(messages)
        if not reports:
            return
        jobs = settled_jobs((await self.port.work_state()).get("jobs"), reports)
        if jobs is not None:
            await self._commit([WorkStateUpdated(kind="jobs", value=jobs)])

    async def _delivered(self, delivered: Sequence[Delivered]) -> bool:
        """Announce the steers a boundary delivered, note the child reports among them in
        `jobs`, and run the manual compaction requests it delivered; whether any steer was
        delivered."""
        await self._settle_jobs([d.message for d in delivered if d.message is not None])
        for d in delivered:
            if d.message is not None:
                self._live("input_delivered", input_id=d.item.input_id, delivery="steer")
        for d in delivered:  # a manual compaction request runs at this step boundary
            if d.message is None and d.item.kind == "compaction":
                sections = await self._summary_sections()
                await self._compaction.control(d.item, in_turn=True, sections=sections)
                self._check_interrupt()
        return any(d.message is not None for d in delivered)

    async def _summary_sections(self, *, idle: bool = False) -> list[Section] | None:
        """The sections the next step would send (read as a step reads them: instructions
        synced) when a compaction's summary asks with them first (the provider's prompt cache)
        or an `idle` compaction estimates them; None when neither needs them. Either way the
        compaction is told their size: its result's `effective_tokens` counts the whole next
        request, its system prompt and tools included (issue 37 item 17)."""
        sections = await self._requests.sections(1)
        self._compaction.measure(sections)
        return sections if self._compaction.reuses_cache or idle else None

    # -- one attempt ------------------------------------------------------------------------

    async def _ask_model(self, node: Attempt, streamed: Streamed) -> Message:
        """The attempt's request sent under its durable receipt and its reply streamed
        (`ModelCall`); the state learns the reply, which is then kept as its step needs."""
        sent = await self._call.send(self._state, node, streamed, self._rate_waited)
        state = self._state  # a rate wait scheduled: retrying (the reply clears it)
        message, events = self._call.reply(state, sent, node.message_id)
        self._state = state.replied(message.text(), sent.finish)
        await self._call.keep(self._state, message, events, sent)
        return message

    # -- plumbing -------------------------------------------------------------------------

    async def _commit(
        self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes] | None = None
    ) -> None:
        """Commit `events` (fenced) through the port, after a held reply if there is one."""
        await self.port.commit(events, blobs)
        self._requests.committed(events)

    def _live(self, kind: LiveKind, **data: JsonValue) -> None:
        self.port.publish(kind, data)

    def _rate_waited(self) -> None:
        self._state = self._state.retrying()

    def _check_interrupt(self) -> None:
        if self.ctx.interrupt.is_set():
            raise Interrupted
