"""A tool reaches its session's extension state through `ToolContext.extension_state`, and the
`metadata_updated` / `extension_state_set` hooks tell a host of every such write (issue 37,
items 7 and 8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from wakeful.errors import UsageError
from wakeful.execution import HookEvent, Runtime
from wakeful.tools import ToolContext, tool


class Nothing(BaseModel):
    pass


@tool
def count(args: Nothing, ctx: ToolContext) -> str:
    """Count how often it was called in this session (sync: runs in a worker thread)."""
    state = ctx.extension_state("counter")
    n = state.get("calls", 0)
    assert isinstance(n, int)
    state.set("calls", n + 1)
    return f"call {n + 1}"


@tool
async def forget(args: Nothing, ctx: ToolContext) -> str:
    """Forget the count (async: awaits the off-loop methods)."""
    state = ctx.extension_state("counter")
    before = await state.avalues()
    gone = await state.adelete("calls")
    await state.aset("forgotten", before.get("calls"))
    return f"forgot {gone}"


RULES = [
    {
        "match": "^count",
        "replies": [{"tool_calls": [{"name": "count", "input": {}}]}, {"text": "counted"}],
    },
    {
        "match": "^forget",
        "replies": [{"tool_calls": [{"name": "forget", "input": {}}]}, {"text": "gone"}],
    },
]


@pytest.fixture
async def rt(tmp_path: Path):  # type: ignore[no-untyped-def]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": RULES}))
    runtime = Runtime(
        str(tmp_path / "s.db"),
        model=f"scripted:{script}",
        workspace=tmp_path,
        tools=[count, forget],
    )
    yield runtime
    await runtime.aclose()


async def test_a_tool_keeps_its_state_in_the_session_and_hooks_hear_of_it(rt: Runtime):
    heard: list[HookEvent] = []
    rt.hooks.on("extension_state_set", heard.append)
    rt.hooks.on("metadata_updated", heard.append)
    [one] = await rt.run("count once")
    sid = rt.store.list_sessions().sessions[0].id
    [two] = await rt.run("count again", session_id=sid)
    assert one.outcome == two.outcome == "completed"
    results = [b.output for m in rt.store.messages(sid) for b in m.blocks if hasattr(b, "output")]
    assert results == ["call 1", "call 2"]
    assert rt.reads.extension_state(sid, "counter") == {"calls": 2}
    await rt.run("forget it", session_id=sid)
    assert rt.reads.extension_state(sid, "counter") == {"forgotten": 2}
    rt.update_metadata(sid, {"topic": "counting"})
    await rt.hooks.flush()
    seen = [(e.kind, e.data.get("key"), e.data.get("value"), e.data.get("deleted")) for e in heard]
    assert seen == [
        ("extension_state_set", "calls", 1, False),
        ("extension_state_set", "calls", 2, False),
        ("extension_state_set", "calls", None, True),
        ("extension_state_set", "forgotten", 2, False),
        ("metadata_updated", None, None, None),
    ]
    assert all(e.session_id == sid for e in heard)
    assert heard[-1].data["patch"] == {"topic": "counting"}
    assert heard[-1].data["metadata"] == rt.reads.metadata(sid)
    # The writes are the store's own events, in the log like any other.
    sets = rt.store.events(sid, types=["extension_state.set"])
    assert [e.event.key for e in sets] == ["calls", "calls", "calls", "forgotten"]  # type: ignore[union-attr]


async def test_a_write_past_a_bound_is_an_error_result_and_no_hook(rt: Runtime, tmp_path: Path):
    heard: list[HookEvent] = []
    rt.hooks.on("extension_state_set", heard.append)
    row = rt.create_session()
    ctx = ToolContext(workspace=tmp_path, session_id=row.id, state=None)
    with pytest.raises(UsageError, match="no session state"):
        ctx.extension_state("x")
    with pytest.raises(UsageError, match="larger than"):
        rt.set_extension_state(row.id, "big", "k", "x" * 20_000)
    await rt.hooks.flush()
    assert heard == [] and rt.reads.extension_state(row.id, "big") == {}
