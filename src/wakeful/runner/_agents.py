"""Agents: named profiles of system prompt, model, tools and step limit.

Built-ins are `build` (every tool) and `plan` (read-only and work-state tools); `[agents.NAME]`
in the configuration adds agents or overrides fields of built-in ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import Config
from ..errors import UsageError

ALL_TOOLS = (
    "read_file", "write_file", "edit_file", "list_files", "grep", "shell",
    "todo_write", "plan_write", "goal_set", "task",
)  # fmt: skip
PLAN_TOOLS = ("read_file", "list_files", "grep", "todo_write", "plan_write", "goal_set")


@dataclass(frozen=True, slots=True)
class Agent:
    """A named agent profile."""

    name: str
    description: str
    system_prompt: str
    model: str | None
    tools: tuple[str, ...]
    max_steps: int = 50


BUILTIN_AGENTS: dict[str, Agent] = {
    "build": Agent(
        "build",
        "Does the work: reads, edits, runs commands.",
        "You are a careful software agent. Use the tools to inspect and change the workspace, "
        "verify what you change, and finish with a short report of what you did.",
        None,
        ALL_TOOLS,
    ),
    "plan": Agent(
        "plan",
        "Plans without changing anything.",
        "You are a planning agent. Read and search the workspace, then write a plan with "
        "plan_write and todos with todo_write. Do not change files or run commands.",
        None,
        PLAN_TOOLS,
    ),
}


def resolve_agent(name: str, config: Config | None = None) -> Agent:
    """The agent called `name`: a built-in with configured overrides, or a configured one."""
    configured = (config.agents if config else {}).get(name)
    base = BUILTIN_AGENTS.get(name)
    if base is None and configured is None:
        known = sorted(set(BUILTIN_AGENTS) | set(config.agents if config else {}))
        raise UsageError(f"unknown agent {name!r}; known agents: {', '.join(known)}")
    agent = base or Agent(name, "", "You are a helpful agent.", None, ALL_TOOLS)
    if configured is None:
        return agent
    return replace(
        agent,
        description=configured.description or agent.description,
        system_prompt=configured.system_prompt or agent.system_prompt,
        model=configured.model or agent.model,
        tools=tuple(configured.tools) if configured.tools is not None else agent.tools,
        max_steps=configured.max_steps or agent.max_steps,
    )
