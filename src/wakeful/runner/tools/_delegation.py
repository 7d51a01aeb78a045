"""Delegation as tools see it: the protocol the execution layer implements for the `task` tool.

The runner knows nothing about coordinators; a `Delegator` in `ToolContext.delegate` creates
and drives child sessions (`wakeful.execution._children`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pydantic import JsonValue


@dataclass(frozen=True, slots=True)
class Delegation:
    """What a delegation did: the child session, and (foreground only) how its turn ended.
    `jobs` (background only): the parent's work-state `jobs` with the child added, running."""

    child_id: str
    outcome: str | None = None
    text: str = ""
    jobs: tuple[dict[str, JsonValue], ...] | None = None


@dataclass(frozen=True)
class Lineage:
    """Where a child comes from: the parent's turn and tool call that asked for it, its display
    label (None: `child-N`, numbered among its parent's children), and the earlier child of the
    same parent it resumes (None: a new child session)."""

    turn_id: str | None = None
    call_id: str | None = None
    label: str | None = None
    resume: str | None = None


class Delegator(Protocol):
    """Creates and drives child sessions on behalf of a parent's tool call."""

    async def delegate(
        self,
        parent_id: str,
        prompt: str,
        agent: str | None,
        background: bool,
        *,
        lineage: Lineage | None = None,
    ) -> Delegation:
        """Start a child of `parent_id` on `prompt`; in the foreground, drive it to its end.
        `lineage`: the parent's turn and call, the child's label, the child it resumes."""
        ...
