"""A turn's tool calls, `TurnRunner`'s `ToolCallsMixin`: the decisions they need first
(`_approve`: durable `approval.decided` before any call runs), the step a pause for approval
left waiting (`_decided_step`, at the turn's start), running them (`_tool_step.run_tools`) with
a transient failure's durable retry (`_retry_call`), and saving their results through store
faults (`_save_results`), held with their reply for the step boundary when it is held.

Every decision and result goes through the turn's port; the turn's state (`TurnState`) learns
the grants and the retries, as it does in `_turn.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import NotFoundError
from ..messages import Message, ToolCallBlock
from ..store import blob_digest
from ._approvals import AwaitingApproval
from ._asking import ask_approvals
from ._crashpoints import crash_point
from ._tool_retry import TOOL_RETRY_KIND, ToolRetries
from ._tool_step import run_tools, started_events
from ._waits import wait_until, waited_out

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..events import SessionEvent
    from ._context import RunContext
    from ._live import LiveKind
    from ._loop_guard import LoopGuard
    from ._port import SessionPort
    from ._request_builder import RequestBuilder
    from ._turn_state import TurnState


class ToolCallsMixin:
    """The tool calls of a turn's steps (see the module docstring)."""

    ctx: RunContext
    port: SessionPort
    sid: str
    _state: TurnState
    _requests: RequestBuilder
    _guard: LoopGuard
    _tool_retries: ToolRetries

    if TYPE_CHECKING:  # `TurnRunner`'s plumbing

        async def _commit(
            self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes] | None = None
        ) -> None: ...
        def _live(self, kind: LiveKind, **data: JsonValue) -> None: ...
        def _check_interrupt(self) -> None: ...

    async def _tools(self, message: Message, approved: dict[str, bool] | None = None) -> bool:
        """Run the calls of `message` (asking for the decisions they need first, unless
        `approved` holds them); whether its reply and results are held for the boundary."""
        ctx, held = self.ctx, False
        if approved is None:
            approved = await self._approve(message)

        async def save(events: Sequence[SessionEvent], blobs: Sequence[bytes] = ()) -> None:
            nonlocal held
            held = await self._save_results(events, blobs)

        results = await run_tools(
            message,
            tools=ctx.tools,
            tool_context=ctx.tool_context,
            policy=ctx.policy,
            ask=None,
            save=save,
            live=self._live,
            interrupt=ctx.interrupt,
            turn_id=self._state.turn_id,
            approved=approved,  # every `ask` call was decided above (or waits, or is declined)
            now_ms=ctx.clock.now_ms,
            retry=self._retry_call,
        )
        self._check_interrupt()
        self._guard.observe(message.tool_calls(), results)  # `LoopDetected`: the turn pauses
        return held

    async def _save_results(
        self, events: Sequence[SessionEvent], blobs: Sequence[bytes] = ()
    ) -> bool:
        """Commit a tool step's results: their side effects ran, so a store fault is waited out
        (`waited_out`); a retry first looks whether an earlier try committed after all. Returns
        whether they are held instead, with their reply, for the step boundary's write."""
        if self.port.holding and not blobs:
            # The reply is held (its calls are all read-only, `ModelCall.keep`): its results wait
            # with it for the step boundary's write, which comes next (`_boundary`). A crash
            # before it loses the step, as a crash during the calls does, and the step is
            # asked again: nothing outside the session changed. One commit per step fewer.
            self.port.hold(events)
            self._requests.committed(events)
            return True
        stored = {blob_digest(b): b for b in blobs}

        async def save(retry: bool) -> None:
            await (self.port.recommit if retry else self.port.commit)(events, stored)

        what = f"saving tool results of {self.sid}"
        await waited_out(self.ctx, what, save, crash="tool.saving")
        self._requests.committed(events)
        return False

    async def _approve(self, message: Message) -> dict[str, bool]:
        """Decide the calls of `message` (`_asking.py`); the decisions are durable
        (`approval.decided`, with the calls' `tool.started`, which the reply's requests stood
        in for) before any call runs, and an `always` joins the state's grants. Calls the
        person left undecided keep waiting: the decisions given are kept, the turn pauses."""
        decided, grants, events, left = await ask_approvals(self.ctx, message, self._state.grants)
        self._state = self._state.granted(grants)
        if left:
            if events:
                await self._commit(events)
            raise AwaitingApproval(left)
        if events:
            await self._commit([*events, *started_events(message)])
        return decided

    async def _decided_step(self) -> bool:
        """At the turn's start: read the session's grants and, when calls wait for approval,
        pause again (some are undecided) or run them as decided (the step the pause left).
        Returns whether it ran a step."""
        approvals = await self.port.approvals()
        self._state = self._state.granted(approvals.grants)
        step = approvals.step
        if step is None:
            return False
        if step.pending:
            raise AwaitingApproval(step.pending)
        messages = await self._requests.messages()
        message = next((m for m in messages if m.id == step.message_id), None)
        if message is None:  # not in the active history (cannot happen short of a bad log)
            message = await self.port.message(step.message_id)
        if message is None:
            raise NotFoundError(f"the message {step.message_id} awaiting approval is not stored")
        await self._commit(started_events(message))
        crash_point("approval.started")
        approved = {c.id: True for c in message.tool_calls() if c.name in approvals.grants}
        approved |= {cid: d != "deny" for cid, d in step.decisions.items()}
        await self._tools(message, approved)
        return True

    async def _retry_call(self, call: ToolCallBlock, err: BaseException) -> bool:
        """A tool call's transient failure (`retryable_failure`): while the call's budget lasts
        (`retry.max_retries`, counted per call), a durable `retry.scheduled` (kind
        `tool_unavailable`) and its backoff wait, then True: the call is made again. False once
        the budget is spent: the failure is the call's result (docs/tools.md, "Retries")."""
        async with self._tool_retries.lock:  # concurrent calls of one step write one at a time
            retry = self._tool_retries.plan(call, err, self._state, self.ctx)
            if retry is None:
                return False
            await self._commit([retry])
            self._state = self._state.retrying()
        self._live(
            "retry", attempt=retry.attempt, delay_ms=retry.delay_ms, error_kind=TOOL_RETRY_KIND
        )
        await wait_until(self.ctx, self.port, retry.deadline_ms)
        return True
