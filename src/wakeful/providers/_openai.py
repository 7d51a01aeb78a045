"""The Chat Completions adapter, through the official `openai` SDK.

Serves `openai:MODEL` and `openai-compatible:MODEL@BASE_URL` (llama.cpp, vLLM, Ollama, ...).
The SDK's own retries are off (`max_retries=0`): retry is durable and belongs to the runner.
Invariant: `wire_request` is the exact JSON body `stream` sends, and a stream counts as complete
only once it reported a `finish_reason` (and, from OpenAI itself, the usage chunk after it).
Compatible servers get what they accept (docs/providers.md): `""` for an assistant message with
only tool calls, text-only content as one string, media they cannot take as text labels, and a
`tool_choice` when one is configured. An empty 200 stream from one is diagnosed (`_empty_stream`)
before it is called incomplete: llama.cpp's Python server answers an oversized prompt that way.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
import openai
from pydantic import JsonValue

from ..clock import Clock
from ..errors import (
    AuthenticationError,
    ContextOverflowError,
    IncompleteStreamError,
    ProviderError,
)
from ..messages import (
    MEDIA_TYPES,
    Block,
    Message,
    ProviderReasoningBlock,
    TextBlock,
    ToolCallBlock,
    label_media,
    to_openai_chat,
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
    estimate_request_tokens,
    estimate_text_tokens,
    media_kinds,
)
from ._errors import HttpFailure, classify_connection, classify_http, incomplete

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
# Where Chat Completions servers put reasoning text: vLLM, llama.cpp, DeepSeek use
# `reasoning_content`; OpenRouter and Ollama use `reasoning`.
REASONING_FIELDS = ("reasoning_content", "reasoning")
COMPATIBLE_DUMMY_KEY = "sk-no-key-required"

Flavor = Literal["openai", "openai-compatible"]
# Media each flavor sends as it is by default (`accepts=` overrides): OpenAI takes images, wav/mp3
# audio and PDF files; most compatible servers (llama.cpp, vLLM, Ollama) take images at most.
DEFAULT_ACCEPTS: dict[Flavor, frozenset[str]] = {
    "openai": MEDIA_TYPES,
    "openai-compatible": frozenset({"image"}),
}


@dataclass
class _OpenCall:
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Assembler:
    """Gathers chunk deltas into `StreamEvent`s and the final message."""

    flavor: Flavor
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    reasoning_field: str = "reasoning_content"
    calls: dict[int, _OpenCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage | None = None
    chunks: int = 0

    def feed(self, chunk: Any) -> list[StreamEvent]:
        self.chunks += 1
        out: list[StreamEvent] = []
        if chunk.choices:
            choice = chunk.choices[0]
            if choice.delta is not None:
                out.extend(self._delta(choice.delta))
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        if chunk.usage is not None:
            details = getattr(chunk.usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) or 0
            self.usage = Usage(
                input_tokens=chunk.usage.prompt_tokens or 0,
                output_tokens=chunk.usage.completion_tokens or 0,
                cache_read_tokens=cached,
            )
            out.append(UsageReport(usage=self.usage))
        elif self.flavor == "openai-compatible" and (timed := _timings_usage(chunk)) is not None:
            self.usage = timed
            out.append(UsageReport(usage=timed))
        return out

    def _delta(self, delta: Any) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for name in REASONING_FIELDS:
            piece = getattr(delta, name, None)
            if isinstance(piece, str) and piece:
                self.reasoning_field = name
                self.reasoning.append(piece)
                out.append(ReasoningDelta(text=piece))
        for piece in (delta.content, delta.refusal):
            if piece:
                self.text.append(piece)
                out.append(TextDelta(text=piece))
        for call in delta.tool_calls or ():
            out.extend(self._tool_call(call))
        return out

    def _tool_call(self, wire: Any) -> list[StreamEvent]:
        index = wire.index if wire.index is not None else len(self.calls)
        function = wire.function
        current = self.calls.get(index)
        if current is None:
            call_id = wire.id or f"call_{uuid.uuid4().hex[:24]}"
            current = self.calls[index] = _OpenCall(call_id, (function and function.name) or "")
            first: list[StreamEvent] = [ToolCallDelta(current.call_id, current.name, "")]
        else:
            first = []
            if function is not None and function.name and not current.name:
                current.name = function.name
        fragment = (function.arguments if function is not None else None) or ""
        if not fragment:
            return first
        current.arguments.append(fragment)
        return [*first, ToolCallDelta(current.call_id, current.name, fragment)]

    def finish(self, request: ModelRequest) -> Finish:
        if self.finish_reason is None:
            raise incomplete("no finish_reason")
        if self.flavor == "openai" and self.usage is None:
            raise incomplete("no usage chunk after the finish_reason")
        blocks: list[Block] = []
        if self.reasoning and self.flavor == "openai-compatible":
            data: JsonValue = {self.reasoning_field: "".join(self.reasoning)}
            blocks.append(ProviderReasoningBlock(provider="openai-compatible", data=data))
        if self.text:
            blocks.append(TextBlock(text="".join(self.text)))
        reason = FINISH_REASONS.get(self.finish_reason, "stop")
        for index in sorted(self.calls):
            call = self.calls[index]
            try:
                arguments = _arguments(call.arguments)
            except IncompleteStreamError:
                if reason == "length":  # the output limit cut the call: it cannot run
                    continue
                raise
            blocks.append(ToolCallBlock(id=call.call_id, name=call.name, input=arguments))
        return Finish(
            reason=reason,
            message=Message(role="assistant", blocks=tuple(blocks)),
            usage=self.usage or self._estimate(request),
        )

    def _estimate(self, request: ModelRequest) -> Usage:
        """Usage for a compatible server that reported none (llama-cpp-python's streams carry
        no usage): characters / 4, as `Usage` promises when the provider is silent."""
        if self.flavor == "openai":
            return Usage(0, 0)  # unreachable: `finish` demands OpenAI's usage chunk
        written = "".join(self.text) + "".join(self.reasoning)
        written += "".join(a for c in self.calls.values() for a in (c.name, *c.arguments))
        return Usage(estimate_request_tokens(request), estimate_text_tokens(written))


def _timings_usage(chunk: Any) -> Usage | None:
    """Usage from llama.cpp's `timings` object (`llama-server` puts it on its last chunk; older
    builds send no `usage` there): `prompt_n` tokens evaluated, `cache_n` reused from its cache,
    `predicted_n` generated. None when the chunk has no usable `timings`."""
    timings = (chunk.model_extra or {}).get("timings")
    if not isinstance(timings, dict):
        return None
    prompt, cached, predicted = (timings.get(k) for k in ("prompt_n", "cache_n", "predicted_n"))
    if not isinstance(prompt, int) or not isinstance(predicted, int):
        return None
    cached = cached if isinstance(cached, int) and cached > 0 else 0
    return Usage(max(0, prompt) + cached, max(0, predicted), cache_read_tokens=cached)


def _arguments(fragments: list[str]) -> dict[str, JsonValue]:
    raw = "".join(fragments)
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        raise incomplete("tool arguments are not complete JSON", err) from None
    if not isinstance(value, dict):
        raise incomplete(f"tool arguments are a JSON {type(value).__name__}, not an object")
    return value


def _server_message(err: openai.APIError) -> str:
    """The server's own words: the body's `message` (or FastAPI's `detail`), else the SDK's
    "Error code: N - <body>" text."""
    body = err.body
    if isinstance(body, dict):
        for key in ("message", "detail"):
            if isinstance(body.get(key), str) and body[key].strip():
                return str(body[key]).strip()
    return err.message


def _failure(err: openai.APIError, flavor: Flavor) -> HttpFailure:
    status = err.status_code if isinstance(err, openai.APIStatusError) else 200
    headers = err.response.headers if isinstance(err, openai.APIStatusError) else {}
    return HttpFailure(
        status=status,
        error_type=err.type,
        error_code=err.code,
        message=_server_message(err),
        headers=headers,
        # OpenAI sends `context_length_exceeded`; vLLM and others only say it in words, and
        # llama.cpp's Python server answers a request it cannot validate with a 500.
        text_overflow=flavor == "openai-compatible",
        text_invalid=flavor == "openai-compatible",
    )


class OpenAIProvider:
    """A `Provider` for Chat Completions: `openai:MODEL` or `openai-compatible:MODEL@URL`."""

    def __init__(
        self,
        model: str,
        *,
        context_window: int,
        max_output_tokens: int,
        flavor: Flavor = "openai",
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 600.0,
        clock: Clock | None = None,
        tool_choice: ToolChoice | None = None,
        accepts: Iterable[str] | None = None,
    ) -> None:
        self.name: str = flavor
        self.flavor: Flavor = flavor
        self.model = model
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self.tool_choice = check_tool_choice(tool_choice)
        self.accepts = media_kinds(accepts, DEFAULT_ACCEPTS[flavor])
        self._clock = clock
        if flavor == "openai":
            self._api_key = api_key or os.environ.get("OPENAI_API_KEY")
            base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        else:
            # Never send an OpenAI key to a third-party server unless told to.
            self._api_key = (
                api_key or os.environ.get("OPENAI_COMPATIBLE_API_KEY") or COMPATIBLE_DUMMY_KEY
            )
        self._timeout = timeout
        self._client = self._new_client(base_url, timeout)

    def _new_client(self, base_url: str | None, timeout: float) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=self._api_key or "missing", base_url=base_url, max_retries=0, timeout=timeout
        )

    def wire_request(self, request: ModelRequest) -> dict[str, JsonValue]:
        """Return the exact Chat Completions body `stream` sends for `request`."""
        messages: list[JsonValue] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        history = list(request.messages)
        if self.accepts != MEDIA_TYPES:
            history = label_media(history, self.accepts)
        compatible = self.flavor == "openai-compatible"
        messages.extend(to_openai_chat(history, provider=self.flavor, string_content=compatible))
        limit = request.max_output_tokens or self.max_output_tokens
        body: dict[str, JsonValue] = {"model": request.model, "messages": messages}
        # OpenAI deprecated `max_tokens`; compatible servers mostly know only `max_tokens`.
        body["max_completion_tokens" if self.flavor == "openai" else "max_tokens"] = limit
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.tools
            ]
            if self.tool_choice is not None:
                body["tool_choice"] = self.tool_choice
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.cache_key is not None and self.flavor == "openai":
            body["prompt_cache_key"] = request.cache_key  # one session, one cache route
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        return body

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Send `request` and stream its events; failures raise typed `ProviderError`s."""
        body = self.wire_request(request)
        if not self._api_key:
            raise AuthenticationError("OPENAI_API_KEY is not set (nor an api_key option)")
        try:
            response = await self._client.chat.completions.create(**body)  # type: ignore[call-overload]  # body: a dict the wire layer built, not the SDK's TypedDicts
        except openai.APIStatusError as err:
            raise classify_http(_failure(err, self.flavor), self._clock) from err
        except openai.APIConnectionError as err:
            raise classify_connection(err) from err
        assembler = _Assembler(flavor=self.flavor)
        try:
            async with response:
                async for chunk in response:
                    for out in assembler.feed(chunk):
                        yield out
        except (openai.APIConnectionError, httpx2.TransportError) as err:
            raise incomplete("connection lost", err) from err
        except json.JSONDecodeError as err:  # a garbled event: the stream is unusable from here
            raise incomplete("an event is not valid JSON", err) from err
        except openai.APIError as err:  # an error object inside the stream
            raise classify_http(_failure(err, self.flavor), self._clock) from err
        if assembler.chunks == 0 and self.flavor == "openai-compatible":
            raise await self._empty_stream(request, body)
        yield assembler.finish(request)

    async def _empty_stream(
        self, request: ModelRequest, body: dict[str, JsonValue]
    ) -> ProviderError:
        """Why a compatible server accepted the request (200) and then sent nothing at all.

        llama.cpp's Python server does this for a prompt over its window (its non-streamed
        answer is a proper 400 `context_length_exceeded`). An estimate over the configured
        window settles it at once; otherwise the same messages are sent once more, not streamed
        and with `max_tokens: 1`, and the server's answer names the error. Only if that probe
        is accepted is the empty stream an `IncompleteStreamError` (retried like a cut stream).
        The probe goes on a connection of its own: the server closes the one the empty stream
        came on (its stream failed), and a pooled connection could be that one.
        """
        estimate = estimate_request_tokens(request)
        if estimate > self.context_window:
            return ContextOverflowError(
                f"empty stream after a request of about {estimate} tokens, over the context "
                f"window of {self.context_window}"
            )
        probe = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        probe["max_tokens"] = 1
        try:
            async with self._new_client(str(self._client.base_url), self._timeout) as client:
                await client.chat.completions.create(**probe)  # type: ignore[call-overload]  # probe: a plain dict, not the SDK's TypedDicts
        except openai.APIStatusError as err:
            found = classify_http(_failure(err, self.flavor), self._clock)
            message = f"empty stream; the same request not streamed: {found}"
            return type(found)(
                message,
                retry_after_ms=found.retry_after_ms,
                status_code=found.status_code,
                code=found.code,
            )
        except openai.APIConnectionError as err:
            return incomplete("empty stream (and the probe after it failed)", err)
        return incomplete("empty stream (the same request not streamed was accepted)")

    async def aclose(self) -> None:
        """Close the SDK client and its connections."""
        await self._client.close()
