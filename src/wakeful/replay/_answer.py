"""One request sent to one model, and what came back as a `CaseResult` (text, tool calls, stop
reason, tokens, cost, latency), or the recorded reply of a step read the same way, so the two
compare field by field.

Invariant: a provider failure is a result with `error` and `error_kind` (the typed error's
kind), never an exception out of `ask`: one model's failure does not stop the others.
"""

from __future__ import annotations

import difflib
import json
import time

from ..errors import ProviderError
from ..events import CaseResult, ToolCallSeen, UsageRecorded
from ..messages import Message, TextBlock, ThinkingBlock
from ..providers import Finish, ModelRequest, Provider, Usage
from ..runner import PriceTable, cost_usd
from ..runner import request_digest as digest_of


def from_message(
    message: Message | None,
    usage: Usage | UsageRecorded | None,
    finish: str | None,
    latency_ms: int,
    model: str,
    prices: PriceTable | None = None,
) -> CaseResult:
    """A reply message and its usage as a result (cost at `model`'s list price when the usage
    is not a recorded one; None when the model has no known price)."""
    if message is None:
        return CaseResult(error="no reply was recorded for this request", error_kind="missing")
    tokens_in = usage.input_tokens if usage is not None else 0
    tokens_out = usage.output_tokens if usage is not None else 0
    cost: float | None
    if isinstance(usage, UsageRecorded):
        cost = usage.cost_usd
    else:
        cost = cost_usd(model, usage, prices) if usage is not None else None
    return CaseResult(
        text=message.text(),
        reasoning="".join(b.text for b in message.blocks if isinstance(b, ThinkingBlock)),
        tool_calls=tuple(ToolCallSeen(name=c.name, input=c.input) for c in message.tool_calls()),
        finish=finish or _finish_of(message),
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_usd=None if cost is None else round(cost, 8),
        latency_ms=max(latency_ms, 0),
    )


def _finish_of(message: Message) -> str:
    if message.tool_calls():
        return "tool_calls"
    meta = message.metadata or {}
    return "length" if meta.get("truncated") else "stop"


async def ask(
    provider: Provider, request: ModelRequest, model_spec: str, prices: PriceTable | None = None
) -> CaseResult:
    """Send `request` to `provider` and gather its reply as a result; latency is measured from
    the call to the stream's `Finish`. A `ProviderError` becomes a result with `error`."""
    digest = digest_of(provider, request)
    started = time.monotonic()
    try:
        finish: Finish | None = None
        async for event in provider.stream(request):
            if isinstance(event, Finish):
                finish = event
    except ProviderError as err:
        elapsed = int((time.monotonic() - started) * 1000)
        return CaseResult(
            error=str(err) or type(err).__name__,
            error_kind=err.kind,
            latency_ms=elapsed,
            request_digest=digest,
        )
    elapsed = int((time.monotonic() - started) * 1000)
    if finish is None:  # the contract says a stream ends in one; a broken adapter did not
        return CaseResult(
            error="the stream ended without a reply",
            error_kind="incomplete_stream",
            latency_ms=elapsed,
            request_digest=digest,
        )
    result = from_message(finish.message, finish.usage, finish.reason, elapsed, model_spec, prices)
    return result.model_copy(update={"request_digest": digest})


def user_request(model: str, prompt: str, system: str | None, max_tokens: int) -> ModelRequest:
    """A fresh one-message request (a `prompt` case, a judge's question)."""
    from ..messages import Message

    message = Message(role="user", blocks=(TextBlock(text=prompt),))
    return ModelRequest(
        model=model, system=system or "", messages=(message,), max_output_tokens=max_tokens
    )


def _calls_text(result: CaseResult) -> list[str]:
    return [
        f"{c.name} {json.dumps(c.input, sort_keys=True, ensure_ascii=False)}"
        for c in result.tool_calls
    ]


def reply_diff(recorded: CaseResult, other: CaseResult, name: str) -> list[str]:
    """A unified diff of a reply against the recorded one: its text, then its tool calls (name
    and arguments, one line each) and its stop reason."""

    def lines(r: CaseResult) -> list[str]:
        out = r.text.splitlines() or ([] if r.error is None else [f"[error] {r.error}"])
        out += [f"[tool call] {line}" for line in _calls_text(r)]
        return [*out, f"[stop] {r.finish}"]

    return list(difflib.unified_diff(lines(recorded), lines(other), "recorded", name, lineterm=""))
