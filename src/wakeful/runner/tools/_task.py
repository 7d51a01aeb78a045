"""The `task` tool: delegate a piece of work to a child session.

The runner knows nothing about coordinators, so the tool talks to a `Delegator` the execution
layer puts in `ToolContext.delegate`; without one the tool is not offered (see `builtin_tools`).
In the foreground the call returns the child's final text; in the background it returns at once
and the child's report reaches the parent's inbox when the child settles.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ._base import ToolContext, ToolFailure, ToolOutcome
from ._delegation import Lineage

LABEL_CHARS = 64  # a child's label is a name to resume it by, not a description


class TaskInput(BaseModel):
    """Input of the `task` tool."""

    prompt: str = Field(min_length=1, description="The complete instructions for the child.")
    agent: str | None = Field(None, description="Agent profile for the child (default: build).")
    background: bool = Field(
        False, description="Return at once; the child's report arrives later as a message."
    )
    label: str | None = Field(
        None,
        min_length=1,
        max_length=LABEL_CHARS,
        description="A name for the child (default child-N).",
    )
    resume: str | None = Field(
        None, description="An earlier child's label or session id, to continue it."
    )


class Task:
    """The `task` tool (see the module docstring)."""

    name = "task"
    description = (
        "Delegate a self-contained piece of work to a child agent session. In the foreground "
        "(default) this returns the child's final answer; with background=true it returns at "
        "once and the child's report arrives as a message when it finishes."
    )
    input_model = TaskInput
    read_only = False

    async def run(self, args: TaskInput, ctx: ToolContext) -> ToolOutcome:
        """Delegate `args.prompt` to a child session; see the class docstring."""
        if ctx.delegate is None:
            raise ToolFailure("task: delegation is not available in this session")
        lineage = Lineage(ctx.turn_id, ctx.call_id, label=args.label, resume=args.resume)
        done = await ctx.delegate.delegate(
            ctx.session_id, args.prompt, args.agent, args.background, lineage=lineage
        )
        if args.background:
            return ToolOutcome(
                f"Started child session {done.child_id} in the background. Its report will "
                "arrive as a message when it finishes; continue with other work meanwhile.",
                metadata={"child_session_id": done.child_id, "background": True},
                work_state=None if done.jobs is None else ("jobs", list(done.jobs)),
            )
        text = done.text or "(the child ended without a final message)"
        return ToolOutcome(
            text if done.outcome == "completed" else f"[child {done.outcome}] {text}",
            is_error=done.outcome != "completed",
            metadata={"child_session_id": done.child_id, "outcome": done.outcome},
        )
