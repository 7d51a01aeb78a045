"""`runtime.events(session_id)`: an async stream of one session's live and durable events.

The invariant: **the stream never slows the turn.** The turn publishes live events to every
open stream of its session without waiting (a bounded buffer per stream; when a reader falls
more than `max_buffered` live events behind, the oldest are dropped and counted in
`dropped`). Durable events are not buffered at all: before yielding a live event other than a
delta, the stream reads the log after the last seq it yielded (in a worker thread), so every
durable event committed before that live event comes first, none is ever dropped, and a
reader sees each once, in log order (`docs/events.md`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TypeAlias

from pydantic import JsonValue

from ..events import StoredEvent
from ..runner import LiveEvent
from ..store import LocalStore
from ._off_loop import off_loop

_DELTAS = frozenset({"text", "reasoning", "tool_input"})  # no durable read before these


@dataclass(frozen=True, slots=True)
class TextChunk:
    """Streamed reply text (live only: the whole reply arrives as a durable `message.added`)."""

    session_id: str
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningChunk:
    """Streamed reasoning (thinking) text, live only."""

    session_id: str
    text: str


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A tool call's progress: ``input`` (its arguments streaming), ``start`` or ``end``."""

    session_id: str
    phase: str
    call_id: str
    name: str
    data: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StepStart:
    """A model request is about to be sent (step and attempt numbers)."""

    session_id: str
    turn_id: str
    step: int
    attempt: int


@dataclass(frozen=True, slots=True)
class StepEnd:
    """A model reply finished: why, and its token usage."""

    session_id: str
    turn_id: str
    step: int
    finish_reason: str
    input_tokens: int
    output_tokens: int
    tool_calls: int


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """A turn ended (its `turn.ended` is durable before this is yielded)."""

    session_id: str
    turn_id: str | None
    outcome: str
    error: str | None


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """Any other live event: turn and session start, retries, compaction, repairs, delivery."""

    session_id: str
    kind: str
    data: Mapping[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Durable:
    """An event of the session's log (`event.event` is the typed durable event)."""

    event: StoredEvent


StreamItem: TypeAlias = (
    TextChunk | ReasoningChunk | ToolProgress | StepStart | StepEnd | TurnEnd | Lifecycle | Durable
)


def _str(data: Mapping[str, JsonValue], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def _int(data: Mapping[str, JsonValue], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def typed(live: LiveEvent, turn_id: str | None) -> StreamItem:
    """The typed stream item of one live event (`turn_id`: the turn it belongs to)."""
    sid, d = live.session_id, live.data
    match live.kind:
        case "text":
            return TextChunk(sid, _str(d, "text"))
        case "reasoning":
            return ReasoningChunk(sid, _str(d, "text"))
        case "tool_input" | "tool_start" | "tool_end":
            phase = live.kind.removeprefix("tool_")
            return ToolProgress(sid, phase, _str(d, "call_id"), _str(d, "name"), d)
        case "step_start":
            return StepStart(sid, _str(d, "turn_id"), _int(d, "step"), _int(d, "attempt"))
        case "step_end":
            return StepEnd(
                sid,
                _str(d, "turn_id"),
                _int(d, "step"),
                _str(d, "finish_reason"),
                _int(d, "input_tokens"),
                _int(d, "output_tokens"),
                _int(d, "tool_calls"),
            )
        case "turn_end":
            error = d.get("error")
            return TurnEnd(
                sid, turn_id, _str(d, "outcome"), error if isinstance(error, str) else None
            )
        case _:
            return Lifecycle(sid, live.kind, d)


class Streams:
    """The open event streams of one runtime, by session."""

    def __init__(self) -> None:
        self._open: dict[str, set[EventStream]] = {}

    def publish(self, live: LiveEvent) -> None:
        """Hand a live event to every open stream of its session (never blocks)."""
        for stream in self._open.get(live.session_id, ()):
            stream.push(live)

    def add(self, stream: EventStream) -> None:
        self._open.setdefault(stream.session_id, set()).add(stream)

    def remove(self, stream: EventStream) -> None:
        found = self._open.get(stream.session_id)
        if found is not None:
            found.discard(stream)
            if not found:
                del self._open[stream.session_id]


class EventStream:
    """One reader's stream of a session's events (see the module docstring).

    Subscribed when made: events published after `runtime.events(...)` returns are in it, so
    make the stream before sending the input it should see. Close it with `aclose` or use it
    in `async with`; breaking out of `async for` leaves it open until then.
    """

    def __init__(
        self,
        streams: Streams,
        store: LocalStore,
        session_id: str,
        *,
        after: int,
        durable: bool = True,
        max_buffered: int = 10_000,
    ) -> None:
        self.session_id = session_id
        self.durable = durable
        self.max_buffered = max_buffered
        self.dropped = 0  # live events dropped because the reader fell behind
        self._streams = streams
        self._store = store
        self._seq = after  # the last durable seq yielded
        self._live: deque[LiveEvent] = deque()
        self._ready = asyncio.Event()
        self._pending: deque[StreamItem] = deque()
        self._turn_id: str | None = None
        self._closed = False
        streams.add(self)

    def push(self, live: LiveEvent) -> None:
        """Buffer a live event (called by the runtime, on the loop)."""
        if len(self._live) >= self.max_buffered:
            self._live.popleft()
            self.dropped += 1
        self._live.append(live)
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[StreamItem]:
        return self

    async def __anext__(self) -> StreamItem:
        while not self._pending:
            if self._closed:
                raise StopAsyncIteration
            if not self._live:
                self._ready.clear()
                await self._ready.wait()
                continue
            live = self._live.popleft()
            if live.kind == "turn_start":
                turn = live.data.get("turn_id")
                self._turn_id = turn if isinstance(turn, str) else None
            progress = live.kind == "compaction" and live.data.get("phase") == "progress"
            if self.durable and live.kind not in _DELTAS and not progress:
                await self._read_durable()
            self._pending.append(typed(live, self._turn_id))
        return self._pending.popleft()

    async def _read_durable(self) -> None:
        found = await off_loop(self._store.events, self.session_id, after=self._seq)
        for stored in found:
            self._pending.append(Durable(stored))
            self._seq = stored.seq

    async def aclose(self) -> None:
        """Stop the stream: a reader waiting in `async for` ends; nothing more is buffered."""
        self._closed = True
        self._streams.remove(self)
        self._ready.set()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
