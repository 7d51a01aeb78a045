"""Work-state tools: goal, plan and todos.

Each call replaces the whole value of its kind; the tool only returns it (as
`ToolOutcome.work_state`) and the runner persists it with the call's result, so work state is
exactly as durable as the transcript. An empty goal or plan clears it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from .._work_state import MAX_ENTRIES as SHOWN_ENTRIES  # what runtime.work_state shows
from ._base import ToolContext, ToolInput, ToolOutcome


class Todo(ToolInput):
    content: str = Field(min_length=1, description="What to do, in one line.")
    status: Literal["pending", "in_progress", "completed"] = "pending"


class TodoWriteInput(ToolInput):
    todos: list[Todo] = Field(description="The complete new todo list.")


class PlanWriteInput(ToolInput):
    plan: str = Field(description="The complete new plan (empty clears it).")


class GoalSetInput(ToolInput):
    goal: str = Field(description="The session's goal (empty clears it).")


class TodoWrite:
    name = "todo_write"
    description = (
        "Replace the todo list: every item with its content and status (pending, in_progress, "
        f"completed). The list survives compaction; keep it under {SHOWN_ENTRIES} items, the most "
        "the prompt shows."
    )
    input_model = TodoWriteInput
    read_only = True

    async def run(self, args: TodoWriteInput, ctx: ToolContext) -> ToolOutcome:
        todos: list[JsonValue] = [t.model_dump() for t in args.todos]
        done = sum(t.status == "completed" for t in args.todos)
        return ToolOutcome(
            f"todo list saved ({done}/{len(todos)} completed)", work_state=("todos", todos)
        )


class PlanWrite:
    name = "plan_write"
    description = "Replace the plan of the session. The plan survives compaction."
    input_model = PlanWriteInput
    read_only = True

    async def run(self, args: PlanWriteInput, ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(
            "plan saved" if args.plan else "plan cleared", work_state=("plan", args.plan)
        )


class GoalSet:
    name = "goal_set"
    description = "Set the goal of the session. The goal survives compaction."
    input_model = GoalSetInput
    read_only = True

    async def run(self, args: GoalSetInput, ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome(
            "goal saved" if args.goal else "goal cleared", work_state=("goal", args.goal)
        )
