"""The Anthropic Messages API adapter, through the official `anthropic` SDK.

The SDK's own retries are off (`max_retries=0`): retry is durable and belongs to the runner.
Invariant: `wire_request` is the exact JSON body `stream` sends (the SDK adds nothing to it), and
the message in `Finish` holds the content blocks in the provider's index order.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2
from pydantic import JsonValue

from ..clock import Clock
from ..errors import AuthenticationError
from ..messages import (
    MEDIA_TYPES,
    Block,
    Message,
    RedactedThinkingBlock,
    ServerToolResultBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    label_media,
    to_anthropic,
)
from ._base import (
    Finish,
    FinishReason,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolChoice,
    Usage,
    UsageReport,
    check_tool_choice,
    media_kinds,
)
from ._errors import HttpFailure, classify_connection, classify_http, incomplete

STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}

# Our tool choices in Anthropic's spelling (`{"type": ...}`).
ANTHROPIC_TOOL_CHOICE: dict[ToolChoice, str] = {"auto": "auto", "required": "any", "none": "none"}


@dataclass
class _OpenBlock:
    """A content block still streaming: its kind, ids and the text or JSON gathered so far."""

    kind: str
    text: list[str] = field(default_factory=list)
    call_id: str = ""
    name: str = ""
    signature: str | None = None


class _Assembler:
    """Turns raw Messages stream events into `StreamEvent`s and the final message."""

    def __init__(self) -> None:
        self.open: dict[int, _OpenBlock] = {}
        self.closed: dict[int, Block] = {}
        self.usage = Usage(0, 0)
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            return [self._usage(event.message.usage)]
        if kind == "content_block_start":
            return self._start(event.index, event.content_block)
        if kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        if kind == "content_block_stop":
            self._stop(event.index)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            return [self._usage(event.usage)]
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _usage(self, wire: Any) -> UsageReport:
        old = self.usage

        def pick(name: str, before: int) -> int:
            value = getattr(wire, name, None)
            return before if value is None else int(value)

        cache_read = pick("cache_read_input_tokens", old.cache_read_tokens)
        cache_write = pick("cache_creation_input_tokens", old.cache_write_tokens)
        uncached = pick(
            "input_tokens", old.input_tokens - old.cache_read_tokens - old.cache_write_tokens
        )
        self.usage = Usage(
            input_tokens=uncached + cache_read + cache_write,
            output_tokens=pick("output_tokens", old.output_tokens),
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )
        return UsageReport(usage=self.usage)

    def _start(self, index: int, block: Any) -> list[StreamEvent]:
        kind = block.type
        if kind == "text":
            self.open[index] = _OpenBlock("text", text=[block.text] if block.text else [])
            return [TextDelta(text=block.text)] if block.text else []
        if kind == "thinking":
            self.open[index] = _OpenBlock(
                "thinking", text=[block.thinking], signature=block.signature or None
            )
            return [ReasoningDelta(text=block.thinking)] if block.thinking else []
        if kind == "redacted_thinking":
            self.closed[index] = RedactedThinkingBlock(data=block.data)
        elif kind in ("tool_use", "server_tool_use"):
            self.open[index] = _OpenBlock(kind, call_id=block.id, name=block.name)
            if kind == "tool_use":
                return [ToolCallDelta(call_id=block.id, name=block.name, input_json_fragment="")]
        elif hasattr(block, "tool_use_id"):
            content = block.model_dump(mode="json").get("content")
            self.closed[index] = ServerToolResultBlock(
                tool_use_id=block.tool_use_id, wire_type=kind, content=content
            )
        return []

    def _delta(self, index: int, delta: Any) -> list[StreamEvent]:
        block = self.open.get(index)
        if block is None:
            return []
        kind = delta.type
        if kind == "text_delta":
            block.text.append(delta.text)
            return [TextDelta(text=delta.text)]
        if kind == "thinking_delta":
            block.text.append(delta.thinking)
            return [ReasoningDelta(text=delta.thinking)]
        if kind == "signature_delta":
            block.signature = (block.signature or "") + delta.signature
        elif kind == "input_json_delta":
            block.text.append(delta.partial_json)
            if block.kind == "tool_use":
                return [ToolCallDelta(block.call_id, block.name, delta.partial_json)]
        return []

    def _stop(self, index: int) -> None:
        block = self.open.pop(index, None)
        if block is None:
            return
        text = "".join(block.text)
        if block.kind == "text":
            self.closed[index] = TextBlock(text=text)
        elif block.kind == "thinking":
            self.closed[index] = ThinkingBlock(text=text, signature=block.signature)
        else:
            kwargs = {"id": block.call_id, "name": block.name, "input": _tool_input(text)}
            self.closed[index] = (
                ToolCallBlock(**kwargs)
                if block.kind == "tool_use"
                else ServerToolUseBlock(**kwargs)
            )

    def finish(self) -> Finish:
        if not self.stopped:
            raise incomplete("no message_stop")
        blocks = tuple(self.closed[i] for i in sorted(self.closed))
        reason = STOP_REASONS.get(self.stop_reason or "end_turn", "stop")
        return Finish(
            reason=reason, message=Message(role="assistant", blocks=blocks), usage=self.usage
        )


def _tool_input(raw: str) -> dict[str, JsonValue]:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        raise incomplete("tool input is not complete JSON", err) from None
    if not isinstance(value, dict):
        raise incomplete(f"tool input is a JSON {type(value).__name__}, not an object")
    return value


def _failure(err: anthropic.APIStatusError) -> HttpFailure:
    return HttpFailure(
        status=err.status_code,
        error_type=err.type,
        error_code=err.error_code,
        message=err.api_message or str(err),
        headers=err.response.headers,
        text_overflow=True,  # Anthropic reports "prompt is too long" with no structured code
    )


# The one marker Anthropic reads as a cache breakpoint (the 5-minute cache).
CACHE_BREAKPOINT: dict[str, JsonValue] = {"type": "ephemeral"}


def _marked(entry: JsonValue) -> JsonValue:
    """A copy of a tool spec or content block with a cache breakpoint on it."""
    assert isinstance(entry, dict)
    return {**entry, "cache_control": dict(CACHE_BREAKPOINT)}


def _mark_breakpoints(body: dict[str, JsonValue], volatile: int) -> None:
    """Put cache breakpoints on the stable prefix, in the order Anthropic caches it: the last
    tool, the last system block, and the last block of the newest settled message (the last
    one before the `volatile` request-only messages, each of which is one wire message after
    a non-empty history). Three of the four breakpoints Anthropic allows; entries are copied,
    never changed in place (the converters' output may be shared)."""
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        tools[-1] = _marked(tools[-1])
    system = body.get("system")
    if isinstance(system, list) and system:
        system[-1] = _marked(system[-1])
    messages = body["messages"]
    assert isinstance(messages, list)
    settled = len(messages) - volatile
    if settled <= 0:
        return
    message = messages[settled - 1]
    assert isinstance(message, dict)
    content = message["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    assert isinstance(content, list) and content
    messages[settled - 1] = {**message, "content": [*content[:-1], _marked(content[-1])]}


class AnthropicProvider:
    """A `Provider` for `anthropic:MODEL` (Claude) over the Messages API, streaming."""

    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        context_window: int,
        max_output_tokens: int,
        api_key: str | None = None,
        base_url: str | None = None,
        thinking: dict[str, JsonValue] | None = None,
        prompt_cache: bool = True,
        timeout: float = 600.0,
        clock: Clock | None = None,
        tool_choice: ToolChoice | None = None,
        accepts: Iterable[str] | None = None,
    ) -> None:
        self.model = model
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self.tool_choice = check_tool_choice(tool_choice)
        self.accepts = media_kinds(accepts, MEDIA_TYPES)
        self.thinking = thinking
        self.prompt_cache = prompt_cache
        self._clock = clock
        self._api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        self._client = anthropic.AsyncAnthropic(
            api_key=self._api_key or "missing",
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            max_retries=0,
            timeout=timeout,
        )

    def wire_request(self, request: ModelRequest) -> dict[str, JsonValue]:
        """Return the exact Messages API body `stream` sends for `request`."""
        history = list(request.messages)
        if self.accepts != MEDIA_TYPES:
            history = label_media(history, self.accepts)
        payload = to_anthropic(history)
        system: list[JsonValue] = (
            [{"type": "text", "text": request.system}] if request.system else []
        )
        system.extend(payload.system)
        body: dict[str, JsonValue] = {
            "model": request.model,
            "max_tokens": request.max_output_tokens or self.max_output_tokens,
            "messages": list(payload.messages),
            "stream": True,
        }
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
            if self.tool_choice is not None:
                body["tool_choice"] = {"type": ANTHROPIC_TOOL_CHOICE[self.tool_choice]}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if self.thinking is not None:
            body["thinking"] = self.thinking
        if self.prompt_cache:
            _mark_breakpoints(body, request.volatile)
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Send `request` and stream its events; failures raise typed `ProviderError`s."""
        body = self.wire_request(request)
        if not self._api_key:
            raise AuthenticationError("ANTHROPIC_API_KEY is not set (nor an api_key option)")
        # `temperature` is not a named parameter of this SDK's `create`: it travels as extra
        # body, which the SDK merges into the same JSON object.
        extra = {"temperature": body.pop("temperature")} if "temperature" in body else None
        try:
            response = await self._client.messages.create(**body, extra_body=extra)  # type: ignore[call-overload]  # body: a dict the wire layer built, not the SDK's TypedDicts
        except anthropic.APIStatusError as err:
            raise classify_http(_failure(err), self._clock) from err
        except anthropic.APIConnectionError as err:
            raise classify_connection(err) from err
        assembler = _Assembler()
        try:
            async with response:
                async for event in response:
                    for out in assembler.feed(event):
                        yield out
        except anthropic.APIStatusError as err:  # an `error` event inside the stream
            raise classify_http(_failure(err), self._clock) from err
        except (anthropic.APIConnectionError, httpx2.TransportError) as err:
            raise incomplete("connection lost", err) from err
        except json.JSONDecodeError as err:  # a garbled event: the stream is unusable from here
            raise incomplete("an event is not valid JSON", err) from err
        yield assembler.finish()

    async def aclose(self) -> None:
        """Close the SDK client and its connections."""
        await self._client.close()
