"""OpenTelemetry spans of a turn, built from its live events (GenAI semantic conventions).

The invariant: **tracing observes, it never decides.** Spans are started and ended from the
live events a turn publishes (`observe`, synchronous and cheap, on the loop), so tracing adds
no await to a turn and an exporter failure cannot reach one. Only the OpenTelemetry *API* is
used here, imported lazily: without the package there is no tracing (`Tracing.create` returns
None) and nothing else changes; with the API but no SDK configured the spans are no-ops.

The tree of a turn: ``invoke_agent {agent}`` (the turn) > ``step {n}`` (one physical attempt,
whose trace and span ids go in its receipt) > ``chat {model}`` (the model call) and
``execute_tool {name}`` (each tool call). Prompt and reply text, tool arguments and results are
exported only when content capture is on (`capture_content`, or the
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` variable); by default none is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from ._live import LiveEvent

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
TRUE = frozenset({"1", "true", "yes", "on"})


@dataclass
class _Open:
    """The open spans of one session's turn."""

    turn: Any = None
    step: Any = None
    chat: Any = None
    tools: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    provider: str = ""
    text: list[str] = field(default_factory=list)


class Tracing:
    """Turns live events into spans (see the module docstring); one per runtime."""

    def __init__(self, tracer_provider: Any = None, *, capture_content: bool | None = None):
        from opentelemetry import trace  # lazy: the core runs without the package

        self._trace = trace
        self._tracer = trace.get_tracer("wakeful", tracer_provider=tracer_provider)
        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_ENV, "").strip().lower() in TRUE
        self.capture_content = capture_content
        self._open: dict[str, _Open] = {}
        self._quiet: set[str] = set()  # sessions whose current turn's span does not record

    @classmethod
    def create(
        cls, tracer_provider: Any = None, *, capture_content: bool | None = None
    ) -> Tracing | None:
        """Tracing over the global (or given) tracer provider; None without the OpenTelemetry
        API or when ``OTEL_SDK_DISABLED`` is true."""
        if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() in TRUE:
            return None
        try:
            return cls(tracer_provider, capture_content=capture_content)
        except ImportError:
            return None

    def ids(self, session_id: str) -> tuple[str, str] | None:
        """The (trace id, span id) of the session's current step span, hex; None when no
        span records (no SDK configured, or no step open)."""
        found = self._open.get(session_id)
        span = found.step if found is not None else None
        if span is None:
            return None
        ctx = span.get_span_context()
        if not ctx.is_valid:
            return None
        return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"

    def observe(self, live: LiveEvent) -> None:
        """Start, annotate or end spans for one live event. A turn whose span records nothing
        (no SDK configured, or not sampled: its steps, model calls and tools would not record
        either) is not followed past its start: its other events cost a set lookup, not a
        no-op span each (issue 36: a step's live events went through ~20 OpenTelemetry calls)."""
        sid = live.session_id
        if sid in self._quiet and live.kind != "turn_start":
            if live.kind == "turn_end":
                self._quiet.discard(sid)
            return
        handler = _HANDLERS.get(live.kind)
        if handler is not None:
            handler(self, sid, live.data)

    # -- handlers ---------------------------------------------------------------------------

    def _child(self, parent: Any, name: str, kind: Any = None) -> Any:
        ctx = self._trace.set_span_in_context(parent) if parent is not None else None
        span_kind = kind if kind is not None else self._trace.SpanKind.INTERNAL
        return self._tracer.start_span(name, context=ctx, kind=span_kind)

    def _turn_start(self, sid: str, d: Mapping[str, JsonValue]) -> None:
        self._end_all(sid, None)
        self._quiet.discard(sid)
        agent = str(d.get("agent") or "wakeful")
        span = self._child(None, f"invoke_agent {agent}")
        if not span.is_recording():  # nothing of this turn records (see `observe`)
            span.end()
            self._quiet.add(sid)
            return
        span.set_attributes(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.conversation.id": sid,
                "wakeful.turn_id": str(d.get("turn_id") or ""),
            }
        )
        self._open[sid] = _Open(turn=span)

    def _step_start(self, sid: str, d: Mapping[str, JsonValue]) -> None:
        found = self._open.setdefault(sid, _Open())
        self._end_step(found)
        found.model, found.provider = str(d.get("model") or ""), str(d.get("provider") or "")
        found.step = self._child(found.turn, f"step {d.get('step')}")
        found.step.set_attributes(
            {"wakeful.step": _num(d.get("step")), "wakeful.attempt": _num(d.get("attempt"))}
        )

    def _request_sent(self, sid: str, d: Mapping[str, JsonValue]) -> None:
        found = self._open.get(sid)
        if found is None or found.step is None:
            return
        span = self._child(found.step, f"chat {found.model}", self._trace.SpanKind.CLIENT)
        span.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": found.provider,
                "gen_ai.request.model": found.model,
            }
        )
        found.chat, found.text = span, []

    def _text(self, sid: str, d: Mapping[str, JsonValue]) -> None:
        found = self._open.get(sid)
        if found is not None and self.capture_content:
            found.text.append(str(d.get("text") or ""))

    def _step_end(self, sid: str, d: Mapping[str, JsonValue]) -> None:
        found = self._open.get(sid)
        if found is None or found.chat is None:
            return
        reason = str(d.get("finish_reason") or "")
        found.chat.set_attributes(
            {
                "gen_ai.response.model": str(d.get("model") or found.model),
                "gen_ai.usage.input_tokens": _num(d.get("input_tokens")),
                "gen_ai.usage.output_tokens": _num(d.get("output_tokens")),
                "gen_ai.usage.cache_read.input_tokens": _num(d.get("cached_tokens")),
                "gen_ai.response.finish_reasons": [reason],
            }
        )
        if self.capture_content:
            parts = [{"type": "text", "content": "".join(found.text)}]
            message = {"role": "assistant", "parts": parts, "finish_reason": reason}
            found.chat.set_attribute("gen_ai.output.messages", json.dumps([message]))
        found.chat.end()
        found.chat = None

    def _tool_start(self, sid: str, d: Mapping[str, JsonValue]) -> None:
        found = self._open.get(sid)
        if found is None:
            return
        name, call_id = str(d.get("name") or ""), str(d.get("call_id") or "")
        span = self._child(found.step or found.turn, f"execute_tool {name}")
        span.set_attributes(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.type": "function",
            }
        )
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps(d.get("input")))
        found.tools[call_id] = span

    def _tool_end(self, sid: str, d: Mapping[str, JsonValue]) -> None:
        found = self._open.get(sid)
        span = found.tools.pop(str(d.get("call_id") or ""), None) if found else None
        if span is None:
            return
        if d.get("is_error"):
            span.set_attribute("error.type", "tool_error")
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.result", str(d.get("output") or ""))
        span.end()

    def _note(self, sid: str, d: Mapping[str, JsonValue], name: str) -> None:
        found = self._open.get(sid)
        span = found and (found.step or found.turn)
        if span:
            attrs = {f"wakeful.{k}": v for k, v in d.items() if isinstance(v, str | int | float)}
            span.add_event(name, attrs)

    def _turn_end(self, sid: str, d: Mapping[str, JsonValue]) -> None:
        self._end_all(sid, d)

    def _end_step(self, found: _Open) -> None:
        for span in found.tools.values():
            span.end()
        found.tools = {}
        for span in (found.chat, found.step):
            if span is not None:
                span.end()
        found.chat = found.step = None

    def _end_all(self, sid: str, d: Mapping[str, JsonValue] | None) -> None:
        found = self._open.pop(sid, None)
        if found is None:
            return
        self._end_step(found)
        if found.turn is not None:
            if d is not None:
                outcome = str(d.get("outcome") or "")
                found.turn.set_attribute("wakeful.outcome", outcome)
                if outcome == "failed":
                    found.turn.set_attribute("error.type", "turn_failed")
                    found.turn.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
            found.turn.end()


def _num(value: JsonValue) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


_Handler = Callable[["Tracing", str, Mapping[str, JsonValue]], None]

_HANDLERS: dict[str, _Handler] = {
    "turn_start": Tracing._turn_start,
    "step_start": Tracing._step_start,
    "step": Tracing._request_sent,
    "text": Tracing._text,
    "step_end": Tracing._step_end,
    "tool_start": Tracing._tool_start,
    "tool_end": Tracing._tool_end,
    "turn_end": Tracing._turn_end,
    "retry": lambda self, sid, d: self._note(sid, d, "wakeful.retry_scheduled"),
    "compaction": lambda self, sid, d: (
        None if d.get("phase") == "progress" else self._note(sid, d, "wakeful.compaction")
    ),
    "pairing_repair": lambda self, sid, d: self._note(sid, d, "wakeful.pairing_repair"),
}
