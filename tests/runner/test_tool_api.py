"""The public tool API (`wakeful.tools`): `@tool` functions (sync, async, with the context),
registration on a `Runtime`, `[tools]` by import path, permission keys and patterns, read-only
tools on the fast path, and a session whose tool cannot be loaded here (blocked, saying why)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from wakeful.config import Config
from wakeful.errors import UsageError
from wakeful.events import SessionEvent
from wakeful.execution import Runtime
from wakeful.messages import ToolCallBlock
from wakeful.runner.tools import run_tool_call
from wakeful.store import open_store
from wakeful.tools import (
    FunctionTool,
    PermissionPolicy,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    load_tool,
    tool,
)


class Pair(BaseModel):
    a: int
    b: int


@tool
def add(args: Pair) -> str:
    """Add two integers."""
    return str(args.a + args.b)


@tool(name="add_async", read_only=True, permission="math")
async def add_async(args: Pair, ctx: ToolContext) -> ToolOutcome:
    """Add two integers, asynchronously."""
    return ToolOutcome(f"{args.a + args.b} in {ctx.session_id}", metadata={"sum": args.a + args.b})


@tool
def refuse(args: Pair) -> str:
    """Always fails."""
    raise ToolFailure(f"no, not {args.a}")


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, session_id="ses_x")


async def run(
    t: FunctionTool, tmp_path: Path, policy: PermissionPolicy | None = None, **input: object
) -> tuple[str, bool]:
    call = ToolCallBlock(id="c1", name=t.name, input=input)  # type: ignore[arg-type]
    result, _ = await run_tool_call({t.name: t}, call, ctx(tmp_path), policy or PermissionPolicy())
    return str(result.output), result.is_error


def test_a_decorated_function_is_a_tool() -> None:
    assert (add.name, add.description, add.read_only, add.permission_key) == (
        "add",
        "Add two integers.",
        False,
        "add",
    )
    assert add.input_model is Pair and add(Pair(a=1, b=2)) == "3"  # still callable
    assert (add_async.read_only, add_async.permission_key) == (True, "math")


async def test_sync_async_and_failing_tools_run(tmp_path: Path) -> None:
    assert await run(add, tmp_path, a=2, b=3) == ("5", False)
    assert await run(add_async, tmp_path, a=2, b=3) == ("5 in ses_x", False)
    assert await run(refuse, tmp_path, a=7, b=0) == ("no, not 7", True)
    text, is_error = await run(add, tmp_path, a="x", b=1)
    assert is_error and text.startswith("invalid input for add: a:")


async def test_a_sync_tool_runs_off_the_event_loop(tmp_path: Path) -> None:
    seen: list[str] = []

    @tool
    def where(args: Pair) -> str:
        """Names its thread."""
        seen.append(threading.current_thread().name)
        return "ok"

    await run(where, tmp_path, a=1, b=1)
    assert seen and seen[0] != threading.main_thread().name


async def test_the_permission_key_and_patterns_decide(tmp_path: Path) -> None:
    deny_math = PermissionPolicy({"math": "deny"})
    assert await run(add_async, tmp_path, deny_math, a=1, b=1) == (
        "permission denied: add_async is not allowed here",
        True,
    )
    assert await run(add, tmp_path, deny_math, a=1, b=1) == ("2", False)
    policy = PermissionPolicy({"*": "deny", "mcp__gh__*": "ask", "mcp__gh__read*": "allow"})
    assert policy.decide("mcp__gh__read_issue") == "allow"  # the longest pattern wins
    assert policy.decide("mcp__gh__write") == "ask"
    assert policy.decide("shell") == "deny"


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (
            lambda: tool(name="x", description="d")(lambda x: "y"),
            "first parameter must be annotated with a pydantic model",
        ),
        (lambda: FunctionTool(add.fn, name="bad name"), "bad tool name 'bad name'"),
    ],
)
def test_a_function_that_cannot_be_a_tool_is_a_usage_error(make: object, error: str) -> None:
    with pytest.raises(UsageError, match=error):
        make()  # type: ignore[operator]


def test_a_tool_without_a_docstring_is_refused() -> None:
    def nodoc(args: Pair) -> str:
        return ""

    with pytest.raises(UsageError, match="give it a docstring"):
        tool(nodoc)


def write_module(root: Path, name: str = "usertools") -> None:
    (root / f"{name}.py").write_text(
        "from pydantic import BaseModel\n"
        "from wakeful.tools import tool\n\n"
        "class Text(BaseModel):\n    text: str\n\n"
        "@tool(permission='loud')\n"
        "def shout(args: Text) -> str:\n"
        "    '''Upper-case the text.'''\n"
        "    return args.text.upper()\n\n"
        "def whisper(args: Text) -> str:\n"
        "    '''Lower-case the text.'''\n"
        "    return args.text.lower()\n"
    )


def test_load_tool_by_import_path_from_the_workspace(tmp_path: Path) -> None:
    write_module(tmp_path, "usertools_load")
    shout = load_tool("shout", "usertools_load:shout", tmp_path)
    assert (shout.name, shout.permission_key) == ("shout", "loud")
    quiet = load_tool("quiet", "usertools_load:whisper", tmp_path)  # a plain function, renamed
    assert quiet.name == "quiet" and quiet.description == "Lower-case the text."
    for path, error in [
        ("usertools_load", "not an import path"),
        ("no_such_module_xyz:f", "cannot import no_such_module_xyz"),
        ("usertools_load:missing", "has no attribute 'missing'"),
        ("usertools_load:Text", "cannot make the tool|is not a tool"),
    ]:
        with pytest.raises(UsageError, match=f"tools.t: .*({error})"):
            load_tool("t", path, tmp_path)


def scripted(tmp_path: Path, replies: list[dict[str, object]]) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"rules": [{"match": ".", "replies": replies}]}))
    return f"scripted:{path}"


async def test_configured_and_registered_tools_are_offered_and_run(tmp_path: Path) -> None:
    write_module(tmp_path, "usertools_cfg")
    model = scripted(
        tmp_path,
        [
            {
                "tool_calls": [
                    {"name": "shout", "input": {"text": "hi"}},
                    {"name": "add", "input": {"a": 1, "b": 2}},
                ]
            },
            {"text": "ok"},
        ],
    )
    config = Config.model_validate({"tools": {"shout": "usertools_cfg:shout"}})
    rt = Runtime(
        str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config, tools=[add]
    )
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed"
        sid = rt.store.list_sessions().sessions[0].id
        outputs = [str(r.output) for m in rt.store.messages(sid) for r in m.tool_results()]
        assert outputs == ["HI", "3"]
        assert [c.status for c in rt.store.tool_calls(sid)] == ["completed", "completed"]
    finally:
        await rt.aclose()


@pytest.mark.parametrize(("read_only", "started_before"), [(True, 0), (False, 1)])
async def test_a_read_only_tool_takes_the_fast_path(
    tmp_path: Path, read_only: bool, started_before: int
) -> None:
    """A read-only tool runs before its call is durable (the reply commits with its result);
    any other tool only after its `tool.started` is committed."""
    db = str(tmp_path / "s.db")
    seen: list[int] = []

    @tool(read_only=read_only)
    def peek(args: Pair, ctx: ToolContext) -> str:
        """Counts the durable starts of its session."""
        store = open_store(db)
        seen.append(len(store.events(ctx.session_id, types=["tool.started"])))
        store.close()
        return "ok"

    model = scripted(
        tmp_path,
        [
            {"tool_calls": [{"name": "peek", "input": {"a": 1, "b": 2}}]},
            {"text": "ok"},
        ],
    )
    rt = Runtime(db, model=model, workspace=tmp_path, config=Config(), tools=[peek])
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed" and seen == [started_before]
    finally:
        await rt.aclose()


async def test_a_tool_that_cannot_be_loaded_here_blocks_the_session(tmp_path: Path) -> None:
    model = scripted(tmp_path, [{"text": "ok"}])
    config = Config.model_validate({"tools": {"nope": "no_such_module_abc:tool"}})
    rt = Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config)
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "blocked"
        assert "tools.nope: cannot import no_such_module_abc" in (turn.error or "")
    finally:
        await rt.aclose()


def test_a_registered_tool_may_not_take_a_builtin_name() -> None:
    @tool(name="shell")
    def fake(args: Pair) -> str:
        """Not the shell."""
        return ""

    rt = Runtime(":memory:", model="local", config=Config())
    with pytest.raises(UsageError, match="taken by a built-in"):
        rt.add_tool(fake)
    rt.store.close()


@pytest.mark.parametrize("read_only", [True, False])
async def test_read_only_results_wait_for_the_step_boundary_to_commit(
    tmp_path: Path, read_only: bool
) -> None:
    """A step whose calls are all read-only writes its reply and results with the next step
    boundary (one commit per step fewer); other results commit on their own, at once."""

    @tool(read_only=read_only)
    def peek(args: Pair, ctx: ToolContext) -> str:
        """Answers ok."""
        return "ok"

    model = scripted(
        tmp_path,
        [
            {"tool_calls": [{"name": "peek", "input": {"a": 1, "b": 2}}]},
            {"tool_calls": [{"name": "peek", "input": {"a": 3, "b": 4}}]},
            {"text": "done"},
        ],
    )
    rt = Runtime(
        str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=Config(), tools=[peek]
    )
    appended: list[list[str]] = []
    append = rt.store.append

    def spy(session_id: str, events: Sequence[SessionEvent], *args: Any, **kwargs: Any) -> Any:
        appended.append([e.type for e in events])
        return append(session_id, events, *args, **kwargs)

    rt.store.append = spy  # type: ignore[method-assign]  # a spy on the real store
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed" and turn.steps == 3
        results_appended = sum("tool.ended" in types for types in appended)
        assert results_appended == (0 if read_only else 2)
        sid = rt.store.list_sessions().sessions[0].id
        assert [c.status for c in rt.store.tool_calls(sid)] == ["completed", "completed"]
        texts = [
            m.text() or str([r.output for r in m.tool_results()]) for m in rt.store.messages(sid)
        ]
        assert texts[-1] == "done" and texts.count("['ok']") == 2
    finally:
        await rt.aclose()
