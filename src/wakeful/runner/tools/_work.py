"""Work-state tools: goal, plan and todos. Each replaces its kind; the runner persists it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ._base import ToolContext, ToolOutcome


class Todo(BaseModel):
    content: str = Field(min_length=1)
    status: Literal["pending", "in_progress", "completed"] = "pending"


class TodoWriteInput(BaseModel):
    todos: list[Todo]


class PlanWriteInput(BaseModel):
    plan: str


class GoalSetInput(BaseModel):
    goal: str


class TodoWrite:
    name = "todo_write"
    description = "Replace the todo list (content and status of each item)."
    input_model = TodoWriteInput
    read_only = True

    async def run(self, args: TodoWriteInput, ctx: ToolContext) -> ToolOutcome:  # type: ignore[override]
        todos = [t.model_dump() for t in args.todos]
        done = sum(t.status == "completed" for t in args.todos)
        return ToolOutcome(
            f"todo list saved ({done}/{len(todos)} completed)", work_state=("todos", todos)
        )  # type: ignore[arg-type]


class PlanWrite:
    name = "plan_write"
    description = "Replace the plan."
    input_model = PlanWriteInput
    read_only = True

    async def run(self, args: PlanWriteInput, ctx: ToolContext) -> ToolOutcome:  # type: ignore[override]
        return ToolOutcome("plan saved", work_state=("plan", args.plan))


class GoalSet:
    name = "goal_set"
    description = "Set the session's goal."
    input_model = GoalSetInput
    read_only = True

    async def run(self, args: GoalSetInput, ctx: ToolContext) -> ToolOutcome:  # type: ignore[override]
        return ToolOutcome("goal saved", work_state=("goal", args.goal))
