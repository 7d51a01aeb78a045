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
]


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """Something happening now in a session; `data` depends on `kind`."""

    session_id: str
    kind: LiveKind
    data: dict[str, JsonValue] = field(default_factory=dict)


LiveListener: TypeAlias = Callable[[LiveEvent], None]
