"""Agents: the built-in profiles, configured overrides and new agents, and plan in a real turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wakeful.config import AgentConfig, Config, load_config
from wakeful.errors import UsageError
from wakeful.execution import Runtime
from wakeful.runner import BUILTIN_AGENTS, Agent, resolve_agent
from wakeful.runner._agents import ALL_TOOLS
from wakeful.runner.tools import READ_ONLY_TOOLS, WORK_STATE_TOOLS, builtin_tools


def test_build_has_every_tool():
    build = resolve_agent("build")
    assert build == BUILTIN_AGENTS["build"] and build.max_steps == 50 and build.model is None
    assert set(builtin_tools(delegation=True)) == set(ALL_TOOLS)
    assert build.tools == (*ALL_TOOLS, "mcp__*")  # and every MCP server's tools


def test_plan_reads_and_plans_but_changes_nothing():
    plan = resolve_agent("plan")
    tools = builtin_tools()
    assert set(plan.tools) == set(READ_ONLY_TOOLS) and set(WORK_STATE_TOOLS) <= set(plan.tools)
    assert all(tools[name].read_only for name in plan.tools)
    assert not {"write_file", "edit_file", "shell", "task"} & set(plan.tools)
    assert "plan" in plan.system_prompt and "not to change" in plan.system_prompt


def test_configured_fields_override_a_builtin_and_the_rest_is_kept():
    config = Config(agents={"build": AgentConfig(model="scripted:x.json", max_steps=7)})
    build = resolve_agent("build", config)
    assert (build.model, build.max_steps) == ("scripted:x.json", 7)
    assert build.system_prompt == BUILTIN_AGENTS["build"].system_prompt
    assert build.tools == BUILTIN_AGENTS["build"].tools


def test_a_configured_agent_is_new():
    config = Config(
        agents={
            "review": AgentConfig(
                description="Reviews diffs.",
                system_prompt="Review the change.",
                tools=["read_file", "grep", "read_file"],
            )
        }
    )
    review = resolve_agent("review", config)
    assert review == Agent(
        "review", "Reviews diffs.", "Review the change.", None, ("read_file", "grep"), 50
    )
    assert resolve_agent("other", Config(agents={"other": AgentConfig()})).tools == (
        *ALL_TOOLS,
        "mcp__*",
    )


def test_unknown_agents_and_tools_are_usage_errors():
    config = Config(agents={"review": AgentConfig()})
    with pytest.raises(UsageError) as err:
        resolve_agent("reveiw", config)
    assert "unknown agent 'reveiw'" in str(err.value) and "build, plan, review" in str(err.value)
    with pytest.raises(UsageError, match=r"agents\.review\.tools: unknown tool\(s\) rm_rf"):
        resolve_agent("review", Config(agents={"review": AgentConfig(tools=["grep", "rm_rf"])}))


def test_agents_from_wakeful_toml(tmp_path: Path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "wakeful.toml").write_text(
        '[agents.plan]\nmax_steps = 3\n\n[agents.docs]\nsystem_prompt = "Write docs."\n'
        'tools = ["read_file", "write_file"]\n'
    )
    config = load_config(tmp_path, user_dir=tmp_path / "user")
    assert resolve_agent("plan", config).max_steps == 3
    docs = resolve_agent("docs", config)
    assert (docs.system_prompt, docs.tools) == ("Write docs.", ("read_file", "write_file"))


async def test_the_plan_agent_cannot_write_in_a_real_turn(tmp_path: Path):
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": ".",
                        "replies": [
                            {
                                "tool_calls": [
                                    {
                                        "name": "write_file",
                                        "input": {"path": "x.txt", "content": "x"},
                                    },
                                    {"name": "plan_write", "input": {"plan": "1. look"}},
                                ]
                            },
                            {"text": "planned"},
                        ],
                    }
                ]
            }
        )
    )
    rt = Runtime(
        str(tmp_path / "s.db"),
        model=f"scripted:{script}",
        agent="plan",
        workspace=tmp_path,
        config=Config(),
    )
    [turn] = await rt.run("make a plan")
    assert turn.outcome == "completed" and turn.final_text == "planned"
    assert not (tmp_path / "x.txt").exists()
    sid = rt.store.list_sessions().sessions[0].id
    denied, saved = rt.store.messages(sid)[2].tool_results()
    assert denied.is_error and "unknown tool 'write_file'" in str(denied.output)
    assert not saved.is_error and rt.store.work_state(sid)["plan"] == "1. look"
    await rt.aclose()
