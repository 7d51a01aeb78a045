"""The scripted provider: replies read from a JSON script, for tests and examples.

A public contract (docs/design.md, "The scripted provider"). Invariant: a reply is a pure
function of the request (its newest user input, the assistant messages after it and
`request.attempt`), so a restarted process given the same request streams exactly the same
events, call ids included.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

from ..errors import (
    AuthenticationError,
    ContentFilterError,
    ContextOverflowError,
    IncompleteStreamError,
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    TransportError,
    UsageError,
)
from ..messages import (
    Block,
    IdentityMemo,
    Message,
    PrefixMemo,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    dump_message,
    shared_prefix,
)
from ._base import (
    Finish,
    FinishReason,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    UsageReport,
    estimate_request_tokens,
    estimate_text_tokens,
)

ErrorKind: TypeAlias = Literal[
    "rate_limit",
    "overloaded",
    "transport_unsent",
    "transport_unknown",
    "incomplete_stream",
    "context_overflow",
    "content_filter",
    "authentication",
    "invalid_request",
]

Sleep: TypeAlias = Callable[[float], Awaitable[None]]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ScriptedError(_Strict):
    """`error` of a reply: the first `times` attempts of the step fail with `kind`."""

    kind: ErrorKind
    times: int = Field(default=1, ge=0)
    after_chars: int | None = Field(default=None, ge=0)
    retry_after_ms: int | None = Field(default=None, ge=0)
    status_code: int | None = Field(default=None, ge=100, le=599)  # the HTTP status it carries
    code: str | None = None  # the provider's error code it carries


class ScriptedToolCall(_Strict):
    """One tool call of a reply."""

    name: str = Field(min_length=1)
    input: dict[str, JsonValue] = Field(default_factory=dict)


class ScriptedUsage(_Strict):
    """Usage a reply reports; a count left out is estimated (characters / 4)."""

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)


_NO_USAGE = ScriptedUsage()  # a reply without `usage`: every count estimated


class ScriptedReply(_Strict):
    """One reply; every key is optional (`{}` is an empty reply that finishes with `stop`)."""

    text: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    usage: ScriptedUsage | None = None
    finish: FinishReason | None = None
    error: ScriptedError | None = None


class ScriptedRule(_Strict):
    """A rule: a `re.search` pattern over the newest user input, and the replies in order."""

    match: str
    replies: tuple[ScriptedReply, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _compiles(self) -> ScriptedRule:
        try:
            re.compile(self.match)
        except re.error as err:
            raise ValueError(f"bad regex {self.match!r}: {err}") from None
        return self


class Script(_Strict):
    """A whole script file."""

    context_window: int = Field(default=200_000, gt=0)
    max_output_tokens: int = Field(default=8_000, gt=0)
    chunk_chars: int = Field(default=16, ge=1)
    chunk_delay_ms: int = Field(default=0, ge=0)
    rules: tuple[ScriptedRule, ...]


def parse_script(data: object, *, source: str = "script") -> Script:
    """Validate already-parsed JSON as a script; raise `UsageError` naming the first problem."""
    try:
        return Script.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise UsageError(f"{source}: {where}: {first['msg']}") from None


def load_script(path: str | Path) -> Script:
    """Read and validate a script file; raise `UsageError` if it is missing, not JSON or invalid."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"scripted provider: no script file at {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"scripted provider: cannot read {path}: {err}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise UsageError(f"scripted provider: {path} is not valid JSON: {err}") from None
    return parse_script(data, source=str(path))


def scripted_call_id(input_message_id: str, k: int, index: int) -> str:
    """Return the id of tool call `index` of reply `k` to the input message `input_message_id`."""
    digest = hashlib.sha256(json.dumps([input_message_id, k, index]).encode()).hexdigest()
    return f"call_{digest[:12]}"


def _message_id(input_message_id: str, k: int) -> str:
    digest = hashlib.sha256(json.dumps([input_message_id, k, "message"]).encode()).hexdigest()
    return f"msg_{digest[:32]}"


@dataclass(frozen=True)
class ScriptedTurn:
    """Where the request stands: its newest user input and how many replies followed it."""

    message_id: str
    text: str
    k: int


def _user_input_text(message: Message) -> str | None:
    """The text of `message` as a user input, or None when it is not one.

    A user input is a user message with text the user sent: tool results and text from a signal
    or an event (synthetic inputs) do not count.
    """
    if message.role != "user":
        return None
    texts = [
        b.text
        for b in message.blocks
        if isinstance(b, TextBlock) and (b.origin is None or b.origin.kind == "user")
    ]
    return "".join(texts) if texts else None


def locate_turn(messages: Sequence[Message]) -> ScriptedTurn:
    """Find the newest user input and count the assistant messages after it."""
    k = 0
    for message in reversed(messages):
        text = _user_input_text(message)
        if text is not None:
            return ScriptedTurn(message_id=message.id, text=text, k=k)
        if message.role == "assistant":
            k += 1
    raise InvalidRequestError("scripted provider: the request holds no user input")


@dataclass(slots=True)
class _Inputs:
    """Where the user inputs of one history stand: the messages last read (by identity), the
    positions of their user inputs with their texts, and `replies[i]`, the assistant messages
    among the first `i` (so the replies after an input are a difference)."""

    seen: Sequence[Message]
    inputs: list[tuple[int, str]]
    replies: list[int]


class TurnLocator:
    """`locate_turn` for requests whose messages extend an earlier request's (a turn's steps):
    the messages a request shares with the last one of its history (the same objects, compared
    in C) are not read again, so a step reads what is new, not the whole request. Returns
    exactly what `locate_turn` returns; one entry per first message, at most `size`."""

    __slots__ = ("_entries", "_size")

    def __init__(self, size: int = 64) -> None:
        self._entries: OrderedDict[int, _Inputs] = OrderedDict()
        self._size = size

    def __call__(self, messages: Sequence[Message]) -> ScriptedTurn:
        if not messages:
            return locate_turn(messages)
        key = id(messages[0])
        last = self._entries.get(key)
        if last is None or last.seen[0] is not messages[0]:
            last = _Inputs((), [], [0])
            kept = 0
        else:
            kept = shared_prefix(last.seen, messages)
            del last.replies[kept + 1 :]
            while last.inputs and last.inputs[-1][0] >= kept:
                last.inputs.pop()
        replies = last.replies
        for i in range(kept, len(messages)):
            message = messages[i]
            text = _user_input_text(message)
            if text is not None:
                last.inputs.append((i, text))
            replies.append(replies[-1] + (message.role == "assistant"))
        last.seen = messages
        self._entries[key] = last
        self._entries.move_to_end(key)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        if not last.inputs:
            raise InvalidRequestError("scripted provider: the request holds no user input")
        at, text = last.inputs[-1]
        return ScriptedTurn(message_id=messages[at].id, text=text, k=replies[-1] - replies[at + 1])


def _error_for(spec: ScriptedError, attempt: int) -> ProviderError:
    message = f"scripted {spec.kind} (attempt {attempt}, the first {spec.times} fail)"
    retry, status, code = spec.retry_after_ms, spec.status_code, spec.code
    if spec.kind == "transport_unsent":
        return TransportError(message, delivered=False, retry_after_ms=retry, code=code)
    if spec.kind == "transport_unknown":
        return TransportError(message, delivered=None, retry_after_ms=retry, code=code)
    kinds: dict[str, type[ProviderError]] = {
        "rate_limit": RateLimitError,
        "overloaded": OverloadedError,
        "incomplete_stream": IncompleteStreamError,
        "context_overflow": ContextOverflowError,
        "content_filter": ContentFilterError,
        "authentication": AuthenticationError,
        "invalid_request": InvalidRequestError,
    }
    return kinds[spec.kind](message, retry_after_ms=retry, status_code=status, code=code)


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class _Pacer:
    """Sleeps `delay_ms` before every chunk but the first."""

    def __init__(self, delay_ms: int, sleep: Sleep) -> None:
        self._delay = delay_ms / 1000
        self._sleep = sleep
        self._started = False

    async def tick(self) -> None:
        if self._started and self._delay > 0:
            await self._sleep(self._delay)
        self._started = True


def _message_json(message: Message) -> JsonValue:
    value: JsonValue = json.loads(dump_message(message))
    return value


# A message's JSON never changes (messages are frozen): decoded once per message object and
# shared by every request that carries it, read-only.
_wire_message = IdentityMemo(_message_json)


# The tools of consecutive requests are usually the same tuple: its JSON list is built once and
# handed out again (read-only), so a digest can reuse its encoding. Only the newest is kept.
_TOOLS: list[tuple[tuple[ToolSpec, ...], list[JsonValue]]] = []


def _wire_tools(tools: tuple[ToolSpec, ...]) -> list[JsonValue]:
    if _TOOLS and _TOOLS[0][0] is tools:
        return _TOOLS[0][1]
    value: list[JsonValue] = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in tools
    ]
    _TOOLS[:] = [(tools, value)]
    return value


class ScriptedProvider:
    """A `Provider` that answers from a `Script` (see docs/design.md for the contract)."""

    name = "scripted"
    # `wire_request` gives each message's memoized JSON object (see `_wire_message`).
    stable_wire_messages = True

    def __init__(self, script: Script, *, model: str = "scripted", sleep: Sleep = asyncio.sleep):
        self.script = script
        self.model = model
        self.context_window = script.context_window
        self.max_output_tokens = script.max_output_tokens
        self._sleep = sleep
        self._patterns = [re.compile(rule.match) for rule in script.rules]
        self._wire_messages = PrefixMemo(_wire_message)  # each step's request extends the last
        self._locate = TurnLocator()  # likewise: only a request's new messages are read

    @classmethod
    def from_file(cls, path: str | Path, *, sleep: Sleep = asyncio.sleep) -> ScriptedProvider:
        """Load the script at `path` (raising `UsageError` when it is bad) and wrap it."""
        return cls(load_script(path), model=str(path), sleep=sleep)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, object], *, sleep: Sleep = asyncio.sleep
    ) -> ScriptedProvider:
        """Build a provider from a script given as a dict (raising `UsageError` when it is bad)."""
        return cls(parse_script(dict(data)), sleep=sleep)

    def wire_request(self, request: ModelRequest) -> dict[str, JsonValue]:
        """Return the request as JSON: everything the reply may depend on, `attempt` included."""
        return {
            "model": request.model,
            "system": request.system,
            "messages": self._wire_messages(request.messages),
            "tools": _wire_tools(request.tools),
            "max_output_tokens": request.max_output_tokens,
            "temperature": request.temperature,
            "attempt": request.attempt,
        }

    def select(self, request: ModelRequest) -> tuple[ScriptedTurn, ScriptedReply]:
        """Return the turn and the reply the script gives `request`, or raise the request's error.

        Raises `ContextOverflowError` when the estimated request exceeds the context window and
        `InvalidRequestError` when there is no user input or no rule matches it.
        """
        estimate = estimate_request_tokens(request)
        if estimate > self.context_window:
            raise ContextOverflowError(
                f"scripted provider: request of ~{estimate} tokens exceeds the context window "
                f"of {self.context_window}"
            )
        turn = self._locate(request.messages)
        for pattern, rule in zip(self._patterns, self.script.rules, strict=True):
            if pattern.search(turn.text):
                return turn, rule.replies[min(turn.k, len(rule.replies) - 1)]
        shown = turn.text if len(turn.text) <= 200 else turn.text[:200] + "…"
        raise InvalidRequestError(f"scripted provider: no rule matches the user input {shown!r}")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream the scripted reply to `request`: input usage, reasoning, text, tool calls,
        usage, finish.

        A reply with an `error` fails the first `times` attempts (by `request.attempt`), after
        streaming `after_chars` characters of text when given.
        """
        turn, reply = self.select(request)
        error = reply.error if reply.error and request.attempt <= reply.error.times else None
        if error is not None and error.after_chars is None:
            raise _error_for(error, request.attempt)
        pacer = _Pacer(self.script.chunk_delay_ms, self._sleep)
        size = self.script.chunk_chars
        # The input side first, as Anthropic's `message_start` reports it: a stream cut short
        # still says what its request cost (output counted at the end).
        yield UsageReport(usage=self._usage(request, reply, None))
        for chunk in _chunks(reply.reasoning or "", size):
            await pacer.tick()
            yield ReasoningDelta(text=chunk)
        text = reply.text or ""
        if error is not None:
            for chunk in _chunks(text[: error.after_chars], size):
                await pacer.tick()
                yield TextDelta(text=chunk)
            raise _error_for(error, request.attempt)
        for chunk in _chunks(text, size):
            await pacer.tick()
            yield TextDelta(text=chunk)
        calls: list[ToolCallBlock] = []
        for index, call in enumerate(reply.tool_calls):
            block = ToolCallBlock(
                id=scripted_call_id(turn.message_id, turn.k, index),
                name=call.name,
                input=call.input,
            )
            calls.append(block)
            for fragment in _chunks(json.dumps(call.input, ensure_ascii=False), size):
                await pacer.tick()
                yield ToolCallDelta(call_id=block.id, name=block.name, input_json_fragment=fragment)
        usage = self._usage(request, reply, calls)
        yield UsageReport(usage=usage)
        yield Finish(
            reason=reply.finish or ("tool_calls" if calls else "stop"),
            message=_assemble(turn, reply, calls),
            usage=usage,
        )

    def _usage(
        self, request: ModelRequest, reply: ScriptedReply, calls: list[ToolCallBlock] | None
    ) -> Usage:
        """The reply's usage; `calls` None: the input side only (output 0, reported first)."""
        given = reply.usage or _NO_USAGE
        output_tokens = given.output_tokens
        if calls is None:
            output_tokens = 0
        elif output_tokens is None:
            output = (reply.reasoning or "") + (reply.text or "")
            output += "".join(c.name + json.dumps(c.input, ensure_ascii=False) for c in calls)
            output_tokens = estimate_text_tokens(output)
        input_tokens = given.input_tokens
        return Usage(
            input_tokens=estimate_request_tokens(request) if input_tokens is None else input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=given.cache_read_tokens,
            cache_write_tokens=given.cache_write_tokens,
        )

    async def aclose(self) -> None:
        """Nothing to release; present for the `Provider` protocol."""


def _assemble(turn: ScriptedTurn, reply: ScriptedReply, calls: list[ToolCallBlock]) -> Message:
    blocks: list[Block] = []
    if reply.reasoning:
        blocks.append(ThinkingBlock(text=reply.reasoning))
    if reply.text:
        blocks.append(TextBlock(text=reply.text))
    blocks.extend(calls)
    return Message(id=_message_id(turn.message_id, turn.k), role="assistant", blocks=tuple(blocks))
