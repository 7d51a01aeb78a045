"""The tool seam: `Tool` protocol, context, outcome, permissions, and running one call safely.

Invariant: running a call never raises for a tool's own failure (bad input, denied permission,
an exception inside the tool): it becomes an `is_error` result the model sees. Only
cancellation propagates.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, JsonValue, ValidationError

from ...messages import ToolCallBlock, ToolResultBlock, ToolResultPart
from ...providers import ToolSpec

if TYPE_CHECKING:
    from ._task import Delegator

Permission = Literal["allow", "ask", "deny"]
Ask = Callable[[str, dict[str, object]], Awaitable[bool]]


@dataclass(frozen=True)
class ToolContext:
    """Where tools work: the workspace root file tools are confined to, and the session.

    `delegate` creates child sessions for the `task` tool; None where no coordinator runs.
    """

    workspace: Path
    session_id: str
    env: dict[str, str] | None = None
    delegate: Delegator | None = None


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returns; `work_state` is (kind, value) for the work-state tools."""

    output: str | tuple[ToolResultPart, ...]
    is_error: bool = False
    metadata: dict[str, JsonValue] | None = None
    work_state: tuple[str, JsonValue] | None = None


class Tool(Protocol):
    """A tool the model may call."""

    name: str
    description: str
    input_model: type[BaseModel]
    read_only: bool

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Do the work; report failures the model should see as `is_error` outcomes."""
        ...


class ToolFailure(Exception):
    """Raised inside a tool for a failure the model should see as an error result."""


@functools.cache
def _schema(model: type[BaseModel]) -> dict[str, JsonValue]:
    return model.model_json_schema()


def tool_spec(tool: Tool) -> ToolSpec:
    """The provider-facing spec of a tool (JSON Schema from its input model, computed once)."""
    return ToolSpec(tool.name, tool.description, _schema(tool.input_model))


@dataclass(frozen=True)
class PermissionPolicy:
    """Per-tool permission: allow, ask or deny; `default` for unlisted tools."""

    rules: Mapping[str, Permission] = field(default_factory=dict)
    default: Permission = "allow"

    def decide(self, tool_name: str) -> Permission:
        """The permission for `tool_name`."""
        return self.rules.get(tool_name, self.default)


def _error(call: ToolCallBlock, text: str) -> tuple[ToolResultBlock, ToolOutcome]:
    outcome = ToolOutcome(text, is_error=True)
    return ToolResultBlock(call_id=call.id, output=text, is_error=True), outcome


async def run_tool_call(
    tools: Mapping[str, Tool],
    call: ToolCallBlock,
    ctx: ToolContext,
    policy: PermissionPolicy,
    ask: Ask | None = None,
) -> tuple[ToolResultBlock, ToolOutcome]:
    """Validate, authorize and run one call; every failure becomes an error result."""
    tool = tools.get(call.name)
    if tool is None:
        return _error(call, f"unknown tool {call.name!r}; available: {', '.join(sorted(tools))}")
    try:
        args = tool.input_model.model_validate(call.input)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "input"
        return _error(call, f"invalid input for {call.name}: {where}: {first['msg']}")
    permission = policy.decide(call.name)
    if permission == "deny":
        return _error(call, f"permission denied: {call.name} is not allowed here")
    if permission == "ask":
        if ask is None:
            return _error(
                call, f"permission denied: {call.name} needs approval and nobody can approve it"
            )
        if not await ask(call.name, dict(call.input)):
            return _error(call, f"permission denied: the user declined {call.name}")
    try:
        outcome = await tool.run(args, ctx)
    except ToolFailure as err:
        return _error(call, str(err))
    except Exception as err:  # a tool's own bug is the model's information, not our crash
        return _error(call, f"{call.name} failed: {type(err).__name__}: {err}")
    result = ToolResultBlock(
        call_id=call.id, output=outcome.output, is_error=outcome.is_error, metadata=outcome.metadata
    )
    return result, outcome
