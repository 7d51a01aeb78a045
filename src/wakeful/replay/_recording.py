"""A session's recording, read from its log: every request it sent (receipt) with the answer it
got (the reply, its usage, or the typed error of a failed attempt), every tool call's result,
and its inputs in admission order; and the `recorded` provider and tools that answer a
re-drive from it (`_check.py`).

Invariant: the recorded provider answers the k-th request of a re-drive with the k-th recorded
answer, whatever the request holds: a re-drive whose requests differ still follows the
recorded conversation, so the first differing request is found, not a cascade of made-up ones.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, JsonValue

from ..errors import (
    ContentFilterError,
    ContextOverflowError,
    IncompleteStreamError,
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
    TransportError,
)
from ..events import (
    CompactionEnded,
    InputEnqueued,
    MessageAdded,
    ReceiptRecorded,
    RetryScheduled,
    TurnEnded,
    TurnStarted,
    UsageRecorded,
)
from ..messages import CompactSummaryBlock, Message, TextBlock, ToolResultBlock
from ..providers import (
    Finish,
    FinishReason,
    ModelRequest,
    Provider,
    StreamEvent,
    TextDelta,
    Usage,
    UsageReport,
)
from ..runner.tools import (
    WORK_STATE_TOOLS,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
)
from ..store import SqlStore


@dataclass(frozen=True, slots=True)
class Exchange:
    """One recorded request and its answer: a reply with its usage, or the kind of the error
    the attempt failed with."""

    receipt: ReceiptRecorded
    reply: Message | None
    usage: Usage | None
    error_kind: str | None


@dataclass(slots=True)
class Recording:
    """What a re-drive needs from the source session (see the module docstring)."""

    exchanges: list[Exchange] = field(default_factory=list)
    inputs: dict[str, InputEnqueued] = field(default_factory=dict)  # by input id
    # The inputs to send, in order: each turn's (as it started) and each manual compaction's.
    batches: list[tuple[str, ...]] = field(default_factory=list)
    # (tool name, canonical JSON of the input) -> recorded results of such calls, in call order
    results: dict[tuple[str, str], deque[ToolResultBlock]] = field(default_factory=dict)


def call_key(name: str, value: JsonValue) -> tuple[str, str]:
    """How a tool call is matched to its recorded result: its name and canonical input."""
    return name, json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _usage(event: UsageRecorded | None) -> Usage | None:
    if event is None:
        return None
    return Usage(
        event.input_tokens, event.output_tokens, event.cache_read_tokens, event.cache_write_tokens
    )


def read_recording(store: SqlStore, session_id: str) -> Recording:
    """The recording of `session_id` (one read of its log). A request that got neither a reply
    nor an error (a crash or an interrupt cut it) is left out: its step was asked again."""
    rec = Recording()
    receipts: list[ReceiptRecorded] = []
    replies: dict[str, Message] = {}
    errors: dict[str, str] = {}
    usage: dict[str, UsageRecorded] = {}
    messages: dict[str, Message] = {}
    calls: list[tuple[str, JsonValue, str]] = []
    open_receipt: ReceiptRecorded | None = None
    for stored in store.events(session_id):
        event = stored.event
        if isinstance(event, ReceiptRecorded):
            receipts.append(event)
            open_receipt = event
        elif isinstance(event, InputEnqueued):
            rec.inputs[event.input_id] = event
        elif isinstance(event, TurnStarted):
            rec.batches.append(event.input_ids)
        elif isinstance(event, UsageRecorded) and event.receipt_id is not None:
            usage[event.receipt_id] = event
        elif isinstance(event, MessageAdded):
            message = event.message
            messages[message.id] = message
            if message.role == "assistant" and open_receipt is not None:
                replies.setdefault(open_receipt.receipt_id, message)
                open_receipt = None
            calls += [(c.name, c.input, c.id) for c in message.tool_calls()]
        elif isinstance(event, CompactionEnded) and event.receipt_id is not None:
            if event.input_id is not None:  # a manual compaction: sent as it was
                rec.batches.append((event.input_id,))
            errors.pop(event.receipt_id, None)
            replies[event.receipt_id] = _summary_reply(messages.get(event.summary_message_id))
            open_receipt = None
        elif isinstance(event, RetryScheduled | TurnEnded) and open_receipt is not None:
            kind = event.error_kind
            if kind:
                errors[open_receipt.receipt_id] = kind
                open_receipt = None
    by_call = _results(messages)
    for name, value, call_id in calls:
        if call_id in by_call:
            rec.results.setdefault(call_key(name, value), deque()).append(by_call[call_id])
    for r in receipts:
        reply, error = replies.get(r.receipt_id), errors.get(r.receipt_id)
        if reply is not None or error is not None:
            rec.exchanges.append(Exchange(r, reply, _usage(usage.get(r.receipt_id)), error))
    return rec


def _summary_reply(message: Message | None) -> Message:
    """A compaction's summary as the reply its request got."""
    text = ""
    if message is not None:
        text = "".join(b.summary for b in message.blocks if isinstance(b, CompactSummaryBlock))
    return Message(role="assistant", blocks=(TextBlock(text=text),))


def _results(messages: Mapping[str, Message]) -> dict[str, ToolResultBlock]:
    return {
        b.call_id: b for m in messages.values() for b in m.blocks if isinstance(b, ToolResultBlock)
    }


_ERRORS: dict[str, type[ProviderError]] = {
    "rate_limit": RateLimitError,
    "overloaded": OverloadedError,
    "server_error": ServerError,
    "incomplete_stream": IncompleteStreamError,
    "context_overflow": ContextOverflowError,
    "content_filter": ContentFilterError,
    "invalid_request": InvalidRequestError,
}


class Live:
    """Whether a re-drive has gone past its recording to a real model (`RecordedProvider`
    with `then_live`), shared with its tools: from then on they run for real."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


class RecordedProvider:
    """A `Provider` answering each request with the next recorded answer (see the module
    docstring); its wire body is the `inner` provider's, the one the session used. With
    `then_live`, a request past the end of the recording goes to `inner` for real (a fork
    re-run from a step: the steps before it as recorded, the rest by the new model), and
    `then_live.on` is set."""

    def __init__(
        self, inner: Provider, answers: deque[Exchange], then_live: Live | None = None
    ) -> None:
        self.inner = inner
        self.live = then_live
        self.name = inner.name
        self.model = inner.model
        self.context_window = inner.context_window
        self.max_output_tokens = inner.max_output_tokens
        self._answers = answers  # shared by every provider of one re-drive
        self.asked = 0  # requests answered
        self.unanswered = 0  # requests past the end of the recording

    def wire_request(self, request: ModelRequest) -> dict[str, JsonValue]:
        """The body the session's own provider sends for `request`."""
        return self.inner.wire_request(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The next recorded answer: its reply streamed whole, or its error raised."""
        if not self._answers and self.live is not None:
            self.live.on = True
            async for event in self.inner.stream(request):
                yield event
            return
        if not self._answers:
            self.unanswered += 1
            raise InvalidRequestError("recorded provider: the recording has no more replies")
        answer = self._answers.popleft()
        self.asked += 1
        if answer.reply is None:
            kind = answer.error_kind or "transport"
            if kind == "transport":
                raise TransportError("recorded failure", delivered=False)
            raise _ERRORS.get(kind, OverloadedError)(f"recorded {kind} failure")
        usage = answer.usage or Usage(0, 0)
        yield UsageReport(usage)
        if answer.reply.text():
            yield TextDelta(answer.reply.text())
        yield Finish(_finish(answer.reply), answer.reply, usage)

    async def aclose(self) -> None:
        """Close the inner provider."""
        await self.inner.aclose()


def _finish(message: Message) -> FinishReason:
    if message.tool_calls():
        return "tool_calls"
    return "length" if (message.metadata or {}).get("truncated") else "stop"


class RecordedTool:
    """A tool with the real one's name, description and input schema whose calls are answered
    with the recorded results of calls of the same input, in order (`ToolFailure` when none
    is left). The work-state tools run for real: they change only the re-driven session; so do
    all once `live.on` (the re-drive went past its recording)."""

    def __init__(
        self,
        real: Tool,
        results: dict[tuple[str, str], deque[ToolResultBlock]],
        live: Live | None = None,
    ) -> None:
        self.real = real
        self.live = live
        self.name = real.name
        self.description = real.description
        self.read_only = real.read_only
        self._results = results

    @property
    def input_model(self) -> type[BaseModel]:
        """The real tool's input model (its JSON schema is what the request carries)."""
        return self.real.input_model

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutcome:
        """The recorded result of this call (the real tool's, once live)."""
        if self.live is not None and self.live.on:
            return await self.real.run(args, ctx)
        value = args.model_dump(mode="json", exclude_unset=True)
        queue = self._results.get(call_key(self.name, value))
        if not queue:
            raise ToolFailure(f"no recorded result for this {self.name} call")
        block = queue.popleft()
        return ToolOutcome(output=block.output, is_error=block.is_error, metadata=block.metadata)


def recorded_tools(
    tools: Mapping[str, Tool],
    results: dict[tuple[str, str], deque[ToolResultBlock]],
    live: Live | None = None,
) -> dict[str, Tool]:
    """`tools` with every tool but the work-state ones answering from the recording."""
    return {
        name: tool if name in WORK_STATE_TOOLS else RecordedTool(tool, results, live)
        for name, tool in tools.items()
    }
