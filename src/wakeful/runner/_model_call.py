"""One physical attempt's call to the model: the receipt before the request, the stream, and
the reply kept as the step needs it.

`ModelCall` does the attempt's I/O for the runner's `Attempt` node and leaves its decisions to
the runner (what follows the reply, what a fault leads to). Invariants held here: an attempt's
receipt is durable before its request is sent (invariant 7), unless the step boundary wrote it
with the attempt built ahead; a reply's calls are durable (`tool.started`, in the reply's
transaction) before any of them runs (invariant 6), except a reply whose calls are all
read-only, which is held to commit with their results; what an error or an interrupt cut short
is kept (`_aborted.py`), never a reply the turn acts on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from ..errors import ClaimLostError, ContentFilterError, ProviderError, StoreError
from ..events import MessageAdded, ReceiptRecorded, RetryCleared, SessionEvent
from ..messages import Message, TextBlock, TextOrigin
from ..providers import Finish, ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta, UsageReport
from ._aborted import Streamed, aborted_events
from ._approvals import AwaitingApproval
from ._asking import needs_approval
from ._compaction import Compactor
from ._context import Interrupted, RunContext
from ._crashpoints import crash_point
from ._live import LiveKind
from ._port import SessionPort
from ._pricing import usage_event
from ._prompt import ReceiptChain, Section, section_blobs
from ._request_builder import RequestBuilder
from ._spend_gate import charge_rate, take_rate
from ._step_done import hosted_events
from ._stream import stream_to_finish
from ._tool_step import started_events
from ._turn_state import Attempt, Prepared, TurnState

log = logging.getLogger("wakeful.runner")

CONTINUE_AFTER_CUT = (
    "Your previous reply was cut off before it finished (the stream ended early). "
    "Continue from where it stopped; do not repeat what you already said."
)

Commit = Callable[[Sequence[SessionEvent], Mapping[str, bytes] | None], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Sent:
    """An attempt's request, sent under its durable receipt, and the reply it streamed."""

    finish: Finish
    receipt_id: str
    sections: list[Section]


class ModelCall:
    """The model calls of one runner's attempts (see the module docstring). `commit`: the
    runner's fenced commit (which keeps its copy of the work state)."""

    def __init__(
        self,
        ctx: RunContext,
        port: SessionPort,
        requests: RequestBuilder,
        receipts: ReceiptChain,
        compaction: Compactor,
        commit: Commit,
    ) -> None:
        self.ctx = ctx
        self.port = port
        self.requests = requests
        self.receipts = receipts
        self.compaction = compaction
        self.commit = commit

    async def send(
        self, state: TurnState, node: Attempt, streamed: Streamed, waited: Callable[[], None]
    ) -> Sent:
        """The attempt's request (the one built ahead when its receipt is durable and still
        matches, else built now and its receipt written first), streamed to its finish: deltas
        published live and kept in `streamed`. Once built (after any compaction it needed) it
        takes from the shared rate limit (`_spend_gate.py`); `waited` is called when that wait
        was scheduled, durably (the reply clears it)."""
        prepared = await self.requests.written(node.ahead)
        written = prepared is not None  # its receipt went with the step boundary's write
        if prepared is None:
            prepared = await self.requests.build(state.turn_id, state.step, node.attempt)
        elif self.ctx.interrupt.is_set():
            raise Interrupted
        where = (state.turn_id, state.step, node.attempt)
        if await take_rate(
            self.ctx, self.port, self._commit, self._live, self.ctx.model_spec, where
        ):
            waited()
        receipt = await self._receipt(state, prepared, node.attempt, written)
        streamed.receipt_id = receipt.receipt_id
        finish = await self._stream(prepared, streamed)
        usage = finish.usage
        await charge_rate(self.ctx, self.ctx.model_spec, usage)  # the reply's tokens
        self._live(
            "step_end",
            turn_id=state.turn_id,
            step=state.step,
            attempt=node.attempt,
            finish_reason=finish.reason,
            model=self.ctx.provider.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cache_read_tokens,
            tool_calls=len(finish.message.tool_calls()),
        )
        return Sent(finish, receipt.receipt_id, prepared.sections)

    async def _receipt(
        self, state: TurnState, prepared: Prepared, attempt: int, written: bool
    ) -> ReceiptRecorded:
        """Publish the step's start and make its receipt durable before the request is sent
        (invariant 7), unless the step boundary already wrote it."""
        ctx, receipt = self.ctx, prepared.receipt
        self._live(
            "step_start",
            turn_id=state.turn_id,
            step=state.step,
            attempt=attempt,
            model=ctx.provider.model,
            provider=ctx.provider.name,
        )
        if not written:
            ids = ctx.trace_ids(self.port.session_id) if ctx.trace_ids is not None else None
            if ids is not None:  # the step's span, opened by `step_start`
                receipt = receipt.model_copy(update={"trace_id": ids[0], "span_id": ids[1]})
            crash_point("receipt.before")
            await self.commit([receipt], section_blobs(prepared.sections))  # blobs stored once
            self.receipts.committed(receipt, prepared.history)
            crash_point("receipt.after")
        self._live("step", step=state.step, attempt=attempt)
        return receipt

    async def _stream(self, prepared: Prepared, streamed: Streamed) -> Finish:
        def on_delta(event: StreamEvent) -> None:
            if isinstance(event, TextDelta):
                crash_point("stream.delta")
                streamed.text.append(event.text)
                self._live("text", text=event.text)
            elif isinstance(event, ReasoningDelta):
                streamed.reasoning.append(event.text)
                self._live("reasoning", text=event.text)
            elif isinstance(event, UsageReport):
                streamed.usage = event.usage
            elif isinstance(event, ToolCallDelta):
                self._live(
                    "tool_input",
                    call_id=event.call_id,
                    name=event.name,
                    json=event.input_json_fragment,
                )

        ctx = self.ctx
        finish = await stream_to_finish(ctx.provider, prepared.request, ctx.interrupt, on_delta)
        if finish is None:
            raise Interrupted
        return finish

    # -- the reply ----------------------------------------------------------------------------

    def reply(
        self, state: TurnState, sent: Sent, message_id: str
    ) -> tuple[Message, list[SessionEvent]]:
        """The reply as stored (id `message_id`, its step in its metadata, `truncated` when the
        output limit stopped it) and its events: the message, its hosted calls (`tool.hosted`),
        its usage, and the clearing of a retry the state says is pending."""
        finish, model = sent.finish, self.ctx.recorded_model
        meta: dict[str, JsonValue] = {
            "turn_id": state.turn_id,
            "step": state.step,
            "model": self.ctx.provider.model,
        }
        if finish.reason == "length":  # stopped at the output limit: shown as cut
            meta["truncated"] = True
        message = finish.message.model_copy(update={"id": message_id, "metadata": meta})
        events: list[SessionEvent] = [
            MessageAdded(message=message, turn_id=state.turn_id),
            *hosted_events(message),  # its hosted calls, durable as calls (`_step_done.py`)
            usage_event(model, finish.usage, sent.receipt_id, self.ctx.prices),
        ]
        if state.retry_pending:  # known from the turn's start and from a scheduled retry
            events.append(RetryCleared())
        return message, events

    async def keep(
        self, state: TurnState, message: Message, events: list[SessionEvent], sent: Sent
    ) -> None:
        """Keep the reply as its step needs it: with its calls' `tool.started` before any runs
        (invariant 6); held to commit with their results when all are read-only (`_held`);
        held for the step boundary when final; waiting for approval (the turn pauses) when
        nobody present can decide. A content-filtered reply is kept and ends the step."""
        ctx, finish = self.ctx, sent.finish
        runs_tools = finish.reason != "content_filter"
        waiting = needs_approval(ctx, message, state.grants) if runs_tools else []
        if waiting:  # the calls wait, durably, instead of starting (`_asking.py`)
            await self.commit([*events, *waiting], None)
            crash_point("approval.requested")
            if ctx.ask is None:  # nobody here can decide: the turn pauses
                raise AwaitingApproval(tuple(waiting))
        elif runs_tools and self._held(message):
            self.port.hold([*events, *started_events(message)])
        elif runs_tools and not message.tool_calls():  # a final reply: see `FinalReply`
            self.port.hold(events)
        else:
            await self.commit([*events, *(started_events(message) if runs_tools else [])], None)
            crash_point("reply.saved")
        self.compaction.observe(finish.usage.input_tokens, sent.sections)
        if not runs_tools:
            raise ContentFilterError("the provider stopped the reply with a content filter")

    def _held(self, message: Message) -> bool:
        """Whether the reply may wait for its calls' results to commit with them: it has calls
        and each names a read-only tool (or none the agent has, which answers with an error).
        Such a call changes nothing outside the session, so there is nothing to protect by
        making it durable first (invariant 6); a crash before the commit loses the reply, as a
        crash mid-stream does, and the step is asked again. One commit instead of two."""
        calls = message.tool_calls()
        tools = self.ctx.tools
        return bool(calls) and all(c.name not in tools or tools[c.name].read_only for c in calls)

    # -- output cut short ---------------------------------------------------------------------

    async def keep_aborted(self, state: TurnState, node: Attempt, streamed: Streamed) -> None:
        """Keep what an interrupted attempt streamed as an aborted message (`_aborted.py`). On a
        shutdown a store fault is logged, not raised: the turn stays open for the next driver
        and the step is asked again either way."""
        shutdown = self.ctx.shutting_down()
        events = aborted_events(
            turn_id=state.turn_id,
            step=state.step,
            message_id=node.message_id,
            text=streamed.text,
            streamed=streamed,
            receipt_id=streamed.receipt_id,
            model=self.ctx.recorded_model,
            prices=self.ctx.prices,
            cause="shutdown" if shutdown else "interrupt",
        )
        if not events:
            return
        try:
            await self.commit(events, None)
        except StoreError as err:
            if not shutdown or isinstance(err, ClaimLostError):
                raise
            log.warning("could not keep the output cut short in %s: %s", self.port.session_id, err)

    async def keep_partial(
        self,
        state: TurnState,
        message_id: str,
        partial: list[str],
        err: ProviderError,
        continuation: bool = False,
    ) -> None:
        """Persist streamed text an error cut off; with `continuation`, ask the model to go on."""
        if not partial:
            return
        tid = state.turn_id
        kept = Message(
            id=message_id,
            role="assistant",
            blocks=(TextBlock(text="".join(partial)),),
            metadata={"turn_id": tid, "partial": True, "error_kind": err.kind},
        )
        events: list[SessionEvent] = [MessageAdded(message=kept, turn_id=tid)]
        if continuation:
            origin = TextOrigin(kind="event", source="wakeful")
            note = Message(role="user", blocks=(TextBlock(text=CONTINUE_AFTER_CUT, origin=origin),))
            events.append(MessageAdded(message=note, turn_id=tid))
        await self.commit(events, None)

    def _live(self, kind: LiveKind, **data: JsonValue) -> None:
        self.port.publish(kind, data)

    async def _commit(self, events: Sequence[SessionEvent]) -> None:
        await self.commit(events, None)
