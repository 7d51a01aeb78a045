"""The provider seam: requests, stream events, usage and the `Provider` protocol.

A provider turns one `ModelRequest` into a stream of events. Invariant: every *successful* stream
ends with exactly one `Finish`, which carries the whole assistant `Message` assembled from what was
streamed; a stream that cannot produce its `Finish` raises one of the typed `ProviderError` kinds
of `wakeful.errors` instead (never a bare SDK or transport exception).
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, assert_never, runtime_checkable

from pydantic import JsonValue

from ..errors import UsageError
from ..messages import (
    MEDIA_TYPES,
    AudioBlock,
    Block,
    CompactSummaryBlock,
    DocumentBlock,
    IdentityMemo,
    ImageBlock,
    Message,
    PrefixTotal,
    ProviderReasoningBlock,
    RedactedThinkingBlock,
    ServerToolResultBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)

FinishReason: TypeAlias = Literal["stop", "length", "tool_calls", "content_filter"]
# Whether the model may, must or must not call a tool, sent with the tools (`tool_choice`).
ToolChoice: TypeAlias = Literal["auto", "required", "none"]
TOOL_CHOICES: tuple[ToolChoice, ...] = ("auto", "required", "none")

# A media block counts as this many characters (about 1,000 tokens) in local size estimates:
# its base64 bytes say nothing useful about what the provider will charge for it.
MEDIA_ESTIMATE_CHARS = 4096


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: its name, what it does and the JSON Schema of its input."""

    name: str
    description: str
    input_schema: dict[str, JsonValue]


@dataclass(frozen=True)
class ModelRequest:
    """One physical model request.

    `messages` may hold system messages (chronological instruction changes); `system` is the
    assembled system prompt sent first. `attempt` counts the physical attempts of the same step,
    starting at 1; the runner sets it from the durable retry state, so it survives restarts.

    Prompt caching: the tools, `system` and `messages` up to the last `volatile` ones are the
    stable prefix a provider may cache; the last `volatile` messages are request-only (the
    work-state note, a summary instruction), sent after it and never part of it. `cache_key`
    names the conversation for providers that route by it (OpenAI's `prompt_cache_key`).
    """

    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_output_tokens: int | None = None
    temperature: float | None = None
    attempt: int = 1
    volatile: int = 0
    cache_key: str | None = None


@dataclass(frozen=True)
class Usage:
    """Token counts of one request, as the provider reported them (or estimated, when it did not)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class TextDelta:
    """A piece of assistant text, live only."""

    text: str
    type: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of reasoning (thinking) text, live only."""

    text: str
    type: Literal["reasoning_delta"] = field(default="reasoning_delta", init=False)


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of a tool call's JSON input; the first delta of a call may carry `""`."""

    call_id: str
    name: str
    input_json_fragment: str
    type: Literal["tool_call_delta"] = field(default="tool_call_delta", init=False)


@dataclass(frozen=True)
class UsageReport:
    """Usage so far (cumulative: a later report replaces an earlier one)."""

    usage: Usage
    type: Literal["usage"] = field(default="usage", init=False)


@dataclass(frozen=True)
class Finish:
    """The last event of every successful stream: why it stopped, the whole message, the usage."""

    reason: FinishReason
    message: Message
    usage: Usage
    type: Literal["finish"] = field(default="finish", init=False)


StreamEvent: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta | UsageReport | Finish


@runtime_checkable
class Provider(Protocol):
    """A model behind one wire protocol.

    `wire_request` is pure and returns exactly the JSON body `stream` will send for the same
    request, so the caller can persist and digest it before anything leaves the process.
    `stream` raises only `wakeful.errors.ProviderError` kinds; `aclose` releases connections.
    """

    name: str
    model: str
    context_window: int
    max_output_tokens: int

    def wire_request(self, request: ModelRequest) -> dict[str, JsonValue]:
        """Return the exact JSON body this provider sends for `request`."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Send `request` and yield its events; the last one is a `Finish`."""
        ...

    async def aclose(self) -> None:
        """Release the provider's clients and connections; idempotent."""
        ...


def _json_len(value: object) -> int:
    return len(json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")))


def block_chars(block: Block) -> int:
    """Return how many characters `block` counts for in a local size estimate."""
    if isinstance(block, TextBlock | ThinkingBlock):
        return len(block.text)
    if isinstance(block, ImageBlock | AudioBlock | VideoBlock | DocumentBlock):
        return MEDIA_ESTIMATE_CHARS
    if isinstance(block, ToolCallBlock | ServerToolUseBlock):
        return len(block.name) + _json_len(block.input)
    if isinstance(block, ToolResultBlock):
        if isinstance(block.output, str):
            return len(block.output)
        return sum(block_chars(part) for part in block.output)
    if isinstance(block, RedactedThinkingBlock):
        return len(block.data)
    if isinstance(block, ProviderReasoningBlock):
        return _json_len(block.data)
    if isinstance(block, ServerToolResultBlock):
        return _json_len(block.content)
    if isinstance(block, CompactSummaryBlock):
        return len(block.summary)
    assert_never(block)


def _message_chars(message: Message) -> int:
    return sum(block_chars(block) for block in message.blocks)


_SIZES = IdentityMemo(_message_chars)


def message_chars(message: Message) -> int:
    """Return how many characters `message` counts for in a local size estimate (memoized)."""
    return _SIZES(message)


def _tool_chars(tool: ToolSpec) -> int:
    return len(tool.name) + len(tool.description) + _json_len(tool.input_schema)


# A request's tools are the same objects step after step (`runner._prompt` keeps them by the
# tools section's digest): their size is measured once, not re-serialized for every request.
_TOOL_SIZES = IdentityMemo(_tool_chars, size=4096)

CHARS_PER_TOKEN = 4  # the local estimate's rule: a token is about four characters

# A request's messages extend the previous request's of the session (the very same objects):
# a running total of their sizes is kept per history, and only the new messages are measured.
_HISTORY_CHARS = PrefixTotal(message_chars, size=1024)


def _tools_chars(tools: tuple[ToolSpec, ...]) -> int:
    return sum(_TOOL_SIZES(tool) for tool in tools)


# The tools of a session's requests are the same tuple step after step: summed once.
_TOOLS_CHARS = IdentityMemo(_tools_chars, size=1024)


def _estimate(request: ModelRequest) -> int:
    chars = len(request.system) + _HISTORY_CHARS(request.messages) + _TOOLS_CHARS(request.tools)
    return math.ceil(chars / CHARS_PER_TOKEN)


# A provider may estimate one request more than once (the scripted one: to check the context
# window and for each usage report).
_ESTIMATES = IdentityMemo(_estimate, size=64)


def estimate_request_tokens(request: ModelRequest) -> int:
    """Estimate the input tokens of `request` as characters / 4, rounded up.

    Counts the system prompt, every block's content (media as a fixed allowance) and the tool
    specs. Deterministic: the same request always gives the same number (memoized: a request
    is frozen).
    """
    return _ESTIMATES(request)


def estimate_message_tokens(message: Message) -> int:
    """The estimate of one message: `estimate_request_tokens` of a request holding only it (no
    system prompt, no tools), from the message's memoized size, without building that request
    (a request per message filled the per-history memos with one-message entries)."""
    return math.ceil(message_chars(message) / CHARS_PER_TOKEN)


def media_kinds(accepts: Iterable[str] | None, default: frozenset[str]) -> frozenset[str]:
    """The media kinds a provider sends as they are (`accepts`, else `default`); the others go
    out as text labels. Raises `UsageError` naming a kind that is not a media block type."""
    if accepts is None:
        return default
    if isinstance(accepts, str):
        raise UsageError(f"accepts: expected a list of media kinds, not the string {accepts!r}")
    kinds = frozenset(accepts)
    unknown = sorted(kinds - MEDIA_TYPES)
    if unknown:
        raise UsageError(
            f"accepts: unknown media kind(s) {', '.join(map(repr, unknown))}; "
            f"expected some of {', '.join(sorted(MEDIA_TYPES))}"
        )
    return kinds


def check_tool_choice(value: str | None) -> ToolChoice | None:
    """`value` as a `ToolChoice` (None: send none); raises `UsageError` for anything else."""
    for choice in TOOL_CHOICES:
        if value == choice:
            return choice
    if value is None:
        return None
    raise UsageError(f"tool_choice: expected one of {', '.join(TOOL_CHOICES)}, not {value!r}")


def estimate_text_tokens(text: str) -> int:
    """Estimate the tokens of `text` as characters / 4, rounded up."""
    return math.ceil(len(text) / 4)
