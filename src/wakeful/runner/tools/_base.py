"""The tool seam: `Tool` protocol, context, outcome, permissions, and running one call safely.

Invariant: running a call never raises for a tool's own failure (an unknown tool, bad input, a
denied permission, an exception inside the tool): it becomes an `is_error` result the model
sees. Only cancellation propagates.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from ...errors import UsageError
from ...messages import ToolCallBlock, ToolResultBlock, ToolResultPart
from ...providers import ToolSpec
from ._delegation import Delegator
from ._state import ExtensionState, StateBackend

Permission = Literal["allow", "ask", "deny"]
Ask = Callable[[str, dict[str, object]], Awaitable[bool]]

MAX_INPUT_ERRORS = 5


@dataclass(frozen=True)
class ToolContext:
    """Where tools work: the workspace root file tools are confined to, and the session.

    `env` is added to the process environment of `shell`. `delegate` creates child sessions
    for the `task` tool; None where no coordinator runs. `state` is where the session's
    extension state lives (given by the runtime), reached through `extension_state`.
    `turn_id` and `call_id` name the turn and the call a tool runs for (None outside a call).
    """

    workspace: Path
    session_id: str
    env: dict[str, str] | None = None
    delegate: Delegator | None = None
    state: StateBackend | None = None
    turn_id: str | None = None
    call_id: str | None = None

    def extension_state(self, namespace: str) -> ExtensionState:
        """This session's extension state under `namespace` (`docs/tools.md`); `UsageError`
        where no runtime keeps state (a test's bare context)."""
        if self.state is None:
            raise UsageError("this tool context has no session state (run it in a runtime)")
        return ExtensionState(self.state, self.session_id, namespace)


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returns.

    `work_state` is `(kind, value)` with kind `goal`, `plan` or `todos`; the runner persists it
    as the new value of that kind. `blobs` are stored (once, by digest) with the result: the
    file contents a file tool replaced and wrote, which a rewind restores (`docs/rewind.md`).
    Artifacts announced in `metadata["artifacts"]` are recorded with the result.
    """

    output: str | tuple[ToolResultPart, ...]
    is_error: bool = False
    metadata: dict[str, JsonValue] | None = None
    work_state: tuple[str, JsonValue] | None = None
    blobs: tuple[bytes, ...] = ()


class Tool(Protocol):
    """A tool the model may call. `read_only` tools change nothing outside the session (not the
    workspace, nothing else): a step whose calls are all read-only may run them before they are
    durable and commit the reply together with the results (invariant 6 protects side effects,
    and they have none). A tool may also have `idempotent = True` (optional; absent means
    False): a call made twice has the effect of one, so a transient failure of it is retried
    (`ToolUnavailable`, `retryable_failure`).

    `run` receives an instance of `input_model` (validated by `run_tool_call`); it is typed
    `Any` so that each tool can name its own input class.
    """

    name: str
    description: str
    read_only: bool

    @property
    def input_model(self) -> type[BaseModel]:
        """The pydantic model of the tool's input; its JSON Schema is what the model sees."""
        ...

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutcome:
        """Do the work; report failures the model should see as `is_error` outcomes."""
        ...


class ToolInput(BaseModel):
    """Base of the built-in tools' inputs: unknown fields are an error the model sees."""

    model_config = ConfigDict(extra="forbid")


class ToolFailure(Exception):
    """Raised inside a tool for a failure the model should see as an error result."""


class ToolUnavailable(ToolFailure):
    """Raised inside a tool for a failure that may pass when the call is made again: a
    connection lost, a service not reachable. `sent` False: the call surely never reached what
    it calls (nothing ran), so it is always retried; True (the default): it may have partly
    run, so it is retried only when the tool is safe to retry (`retry_safe`). A retried call
    waits a durable backoff (`retry.scheduled`) first; once the retry budget is spent, or when
    it may not be retried, it is an error result for the model (`docs/tools.md`, "Retries")."""

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


def retry_safe(tool: Tool) -> bool:
    """Whether a call of `tool` may be made again after it may have partly run: the tool says
    it is `idempotent`, or it is `read_only` (it changes nothing outside the session)."""
    return bool(getattr(tool, "idempotent", False) or tool.read_only)


def retryable_failure(tool: Tool, err: BaseException) -> bool:
    """Whether `err`, raised by a call of `tool`, goes through the durable retry: a
    `ToolUnavailable` that was not sent, or one that was (or a `TimeoutError`) from a tool
    that is safe to retry. Anything else is a result for the model."""
    if isinstance(err, ToolUnavailable):
        return not err.sent or retry_safe(tool)
    return isinstance(err, TimeoutError) and retry_safe(tool)


# Asked before a failed call is made again: wait the retry's durable backoff and answer True,
# or answer False (the budget is spent) and the failure is the call's result.
RetryCall = Callable[[ToolCallBlock, BaseException], Awaitable[bool]]


@functools.cache
def _schema(model: type[BaseModel]) -> dict[str, JsonValue]:
    return model.model_json_schema()


def tool_spec(tool: Tool) -> ToolSpec:
    """The provider-facing spec of a tool (JSON Schema from its input model, computed once)."""
    return ToolSpec(tool.name, tool.description, _schema(tool.input_model))


@dataclass(frozen=True)
class PermissionPolicy:
    """Per-tool permission: allow, ask or deny.

    A tool's rule is the one naming it exactly, else the most specific glob pattern matching it
    (`mcp__github__*`: the longest pattern wins, ties by order), else the `"*"` rule, else its
    `builtin` default, else `default`.
    """

    rules: Mapping[str, Permission] = field(default_factory=dict)
    default: Permission = "allow"
    # Built-in per-tool defaults, used below the configured rules (`"*"` included): the runtime
    # passes `config.DEFAULT_PERMISSIONS` (shell and writes ask).
    builtin: Mapping[str, Permission] = field(default_factory=dict)

    def decide(self, tool_name: str) -> Permission:
        """The permission for `tool_name`: its rule, a matching pattern, `"*"`, the built-in
        default."""
        if tool_name in self.rules:
            return self.rules[tool_name]
        patterns = [p for p in self.rules if p != "*" and fnmatch.fnmatchcase(tool_name, p)]
        if patterns:
            return self.rules[max(patterns, key=len)]
        if "*" in self.rules:
            return self.rules["*"]
        return self.builtin.get(tool_name, self.default)


def permission_key(tool: Tool | None, call_name: str) -> str:
    """The name `[permissions]` rules match for a call: the tool's own `permission_key` when it
    declares one (a `FunctionTool` may share a key with others), else the called name."""
    key = getattr(tool, "permission_key", None)
    return key if isinstance(key, str) and key else call_name


def _error(call: ToolCallBlock, text: str) -> tuple[ToolResultBlock, ToolOutcome]:
    outcome = ToolOutcome(text, is_error=True)
    return ToolResultBlock(call_id=call.id, output=text, is_error=True), outcome


def input_errors(tool_name: str, err: ValidationError) -> str:
    """One line per schema violation (at most five), each naming the offending field."""
    lines = []
    for item in err.errors()[:MAX_INPUT_ERRORS]:
        where = ".".join(str(p) for p in item["loc"]) or "input"
        msg = "unexpected field" if item["type"] == "extra_forbidden" else item["msg"]
        lines.append(f"{where}: {msg}")
    more = err.error_count() - MAX_INPUT_ERRORS
    if more > 0:
        lines.append(f"({more} more)")
    return f"invalid input for {tool_name}: " + "; ".join(lines)


def declined(tool_name: str) -> str:
    """The result text of a call the user declined."""
    return f"permission denied: the user declined {tool_name}"


async def _authorize(
    call: ToolCallBlock, key: str, policy: PermissionPolicy, ask: Ask | None, approved: bool | None
) -> str | None:
    """None when the call may run, else the denial the model sees."""
    permission = policy.decide(key)
    if permission == "allow":
        return None
    if permission == "deny":
        return f"permission denied: {call.name} is not allowed here"
    if approved is not None:  # decided already (durably, by the runner)
        return None if approved else declined(call.name)
    if ask is None:
        return f"permission denied: {call.name} needs approval and nobody can approve it"
    try:
        approved = await ask(call.name, dict(call.input))
    except Exception as err:  # a broken approval channel denies; it must not crash the turn
        return f"permission denied: asking for approval of {call.name} failed ({err})"
    return None if approved else declined(call.name)


async def run_tool_call(
    tools: Mapping[str, Tool],
    call: ToolCallBlock,
    ctx: ToolContext,
    policy: PermissionPolicy,
    ask: Ask | None = None,
    approved: bool | None = None,
    retry: RetryCall | None = None,
) -> tuple[ToolResultBlock, ToolOutcome]:
    """Validate, authorize and run one call; the result always has `call_id == call.id`.

    `approved` is a decision already made on an `ask` call (True runs it, False declines it);
    None asks `ask`, when there is one.

    An unknown tool, input that fails the schema, a denied (or unapprovable) permission and an
    exception raised by the tool each become an `is_error` result naming the problem; only
    `asyncio.CancelledError` (and other `BaseException`s) propagate. A failure that may pass
    (`retryable_failure`) is first made again, as often as `retry` allows.
    """
    tool = tools.get(call.name)
    if tool is None:
        available = ", ".join(sorted(tools)) or "none"
        return _error(call, f"unknown tool {call.name!r}; available tools: {available}")
    try:
        args = tool.input_model.model_validate(call.input)
    except ValidationError as err:
        return _error(call, input_errors(call.name, err))
    denial = await _authorize(call, permission_key(tool, call.name), policy, ask, approved)
    if denial is not None:
        return _error(call, denial)
    while True:
        try:
            outcome = await tool.run(args, ctx)
            break
        except Exception as err:  # a tool's own bug is the model's information, not our crash
            if retry is not None and retryable_failure(tool, err) and await retry(call, err):
                continue
            if isinstance(err, ToolFailure):
                return _error(call, str(err))
            return _error(call, f"{call.name} failed: {type(err).__name__}: {err}")
    result = ToolResultBlock(
        call_id=call.id, output=outcome.output, is_error=outcome.is_error, metadata=outcome.metadata
    )
    return result, outcome
