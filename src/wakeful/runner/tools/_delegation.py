"""Delegation as tools see it: the protocol the execution layer implements for the `task` tool.

The runner knows nothing about coordinators; a `Delegator` in `ToolContext.delegate` creates
and drives child sessions (`wakeful.execution._children`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Delegation:
    """What a delegation did: the child session, and (foreground only) how its turn ended."""

    child_id: str
    outcome: str | None = None
    text: str = ""


class Delegator(Protocol):
    """Creates and drives child sessions on behalf of a parent's tool call."""

    async def delegate(
        self, parent_id: str, prompt: str, agent: str | None, background: bool
    ) -> Delegation:
        """Start a child of `parent_id` on `prompt`; in the foreground, drive it to its end."""
        ...
