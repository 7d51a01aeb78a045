"""Built-in tools behind the `Tool` protocol, permissions, and running one call safely."""

from ._base import (
    PermissionPolicy,
    Tool,
    ToolContext,
    ToolFailure,
    ToolInput,
    ToolOutcome,
    ToolUnavailable,
    input_errors,
    permission_key,
    retry_safe,
    run_tool_call,
    tool_spec,
)
from ._cap import MAX_RESULT_BYTES, cap_result
from ._custom import FunctionTool, check_tool_name, tool
from ._delegation import Delegation, Delegator, Lineage
from ._files import EditFile, Grep, ListFiles, ReadFile, WriteFile, confine
from ._mcp import McpPool, ServerState, mcp_tools
from ._resolve import load_tool
from ._shell import Shell
from ._state import ExtensionState, StateBackend
from ._task import Task
from ._work import GoalSet, PlanWrite, TodoWrite

WORK_STATE_TOOLS = ("todo_write", "plan_write", "goal_set")
# Tools that leave the workspace unchanged: the file readers and the work-state tools.
READ_ONLY_TOOLS = ("read_file", "list_files", "grep", *WORK_STATE_TOOLS)


def builtin_tools(*, delegation: bool = False) -> dict[str, Tool]:
    """A fresh name -> tool map of every built-in tool.

    `task` is included only with `delegation`: it needs a `ToolContext.delegate`, which only a
    runtime with a coordinator provides.
    """
    tools: list[Tool] = [
        ReadFile(),
        WriteFile(),
        EditFile(),
        ListFiles(),
        Grep(),
        Shell(),
        TodoWrite(),
        PlanWrite(),
        GoalSet(),
    ]
    if delegation:
        tools.append(Task())
    return {t.name: t for t in tools}


__all__ = [
    "MAX_RESULT_BYTES",
    "READ_ONLY_TOOLS",
    "WORK_STATE_TOOLS",
    "Delegation",
    "Delegator",
    "Lineage",
    "ExtensionState",
    "FunctionTool",
    "McpPool",
    "ServerState",
    "StateBackend",
    "PermissionPolicy",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "ToolUnavailable",
    "ToolInput",
    "ToolOutcome",
    "builtin_tools",
    "cap_result",
    "check_tool_name",
    "confine",
    "input_errors",
    "load_tool",
    "mcp_tools",
    "permission_key",
    "retry_safe",
    "run_tool_call",
    "tool",
    "tool_spec",
]
