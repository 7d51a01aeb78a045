"""User-defined tools: the `tool` decorator and `FunctionTool`, the public way to add a tool.

A function becomes a tool: its first parameter is annotated with a pydantic model (the input
the model must send; its JSON Schema is what the model sees), its docstring is the description,
and it may take a second parameter, the `ToolContext`. It may be sync (run in a worker thread,
so it never stalls the event loop) or async, and returns a `str` or a `ToolOutcome`; raising
`ToolFailure` (or any exception) is an error result the model sees, never a crashed turn.

Invariant: a `FunctionTool` is a `Tool` like the built-ins, so a call of it is durable before it
runs (`tool.started` committed first) unless it declares itself `read_only`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, get_type_hints, overload

from pydantic import BaseModel

from ...errors import UsageError
from ._base import ToolContext, ToolOutcome

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
MAX_NAME = 64  # the providers' limit on a tool name


def check_tool_name(name: str) -> str:
    """`name` when providers accept it as a tool name (1-64 of `[A-Za-z0-9_-]`), else
    `UsageError`."""
    if not 0 < len(name) <= MAX_NAME or not set(name) <= _NAME_CHARS:
        raise UsageError(f"bad tool name {name!r}: use 1 to {MAX_NAME} letters, digits, '_' or '-'")
    return name


class FunctionTool:
    """A `Tool` made from a function (see the module docstring); built by `tool`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        permission: str | None = None,
        idempotent: bool = False,
    ) -> None:
        self.fn = fn
        self.name = check_tool_name(name or fn.__name__)
        doc = inspect.getdoc(fn)
        self.description = description or (doc.strip() if doc else "")
        if not self.description:
            raise UsageError(f"tool {self.name}: give it a docstring (its description)")
        self.read_only = read_only
        self.idempotent = idempotent  # safe to call again after a transient failure
        # The name `[permissions]` rules see for this tool (several tools may share one).
        self.permission_key = permission or self.name
        self._model, self._wants_ctx = _signature(fn, self.name)
        self._async = inspect.iscoroutinefunction(fn)

    @property
    def input_model(self) -> type[BaseModel]:
        """The pydantic model of the function's first parameter."""
        return self._model

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutcome:
        """Call the function (a sync one in a worker thread) and wrap a `str` it returns."""
        call_args = (args, ctx) if self._wants_ctx else (args,)
        if self._async:
            value = await self.fn(*call_args)
        else:
            value = await asyncio.to_thread(self.fn, *call_args)
        if isinstance(value, ToolOutcome):
            return value
        if isinstance(value, str):
            return ToolOutcome(value)
        raise TypeError(f"returned {type(value).__name__}, not str or ToolOutcome")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the undecorated function (a decorated function stays callable)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r}, read_only={self.read_only})"


def _signature(fn: Callable[..., Any], name: str) -> tuple[type[BaseModel], bool]:
    params = list(inspect.signature(fn).parameters.values())
    try:
        hints = get_type_hints(fn)
    except Exception as err:  # an annotation naming something not importable
        raise UsageError(f"tool {name}: cannot read its annotations: {err}") from None
    model = hints.get(params[0].name) if params else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise UsageError(
            f"tool {name}: its first parameter must be annotated with a pydantic model "
            "(the tool's input)"
        )
    if len(params) > 2:
        raise UsageError(f"tool {name}: takes (input) or (input, ctx), not {len(params)} arguments")
    return model, len(params) == 2


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    permission: str | None = None,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    permission: str | None = None,
    idempotent: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a function a tool: `@tool` or `@tool(name=..., read_only=True, permission=...)`.

    `read_only=True` promises the tool changes nothing outside the session (the runner may then
    run it before its call is durable); `permission` is the key `[permissions]` rules match
    (default: the tool's name); `idempotent=True` says a call made twice has the effect of
    one, so a transient failure (`ToolUnavailable`, a `TimeoutError`) is retried with durable
    backoff (docs/tools.md, "Retries"). Raises `UsageError` for a function that cannot be a tool.
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            read_only=read_only,
            permission=permission,
            idempotent=idempotent,
        )

    return wrap(fn) if fn is not None else wrap
