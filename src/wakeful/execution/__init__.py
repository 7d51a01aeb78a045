"""Coordinator, claims and leases, interruption, recovery, workers; and the `Runtime` facade."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._approve import admit_decision, pending_approvals
    from ._budget_limits import BudgetLimit, budget_limits, budget_limits_in
    from ._budget_raise import parse_budget_raise, raise_budget
    from ._coordinator import Coordinator, SessionNotFoundError
    from ._drain import DrainOptions, DrainResult, drain
    from ._event_stream import (
        Durable,
        EventStream,
        Lifecycle,
        ReasoningChunk,
        StepEnd,
        StepStart,
        StreamItem,
        TextChunk,
        ToolProgress,
        TurnEnd,
    )
    from ._hooks import HOOK_KINDS, Hook, HookEvent, HookKind, Hooks
    from ._move import existing_location
    from ._off_loop import off_loop, wait_off_loop
    from ._owner import current_owner, owner_is_dead
    from ._place import Place
    from ._projection import session_context
    from ._reads import Reads
    from ._rewind import RewindResult
    from ._runtime import Runtime, SendResult, default_model, run_sync
    from ._schedule_times import Timing, parse_interval
    from ._schedules import describe_schedule, fire_due, run_schedules, schedule_time
    from ._toolbox import Toolbox
    from ._worker import WorkerStats, run_worker

# Each public name's module, imported on first use so that importing the package (as a
# cheap CLI command does) does not load every part of it.
_LAZY = {
    "Coordinator": "wakeful.execution._coordinator",
    "DrainOptions": "wakeful.execution._drain",
    "DrainResult": "wakeful.execution._drain",
    "Durable": "wakeful.execution._event_stream",
    "EventStream": "wakeful.execution._event_stream",
    "HOOK_KINDS": "wakeful.execution._hooks",
    "Hook": "wakeful.execution._hooks",
    "HookEvent": "wakeful.execution._hooks",
    "HookKind": "wakeful.execution._hooks",
    "Hooks": "wakeful.execution._hooks",
    "Lifecycle": "wakeful.execution._event_stream",
    "Place": "wakeful.execution._place",
    "off_loop": "wakeful.execution._off_loop",
    "session_context": "wakeful.execution._projection",
    "wait_off_loop": "wakeful.execution._off_loop",
    "Reads": "wakeful.execution._reads",
    "ReasoningChunk": "wakeful.execution._event_stream",
    "RewindResult": "wakeful.execution._rewind",
    "BudgetLimit": "wakeful.execution._budget_limits",
    "budget_limits": "wakeful.execution._budget_limits",
    "budget_limits_in": "wakeful.execution._budget_limits",
    "Runtime": "wakeful.execution._runtime",
    "SendResult": "wakeful.execution._runtime",
    "SessionNotFoundError": "wakeful.execution._coordinator",
    "StepEnd": "wakeful.execution._event_stream",
    "StepStart": "wakeful.execution._event_stream",
    "StreamItem": "wakeful.execution._event_stream",
    "TextChunk": "wakeful.execution._event_stream",
    "Timing": "wakeful.execution._schedule_times",
    "ToolProgress": "wakeful.execution._event_stream",
    "Toolbox": "wakeful.execution._toolbox",
    "TurnEnd": "wakeful.execution._event_stream",
    "WorkerStats": "wakeful.execution._worker",
    "admit_decision": "wakeful.execution._approve",
    "parse_budget_raise": "wakeful.execution._budget_raise",
    "raise_budget": "wakeful.execution._budget_raise",
    "current_owner": "wakeful.execution._owner",
    "default_model": "wakeful.execution._runtime",
    "describe_schedule": "wakeful.execution._schedules",
    "drain": "wakeful.execution._drain",
    "existing_location": "wakeful.execution._move",
    "fire_due": "wakeful.execution._schedules",
    "owner_is_dead": "wakeful.execution._owner",
    "parse_interval": "wakeful.execution._schedule_times",
    "pending_approvals": "wakeful.execution._approve",
    "run_schedules": "wakeful.execution._schedules",
    "run_sync": "wakeful.execution._runtime",
    "run_worker": "wakeful.execution._worker",
    "schedule_time": "wakeful.execution._schedules",
}


__getattr__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "HOOK_KINDS",
    "Durable",
    "EventStream",
    "Hook",
    "HookEvent",
    "HookKind",
    "Hooks",
    "Lifecycle",
    "ReasoningChunk",
    "StepEnd",
    "StepStart",
    "StreamItem",
    "TextChunk",
    "ToolProgress",
    "TurnEnd",
    "Coordinator",
    "RewindResult",
    "BudgetLimit",
    "budget_limits",
    "budget_limits_in",
    "DrainOptions",
    "DrainResult",
    "Place",
    "Reads",
    "Runtime",
    "SendResult",
    "SessionNotFoundError",
    "Timing",
    "Toolbox",
    "WorkerStats",
    "admit_decision",
    "parse_budget_raise",
    "raise_budget",
    "current_owner",
    "default_model",
    "describe_schedule",
    "drain",
    "existing_location",
    "fire_due",
    "off_loop",
    "owner_is_dead",
    "parse_interval",
    "pending_approvals",
    "run_sync",
    "run_schedules",
    "run_worker",
    "session_context",
    "schedule_time",
    "wait_off_loop",
]
