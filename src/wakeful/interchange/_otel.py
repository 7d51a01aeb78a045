"""A recorded session as OpenTelemetry traces (OTLP JSON), following the GenAI semantic
conventions: per turn an `invoke_agent {agent}` span, per request a `step {n}` span holding a
`chat {model}` span and an `execute_tool {name}` span per tool call. Each chat span carries the
`gen_ai.client.inference.operation.details` event with the request's exact input messages (the
ones its receipt names), its system instructions and tool definitions (the request rebuilt from
its receipt, as `wakeful debug prompt` does) and the reply, which a live tracer only has when content capture was on
and wakeful has for every recorded request.

Invariant: the export is a pure function of the log. Trace and span ids are derived from the
session, turn, receipt and call ids, so exporting again sends the same spans (a collector sees a
repeat, not new traces). `redact` keeps every span, role, part type and count and drops the
content: message text, reasoning, system instructions, tool arguments and results, and tool
descriptions and parameter schemas (a tool definition keeps its type and name).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..events import (
    MessageAdded,
    ReceiptRecorded,
    StoredEvent,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    UsageRecorded,
)
from ..messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    tool_result_text,
)
from ..providers import ModelRequest, ToolSpec

DETAILS = "gen_ai.client.inference.operation.details"
REDACTED = "[redacted]"
_INTERNAL, _CLIENT = 1, 3  # SpanKind
_ERROR = 2  # StatusCode
_FAILED = ("failed", "blocked")


@dataclass
class _Span:
    trace_id: str
    span_id: str
    parent: str | None
    name: str
    kind: int
    start_ms: int
    end_ms: int | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def close(self, at_ms: int) -> None:
        if self.end_ms is None:
            self.end_ms = at_ms

    def otlp(self) -> dict[str, Any]:
        """The span in OTLP JSON (ids hex, times in nanoseconds as strings)."""
        out: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "kind": self.kind,
            "startTimeUnixNano": str(self.start_ms * 1_000_000),
            "endTimeUnixNano": str((self.end_ms or self.start_ms) * 1_000_000),
            "attributes": attributes(self.attributes),
            "events": self.events,
        }
        if self.parent:
            out["parentSpanId"] = self.parent
        if self.error is not None:
            out["status"] = {"code": _ERROR, "message": self.error}
        return out


def _hex(n: int, *parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:n]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Attributes in OTLP JSON (`[{"key", "value": AnyValue}]`), None values left out."""
    return [{"key": k, "value": _value(v)} for k, v in values.items() if v is not None]


def _parts(message: Message, redact: bool) -> list[dict[str, Any]]:
    """A message's blocks as GenAI message parts."""
    parts: list[dict[str, Any]] = []
    for b in message.blocks:
        if isinstance(b, TextBlock):
            parts.append({"type": "text", "content": REDACTED if redact else b.text})
        elif isinstance(b, ThinkingBlock):
            parts.append({"type": "reasoning", "content": REDACTED if redact else b.text})
        elif isinstance(b, ToolCallBlock):
            call = {"type": "tool_call", "id": b.id, "name": b.name}
            parts.append(call if redact else call | {"arguments": b.input})
        elif isinstance(b, ToolResultBlock):
            result = {"type": "tool_call_response", "id": b.call_id}
            text = tool_result_text(b.output)
            parts.append(result if redact else result | {"response": text})
        else:
            parts.append({"type": b.type})  # media and provider blocks: their kind only
    return parts


def system_instructions(system: str, redact: bool) -> list[dict[str, Any]]:
    """A request's system prompt as the conventions' `gen_ai.system_instructions` parts (one
    text part; none when the request had no system prompt)."""
    return [{"type": "text", "content": REDACTED if redact else system}] if system else []


def tool_definitions(tools: Sequence[ToolSpec], redact: bool) -> list[dict[str, Any]]:
    """A request's tools as the conventions' `gen_ai.tool.definitions` (function tools; with
    `redact`, their type and name only)."""
    out: list[dict[str, Any]] = []
    for t in tools:
        tool: dict[str, Any] = {"type": "function", "name": t.name}
        if not redact:
            tool |= {"description": t.description, "parameters": t.input_schema}
        out.append(tool)
    return out


def gen_ai_message(message: Message, redact: bool) -> dict[str, Any]:
    """One message in the GenAI conventions' shape (`role`, `parts`; a user message of tool
    results has the role `tool`)."""
    role: str = message.role
    if role == "user" and message.blocks and all(b.type == "tool_result" for b in message.blocks):
        role = "tool"
    return {"role": role, "parts": _parts(message, redact)}


@dataclass
class Recorded:
    """What the export reads of a session: its log in order, its agent, receipts (each with
    its complete message ids), transcript (a delivered input's message is derived from its
    `inbox.enqueued` payload, not copied into the log) and, by receipt id, the requests rebuilt
    from the receipts (`runner.rebuild_request`; a receipt without one exports no system
    instructions or tool definitions)."""

    session_id: str
    agent: str | None
    events: Sequence[StoredEvent]
    receipts: dict[str, ReceiptRecorded]
    messages: Sequence[Message] = ()
    requests: Mapping[str, ModelRequest] = field(default_factory=dict)


def _model(spec: str) -> tuple[str, str]:
    family, sep, name = spec.partition(":")
    return (family, name) if sep else ("", spec)


class _Builder:
    """One pass over the log: spans opened and closed as their events come (see `build`)."""

    def __init__(self, recorded: Recorded, redact: bool) -> None:
        self.r, self.redact = recorded, redact
        self.messages: dict[str, Message] = {m.id: m for m in recorded.messages}
        self.results: dict[str, ToolResultBlock] = {}
        for e in recorded.events:
            if isinstance(e.event, MessageAdded):
                self.messages[e.event.message.id] = e.event.message
                for res in e.event.message.tool_results():
                    self.results[res.call_id] = res
        self.spans: list[_Span] = []
        self.turn: _Span | None = None
        self.step: _Span | None = None
        self.chat: _Span | None = None
        self.chats: dict[str, _Span] = {}
        self.tools: dict[str, _Span] = {}

    def span(self, key: str, parent: _Span | None, name: str, kind: int, at: int) -> _Span:
        trace = parent.trace_id if parent else _hex(32, "trace", self.r.session_id, key)
        up = parent.span_id if parent else None
        span = _Span(trace, _hex(16, self.r.session_id, key), up, name, kind, at)
        self.spans.append(span)
        return span

    def end_chat(self, at: int, reply: Message | None = None) -> None:
        chat = self.chat
        if chat is None:
            return
        chat.close(at)
        outputs = [] if reply is None else [gen_ai_message(reply, self.redact)]
        details = {k: v for k, v in chat.attributes.items() if k.startswith("gen_ai.")}
        details["gen_ai.input.messages"] = json.dumps(chat.attributes.pop("_inputs"))
        for key in ("gen_ai.system_instructions", "gen_ai.tool.definitions"):
            parts = chat.attributes.pop(f"_{key}", None)
            details[key] = json.dumps(parts) if parts else None
        details["gen_ai.output.messages"] = json.dumps(outputs)
        chat.events.append(
            {
                "timeUnixNano": str(at * 1_000_000),
                "name": DETAILS,
                "attributes": attributes(details),
            }
        )
        self.chat = None

    def end_step(self, at: int) -> None:
        self.end_chat(at)
        if self.step is not None:
            self.step.close(at)
        self.step = None

    def on_turn(self, ev: TurnStarted, at: int) -> None:
        agent = self.r.agent or "wakeful"
        self.turn = self.span(ev.turn_id, None, f"invoke_agent {agent}", _INTERNAL, at)
        self.turn.attributes |= {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": self.r.session_id,
            "wakeful.turn.id": ev.turn_id,
        }

    def on_receipt(self, ev: ReceiptRecorded, at: int) -> None:
        self.end_step(at)
        provider, model = _model(ev.model)
        parent = self.turn if ev.turn_id else None
        self.step = self.span(f"{ev.receipt_id}/step", parent, f"step {ev.step}", _INTERNAL, at)
        self.step.attributes |= {
            "wakeful.step": ev.step,
            "wakeful.attempt": ev.attempt,
            "wakeful.receipt.id": ev.receipt_id,
        }
        chat = self.span(ev.receipt_id, self.step, f"chat {model}", _CLIENT, at)
        chat.attributes |= {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider or None,
            "gen_ai.request.model": model,
            "gen_ai.conversation.id": self.r.session_id,
        }
        full = self.r.receipts.get(ev.receipt_id, ev)
        ids = full.message_ids if full.base is None else ()
        known = [self.messages[i] for i in ids if i in self.messages]
        chat.attributes["_inputs"] = [gen_ai_message(m, self.redact) for m in known]
        request = self.r.requests.get(ev.receipt_id)
        if request is not None:  # popped into the details event by `end_chat`
            chat.attributes["_gen_ai.system_instructions"] = system_instructions(
                request.system, self.redact
            )
            chat.attributes["_gen_ai.tool.definitions"] = tool_definitions(
                request.tools, self.redact
            )
        self.chat = self.chats[ev.receipt_id] = chat

    def on_usage(self, ev: UsageRecorded) -> None:
        chat = self.chats.get(ev.receipt_id or "")
        if chat is not None:
            chat.attributes |= {
                "gen_ai.usage.input_tokens": ev.input_tokens,
                "gen_ai.usage.output_tokens": ev.output_tokens,
                "gen_ai.usage.cache_read.input_tokens": ev.cache_read_tokens or None,
                "gen_ai.usage.cache_creation.input_tokens": ev.cache_write_tokens or None,
            }

    def on_tool(self, ev: ToolCallStarted, at: int) -> None:
        parent = self.step or self.turn
        span = self.span(f"tool/{ev.call_id}", parent, f"execute_tool {ev.name}", _INTERNAL, at)
        span.attributes |= {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": ev.name,
            "gen_ai.tool.call.id": ev.call_id,
            "gen_ai.tool.type": "function",
        }
        if not self.redact:
            span.attributes["gen_ai.tool.call.arguments"] = json.dumps(ev.input)
        self.tools[ev.call_id] = span

    def on_tool_end(self, ev: ToolCallEnded, at: int) -> None:
        span = self.tools.pop(ev.call_id, None)
        if span is None:
            return
        span.close(at)
        result = self.results.get(ev.call_id)
        if result is not None and not self.redact:
            span.attributes["gen_ai.tool.call.result"] = tool_result_text(result.output)
        if ev.status == "failed" or (result is not None and result.is_error):
            span.error = "the tool call failed"

    def on_turn_end(self, ev: TurnEnded, at: int) -> None:
        self.end_step(at)
        for span in self.tools.values():
            span.close(at)
        self.tools.clear()
        if self.turn is not None:
            self.turn.close(at)
            self.turn.attributes["wakeful.turn.outcome"] = ev.outcome
            if ev.outcome in _FAILED:
                self.turn.error = ev.error or ev.outcome
        self.turn = None

    def feed(self, e: StoredEvent) -> None:
        ev, at = e.event, e.at_ms
        if isinstance(ev, TurnStarted):
            self.on_turn(ev, at)
        elif isinstance(ev, ReceiptRecorded) and ev.purpose == "step":
            self.on_receipt(ev, at)
        elif isinstance(ev, MessageAdded) and ev.message.role == "assistant" and self.chat:
            self.end_chat(at, ev.message)
        elif isinstance(ev, UsageRecorded):
            self.on_usage(ev)
        elif isinstance(ev, ToolCallStarted):
            self.on_tool(ev, at)
        elif isinstance(ev, ToolCallEnded):
            self.on_tool_end(ev, at)
        elif isinstance(ev, TurnEnded):
            self.on_turn_end(ev, at)


def build(recorded: Recorded, *, redact: bool = False, version: str = "") -> dict[str, Any]:
    """The session's spans as one OTLP `ExportTraceServiceRequest` in JSON. A turn still open
    at the end of the log (running, or cut by a crash) ends at the last event."""
    builder = _Builder(recorded, redact)
    for e in recorded.events:
        builder.feed(e)
    last = recorded.events[-1].at_ms if recorded.events else 0
    builder.end_step(last)
    for span in builder.spans:
        span.close(last)
    resource = attributes(
        {"service.name": "wakeful", "gen_ai.conversation.id": recorded.session_id}
    )
    scope = {"name": "wakeful", "version": version}
    spans = [s.otlp() for s in builder.spans]
    return {
        "resourceSpans": [
            {"resource": {"attributes": resource}, "scopeSpans": [{"scope": scope, "spans": spans}]}
        ]
    }
