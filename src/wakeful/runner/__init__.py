"""One turn: steps, prompt assembly and receipts, tools, durable retry, usage and cost; durable
state only through a `SessionPort`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._agents import BUILTIN_AGENTS, Agent, resolve_agent
    from ._approvals import (
        APPROVAL_TYPES,
        ApprovalLog,
        ApprovalStep,
        AwaitingApproval,
        fold_approvals,
        preview,
        read_approvals,
        waiting_requests,
    )
    from ._budget import Budget, should_compact
    from ._budget_gate import BUDGET_KIND, ScopeLimit, Scopes
    from ._compaction import (
        IDLE_REASON,
        LOOKBACK_EVENTS,
        CompactionResult,
        Compactor,
        compaction_result,
    )
    from ._context import (
        Ask,
        AskResult,
        Interrupted,
        ProviderFactory,
        Refresh,
        RunContext,
        SharedProviders,
        TurnResult,
    )
    from ._costs import CostSum, format_cost
    from ._crashpoints import crash_point
    from ._interrupt import Interrupt
    from ._live import LEGACY_KINDS, LiveEvent, LiveKind, LiveListener
    from ._memory_port import MemoryPort
    from ._otel_env import configure_from_env
    from ._port import HeldEvents, SessionPort
    from ._pricing import PriceTable, cost_usd, known_price
    from ._prompt import ReceiptChain, Section, rebuild_request, request_digest, verify_receipt
    from ._runs import RunRecord, run_records
    from ._summarize import MessagesSummary, summarize_messages
    from ._toolset import select_tools, selects_prefix
    from ._tracing import Tracing
    from ._turn import TurnRunner
    from .tools import (
        FunctionTool,
        McpPool,
        PermissionPolicy,
        ServerState,
        Tool,
        ToolContext,
        ToolFailure,
        ToolOutcome,
        builtin_tools,
        load_tool,
        mcp_tools,
        run_tool_call,
        tool,
    )

# Each public name's module, imported on first use so that importing the package (as a
# cheap CLI command does) does not load every part of it.
_LAZY = {
    "APPROVAL_TYPES": "wakeful.runner._approvals",
    "LOOKBACK_EVENTS": "wakeful.runner._compaction",
    "Agent": "wakeful.runner._agents",
    "ApprovalLog": "wakeful.runner._approvals",
    "ApprovalStep": "wakeful.runner._approvals",
    "Ask": "wakeful.runner._context",
    "AskResult": "wakeful.runner._context",
    "AwaitingApproval": "wakeful.runner._approvals",
    "BUILTIN_AGENTS": "wakeful.runner._agents",
    "Budget": "wakeful.runner._budget",
    "BUDGET_KIND": "wakeful.runner._budget_gate",
    "ScopeLimit": "wakeful.runner._budget_gate",
    "Scopes": "wakeful.runner._budget_gate",
    "MessagesSummary": "wakeful.runner._summarize",
    "summarize_messages": "wakeful.runner._summarize",
    "CompactionResult": "wakeful.runner._compaction",
    "Compactor": "wakeful.runner._compaction",
    "FunctionTool": "wakeful.runner.tools",
    "HeldEvents": "wakeful.runner._port",
    "Interrupt": "wakeful.runner._interrupt",
    "Interrupted": "wakeful.runner._context",
    "LEGACY_KINDS": "wakeful.runner._live",
    "LiveEvent": "wakeful.runner._live",
    "LiveKind": "wakeful.runner._live",
    "LiveListener": "wakeful.runner._live",
    "McpPool": "wakeful.runner.tools",
    "MemoryPort": "wakeful.runner._memory_port",
    "PermissionPolicy": "wakeful.runner.tools",
    "ProviderFactory": "wakeful.runner._context",
    "ReceiptChain": "wakeful.runner._prompt",
    "Refresh": "wakeful.runner._context",
    "RunContext": "wakeful.runner._context",
    "RunRecord": "wakeful.runner._runs",
    "Section": "wakeful.runner._prompt",
    "ServerState": "wakeful.runner.tools",
    "SessionPort": "wakeful.runner._port",
    "SharedProviders": "wakeful.runner._context",
    "Tool": "wakeful.runner.tools",
    "ToolContext": "wakeful.runner.tools",
    "ToolFailure": "wakeful.runner.tools",
    "ToolOutcome": "wakeful.runner.tools",
    "Tracing": "wakeful.runner._tracing",
    "TurnResult": "wakeful.runner._context",
    "TurnRunner": "wakeful.runner._turn",
    "builtin_tools": "wakeful.runner.tools",
    "compaction_result": "wakeful.runner._compaction",
    "IDLE_REASON": "wakeful.runner._compaction",
    "configure_from_env": "wakeful.runner._otel_env",
    "cost_usd": "wakeful.runner._pricing",
    "CostSum": "wakeful.runner._costs",
    "PriceTable": "wakeful.runner._pricing",
    "format_cost": "wakeful.runner._costs",
    "crash_point": "wakeful.runner._crashpoints",
    "fold_approvals": "wakeful.runner._approvals",
    "waiting_requests": "wakeful.runner._approvals",
    "known_price": "wakeful.runner._pricing",
    "load_tool": "wakeful.runner.tools",
    "mcp_tools": "wakeful.runner.tools",
    "preview": "wakeful.runner._approvals",
    "read_approvals": "wakeful.runner._approvals",
    "rebuild_request": "wakeful.runner._prompt",
    "request_digest": "wakeful.runner._prompt",
    "resolve_agent": "wakeful.runner._agents",
    "run_records": "wakeful.runner._runs",
    "run_tool_call": "wakeful.runner.tools",
    "select_tools": "wakeful.runner._toolset",
    "selects_prefix": "wakeful.runner._toolset",
    "should_compact": "wakeful.runner._budget",
    "tool": "wakeful.runner.tools",
    "verify_receipt": "wakeful.runner._prompt",
}


__getattr__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "APPROVAL_TYPES",
    "LOOKBACK_EVENTS",
    "BUILTIN_AGENTS",
    "Agent",
    "ApprovalLog",
    "ApprovalStep",
    "Ask",
    "AskResult",
    "AwaitingApproval",
    "Budget",
    "BUDGET_KIND",
    "ScopeLimit",
    "Scopes",
    "CompactionResult",
    "Compactor",
    "FunctionTool",
    "Interrupt",
    "Interrupted",
    "LEGACY_KINDS",
    "HeldEvents",
    "LiveEvent",
    "LiveKind",
    "LiveListener",
    "McpPool",
    "MemoryPort",
    "PermissionPolicy",
    "ProviderFactory",
    "ReceiptChain",
    "Refresh",
    "RunContext",
    "MessagesSummary",
    "RunRecord",
    "Section",
    "ServerState",
    "SessionPort",
    "SharedProviders",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "ToolOutcome",
    "Tracing",
    "configure_from_env",
    "TurnResult",
    "TurnRunner",
    "builtin_tools",
    "compaction_result",
    "IDLE_REASON",
    "crash_point",
    "cost_usd",
    "CostSum",
    "PriceTable",
    "format_cost",
    "fold_approvals",
    "waiting_requests",
    "known_price",
    "load_tool",
    "mcp_tools",
    "preview",
    "read_approvals",
    "rebuild_request",
    "request_digest",
    "resolve_agent",
    "run_records",
    "summarize_messages",
    "run_tool_call",
    "select_tools",
    "selects_prefix",
    "should_compact",
    "tool",
    "verify_receipt",
]
