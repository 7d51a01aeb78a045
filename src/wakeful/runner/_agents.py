"""Agents: named profiles of system prompt, model, tools and step limit.

Built-ins are `build` (every tool) and `plan` (the read-only and work-state tools: it plans and
changes nothing). `[agents.NAME]` in the configuration adds agents or overrides fields of
built-in ones; a field left out keeps the built-in value.

An agent's tool list holds names and glob patterns (`mcp__github__*`). "Every tool" is the
built-ins, the tools of `[tools]` and those registered on the runtime, and every MCP server's
tools (`mcp__*`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..config import AgentConfig, Config
from ..errors import UsageError
from .tools import READ_ONLY_TOOLS

ALL_TOOLS = (
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "grep",
    "shell",
    "todo_write",
    "plan_write",
    "goal_set",
    "task",
)
PLAN_TOOLS = READ_ONLY_TOOLS
MCP_TOOLS = "mcp__*"  # the pattern of every MCP server's tools
EVERY_TOOL = (*ALL_TOOLS, MCP_TOOLS)  # `build` and new agents; `[tools]` go before MCP_TOOLS
_GLOB = frozenset("*?[")

BUILD_PROMPT = (
    "You are a careful software agent working in the user's workspace. Use the tools to "
    "inspect and change it: read before you edit, keep changes small, and verify what you "
    "change (run the tests or the command that shows it works). For work of several steps, "
    "keep the todo list current with todo_write. Finish with a short report of what you did "
    "and anything left undone."
)
PLAN_PROMPT = (
    "You are a planning agent. Your job is to plan, not to change anything: you cannot edit "
    "files or run commands. Read and search the workspace to understand it, set the goal with "
    "goal_set, write a step-by-step plan with plan_write and the concrete steps as todos with "
    "todo_write. Finish with a short summary of the plan and its open questions."
)
CUSTOM_PROMPT = "You are a helpful agent working in the user's workspace."


@dataclass(frozen=True, slots=True)
class Agent:
    """A named agent profile: what it is told, which model and tools it uses, how many model
    steps one input may take (`max_steps`; new input resets the allowance)."""

    name: str
    description: str
    system_prompt: str
    model: str | None
    tools: tuple[str, ...]
    max_steps: int = 50
    skills: tuple[str, ...] = ()  # whose guidance it follows (`instructions.agent_sources`)


BUILTIN_AGENTS: dict[str, Agent] = {
    "build": Agent(
        "build", "Does the work: reads, edits, runs commands.", BUILD_PROMPT, None, EVERY_TOOL
    ),
    "plan": Agent(
        "plan", "Plans without changing anything (read-only tools).", PLAN_PROMPT, None, PLAN_TOOLS
    ),
}


def resolve_agent(name: str, config: Config | None = None, registered: Sequence[str] = ()) -> Agent:
    """The agent called `name`: a built-in with its configured overrides, or a configured one.

    A configured agent that is not a built-in starts from a generic prompt and every tool;
    `build` and such agents also get the tools of `[tools]`, the `registered` ones and every
    MCP server's. Raises `UsageError` for an unknown agent (listing the known ones) and for a
    configured tool name that does not exist (a pattern, or a name starting `mcp__`, is taken
    as it is: MCP tools are known only once their server runs).
    """
    agents = config.agents if config else {}
    configured = agents.get(name)
    base = BUILTIN_AGENTS.get(name)
    if base is None and configured is None:
        known = sorted(set(BUILTIN_AGENTS) | set(agents))
        raise UsageError(f"unknown agent {name!r}; known agents: {', '.join(known)}")
    custom = tuple(dict.fromkeys([*(config.tools if config else {}), *registered]))
    agent = base or Agent(name, "", CUSTOM_PROMPT, None, EVERY_TOOL)
    if custom and agent.tools == EVERY_TOOL:
        agent = replace(agent, tools=(*ALL_TOOLS, *custom, MCP_TOOLS))
    return agent if configured is None else _apply(agent, configured, custom)


def _apply(agent: Agent, configured: AgentConfig, custom: tuple[str, ...] = ()) -> Agent:
    if configured.tools is not None:
        known = (*ALL_TOOLS, *custom)
        unknown = [
            t
            for t in configured.tools
            if t not in known and not t.startswith("mcp__") and not set(t) & _GLOB
        ]
        if unknown:
            raise UsageError(
                f"agents.{agent.name}.tools: unknown tool(s) {', '.join(unknown)}; "
                f"known tools: {', '.join(known)}"
            )
    return replace(
        agent,
        skills=tuple(configured.skills) or agent.skills,
        description=configured.description or agent.description,
        system_prompt=configured.system_prompt or agent.system_prompt,
        model=configured.model or agent.model,
        tools=tuple(dict.fromkeys(configured.tools))
        if configured.tools is not None
        else agent.tools,
        max_steps=configured.max_steps or agent.max_steps,
    )
