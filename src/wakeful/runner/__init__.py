"""One turn: steps, prompt assembly and receipts, tools, durable retry, usage and cost."""

from ._agents import BUILTIN_AGENTS, Agent, resolve_agent
from ._compaction import (
    Budget,
    CompactionResult,
    Compactor,
    compaction_result,
    should_compact,
)
from ._crashpoints import crash_point
from ._live import LiveEvent, LiveListener
from ._pricing import cost_usd, known_price
from ._prompt import Section, rebuild_request, request_digest, verify_receipt
from ._turn import Interrupted, RunContext, TurnResult, TurnRunner
from .tools import PermissionPolicy, Tool, ToolContext, ToolOutcome, builtin_tools, run_tool_call

__all__ = [
    "BUILTIN_AGENTS",
    "Agent",
    "Budget",
    "CompactionResult",
    "Compactor",
    "Interrupted",
    "LiveEvent",
    "LiveListener",
    "PermissionPolicy",
    "RunContext",
    "Section",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "TurnResult",
    "TurnRunner",
    "builtin_tools",
    "compaction_result",
    "crash_point",
    "cost_usd",
    "known_price",
    "rebuild_request",
    "request_digest",
    "resolve_agent",
    "run_tool_call",
    "should_compact",
    "verify_receipt",
]
