"""Live-only events for in-process subscribers (never stored): streamed text, tool progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from pydantic import JsonValue

LiveKind: TypeAlias = Literal[
    "step",
    "text",
    "reasoning",
    "tool_input",
    "tool_start",
    "tool_end",
    "retry",
    "turn_end",
    "compaction",
    "notice",  # something the person should know now (a budget's notice share reached)
    # Published for hooks, the event stream and tracing; the single `LiveListener` of a
    # `Runtime` does not see them (`LEGACY_KINDS`), so its current callers read what they did.
    "session_start",
    "session_end",
    "turn_start",
    "step_start",
    "step_end",
    "step_done",
    "pairing_repair",
    "input_delivered",
]

LEGACY_KINDS: frozenset[str] = frozenset(
    {
        "step",
        "text",
        "reasoning",
        "tool_input",
        "tool_start",
        "tool_end",
        "retry",
        "turn_end",
        "compaction",
        "notice",
    }
)
"""The kinds a `LiveListener` set on a `Runtime` receives (what it received before hooks)."""


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """Something happening now in a session; `data` depends on `kind`."""

    session_id: str
    kind: LiveKind
    data: dict[str, JsonValue] = field(default_factory=dict)


LiveListener: TypeAlias = Callable[[LiveEvent], None]
