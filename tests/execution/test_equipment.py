"""What a session's context takes from its place and agent is built once per runtime and shared
(`_setup.Equipment`, issue 36): the agent with its tools, the instruction sources, the price
table and the permission policy. Before, every drive built them again (about 120 Python calls
per recovered session, `docs/execution.md` "Recovery"). What is shared must still follow what
it is built from: a tool registered since, an edited configuration, another agent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pydantic import BaseModel

from wakeful.execution import Runtime
from wakeful.runner import RunContext
from wakeful.tools import tool


def _runtime(tmp_path: Path) -> Runtime:
    (tmp_path / ".git").mkdir()  # the project root: no wakeful.toml above it is read
    script = tmp_path / "m.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "ok"}]}]}))
    return Runtime(str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=tmp_path)


def _ctx(rt: Runtime, session_id: str) -> RunContext:
    return rt._context(session_id, asyncio.Event()).ctx


class Loud(BaseModel):
    text: str


@tool
def shout(args: Loud) -> str:
    """Say `text` loudly."""
    return args.text.upper()


async def test_contexts_at_one_place_share_what_they_take_from_it(tmp_path: Path) -> None:
    rt = _runtime(tmp_path)
    one = rt.send("one", resume=False).session_id
    two = rt.send("two", resume=False).session_id
    a, b = _ctx(rt, one), _ctx(rt, two)
    assert a.tools is b.tools and a.agent is b.agent
    assert a.prices is b.prices and a.policy is b.policy
    assert [s.key for s in a.instruction_sources] == [s.key for s in b.instruction_sources]
    assert a.tool_context.session_id == one and b.tool_context.session_id == two

    rt.add_tool(shout)  # a tool registered since: the next context offers it
    c = _ctx(rt, one)
    assert "shout" in c.tools and "shout" not in a.tools and "shout" in c.agent.tools

    (tmp_path / "wakeful.toml").write_text(
        '[instructions]\nstyle = "Answer plainly."\n[agents.build]\nmax_steps = 9\n'
    )  # an edited configuration: a new place, equipped again
    d = _ctx(rt, two)
    assert d.tools is not c.tools and d.agent.max_steps == 9
    assert "config:style" in [s.key for s in d.instruction_sources]

    rt.set_identity(two, agent="plan")  # another agent: its own tools
    e = _ctx(rt, two)
    assert e.agent.name == "plan" and "write_file" not in e.tools
    assert _ctx(rt, one).agent is d.agent  # the build agent's, still shared
    await rt.aclose()
