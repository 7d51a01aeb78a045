"""MCP client tools against real servers written with the SDK (stdio and streamable HTTP):
round trips, durability events, permission patterns, a server dying mid-call or failing to
start, server instructions and a changed tool list as instruction deltas."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from wakeful.config import Config
from wakeful.events import InstructionsUpdated
from wakeful.execution import Runtime

from .conftest import call, script, stdio_server


def config(**servers: dict[str, object]) -> dict[str, object]:
    return {"mcp": {"servers": servers}}


def runtime(tmp_path: Path, model: str, data: dict[str, object]) -> Runtime:
    return Runtime(
        str(tmp_path / "s.db"),
        model=model,
        workspace=tmp_path,
        config=Config.model_validate(data),
    )


def results(rt: Runtime, sid: str) -> list[tuple[str, bool]]:
    return [(str(r.output), r.is_error) for m in rt.store.messages(sid) for r in m.tool_results()]


def instruction_text(rt: Runtime, sid: str) -> str:
    events = rt.store.events(sid, types=["instructions.updated"])
    return "\n".join(str(e.event.text) for e in events if isinstance(e.event, InstructionsUpdated))


async def round_trip(tmp_path: Path, server: dict[str, object], record: Path) -> None:
    model = script(
        tmp_path / "s.json",
        [
            call("mcp__calc__add", a=2, b=3),
            call("mcp__calc__record", text="once"),
            {"text": "ok"},
        ],
    )
    rt = runtime(tmp_path, model, config(calc=server))
    try:
        [turn] = await rt.run("add")
        assert turn.outcome == "completed" and turn.final_text == "ok"
        sid = turn_session(rt)
        assert results(rt, sid) == [("5", False), ("recorded once", False)]
        assert lines(record) == ["once"]
        # durable like a built-in call: started (with the reply), then ended, one each
        kinds = [e.type for e in rt.store.events(sid) if e.type.startswith("tool.")]
        assert kinds == ["tool.started", "tool.ended"] * 2
        assert [c.status for c in rt.store.tool_calls(sid)] == ["completed", "completed"]
    finally:
        await rt.aclose()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def turn_session(rt: Runtime) -> str:
    return rt.store.list_sessions().sessions[0].id


async def test_a_stdio_server_round_trip(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    await round_trip(tmp_path, stdio_server(record), record)


async def test_a_streamable_http_server_round_trip(
    tmp_path: Path, http_server: tuple[str, Path]
) -> None:
    url, record = http_server
    await round_trip(tmp_path, {"url": url}, record)


async def test_server_instructions_and_tools_are_an_instruction_source(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    model = script(tmp_path / "s.json", [{"text": "ok"}])
    rt = runtime(tmp_path, model, config(calc=stdio_server(record, MCP_INSTRUCTIONS="Be exact.")))
    try:
        [turn] = await rt.run("hi")
        sid = turn_session(rt)
        first = rt.store.events(sid, types=["instructions.updated"])
        assert len(first) == 1 and "mcp:calc" in first[0].event.delta  # type: ignore[union-attr]
    finally:
        await rt.aclose()
    # the server now lists one more tool and says something else: one delta, in the transcript
    changed = stdio_server(record, MCP_INSTRUCTIONS="Be quick.", MCP_EXTRA_TOOL="more")
    rt = runtime(tmp_path, model, config(calc=changed))
    try:
        await rt.run("again", session_id=sid)
        text = instruction_text(rt, sid)
        assert "mcp__calc__more" in text and "Be quick." in text
    finally:
        await rt.aclose()


async def test_permissions_apply_by_name_pattern(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    model = script(
        tmp_path / "s.json",
        [
            {
                "tool_calls": [
                    {"name": "mcp__calc__record", "input": {"text": "no"}},
                    {"name": "mcp__calc__add", "input": {"a": 1, "b": 1}},
                ]
            },
            {"text": "ok"},
        ],
    )
    data = config(calc=stdio_server(record)) | {
        "permissions": {"mcp__calc__*": "deny", "mcp__calc__add": "allow"}
    }
    rt = runtime(tmp_path, model, data)
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed"
        denied, added = results(rt, turn_session(rt))
        assert denied == ("permission denied: mcp__calc__record is not allowed here", True)
        assert added == ("2", False)
        assert not record.exists()  # the denied call never reached the server
    finally:
        await rt.aclose()


async def test_a_server_killed_mid_call_is_a_tool_error_and_restarts(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    model = script(
        tmp_path / "s.json",
        [
            call("mcp__calc__crash"),
            call("mcp__calc__record", text="after"),
            {"text": "ok"},
        ],
    )
    rt = runtime(tmp_path, model, config(calc=stdio_server(record)))
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed" and turn.final_text == "ok"
        crashed, after = results(rt, turn_session(rt))
        assert crashed[1] and "MCP server calc" in crashed[0]
        assert "ended during the call" in crashed[0] and "partially run" in crashed[0]
        assert after == ("recorded after", False)  # the next call started it again
    finally:
        await rt.aclose()


async def test_a_server_that_cannot_start_is_no_failed_turn(tmp_path: Path) -> None:
    model = script(tmp_path / "s.json", [call("mcp__broken__anything"), {"text": "ok"}])
    broken = {"command": [str(tmp_path / "no-such-server")], "allowed_tools": ["anything"]}
    rt = runtime(tmp_path, model, config(broken=broken))
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed"
        sid = turn_session(rt)
        [(text, is_error)] = results(rt, sid)
        assert is_error and "MCP server broken" in text and "no-such-server" in text
        assert text.endswith("the call was not sent")
        delta = rt.store.events(sid, types=["instructions.updated"])[0].event
        assert "mcp:broken" in delta.delta  # type: ignore[union-attr]
    finally:
        await rt.aclose()


async def test_allowed_tools_limit_what_is_offered(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    model = script(tmp_path / "s.json", [call("mcp__calc__record", text="x"), {"text": "ok"}])
    server = stdio_server(record) | {"allowed_tools": ["add"]}
    rt = runtime(tmp_path, model, config(calc=server))
    try:
        await rt.run("go")
        [(text, is_error)] = results(rt, turn_session(rt))
        assert is_error and text.startswith("unknown tool 'mcp__calc__record'")
        assert "mcp__calc__add" in text and not record.exists()
    finally:
        await rt.aclose()


@pytest.mark.parametrize("agent", ["plan"])
async def test_an_agent_without_mcp_in_its_list_starts_no_server(
    tmp_path: Path, agent: str
) -> None:
    model = script(tmp_path / "s.json", [{"text": "ok"}])
    broken = {"command": [str(tmp_path / "no-such-server")]}
    rt = Runtime(
        str(tmp_path / "s.db"),
        model=model,
        workspace=tmp_path,
        agent=agent,
        config=Config.model_validate(config(broken=broken)),
    )
    try:
        await rt.run("go")
        delta = rt.store.events(turn_session(rt), types=["instructions.updated"])[0].event
        assert "mcp:broken" not in delta.delta  # type: ignore[union-attr]
    finally:
        await rt.aclose()


async def test_an_http_server_killed_mid_call_is_a_tool_error(
    tmp_path: Path, http_server: tuple[str, Path]
) -> None:
    url, _record = http_server
    model = script(
        tmp_path / "s.json",
        [
            call("mcp__web__crash"),
            call("mcp__web__add", a=1, b=1),
            {"text": "ok"},
        ],
    )
    rt = runtime(tmp_path, model, config(web={"url": url, "timeout_s": 20}))
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed" and turn.final_text == "ok"
        crashed, after = results(rt, turn_session(rt))
        assert crashed[1] and crashed[0].startswith("MCP server web: ")
        assert after[1] and after[0].startswith("MCP server web: ")  # gone for good: not sent
        assert after[0].endswith("the call was not sent")
    finally:
        await rt.aclose()


async def test_a_call_without_an_answer_in_time_is_a_tool_error(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    model = script(
        tmp_path / "s.json",
        [
            call("mcp__calc__block", text="slow"),
            call("mcp__calc__add", a=1, b=2),
            {"text": "ok"},
        ],
    )
    rt = runtime(tmp_path, model, config(calc=stdio_server(record) | {"timeout_s": 1}))
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed"
        late, added = results(rt, turn_session(rt))
        assert late == (
            "MCP server calc: no answer within 1s (timeout_s); the call may have partially run, "
            "and may still be running",
            True,
        )
        assert added == ("3", False)  # the connection is still good
    finally:
        await rt.aclose()
        pid = tmp_path / "record.txt.pid"
        if pid.exists():  # the blocked server call: end its process
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid.read_text()), signal.SIGKILL)


async def test_a_server_is_reused_per_process_and_restarted_when_it_exited(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.txt"
    model = script(
        tmp_path / "s.json",
        [
            call("mcp__calc__pid"),
            call("mcp__calc__pid"),
            {"text": "ok"},
        ],
    )
    rt = runtime(tmp_path, model, config(calc=stdio_server(record)))
    try:
        await rt.run("first")
        sid = turn_session(rt)
        first = {text for text, _ in results(rt, sid)}
        await rt.run("second", session_id=sid)  # another drain, same process: same server
        assert {text for text, _ in results(rt, sid)} == first and len(first) == 1
        [server_pid] = first
        os.kill(int(server_pid), signal.SIGKILL)  # it exits while idle
        await asyncio.sleep(0.2)
        await rt.run("third", session_id=sid)
        third = results(rt, sid)[-2:]
        assert all(not err for _, err in third) and third[0][0] != server_pid
    finally:
        await rt.aclose()


async def test_concurrent_calls_wait_for_one_restart(tmp_path: Path) -> None:
    """Two calls of one step on a server that just died: one starts it, the other waits for that
    start instead of using a connection not yet open."""
    record = tmp_path / "record.txt"
    model = script(
        tmp_path / "s.json",
        [
            call("mcp__calc__crash"),
            {
                "tool_calls": [
                    {"name": "mcp__calc__add", "input": {"a": 1, "b": 2}},
                    {"name": "mcp__calc__pid", "input": {}},
                ]
            },
            {"text": "ok"},
        ],
    )
    rt = runtime(tmp_path, model, config(calc=stdio_server(record)))
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed"
        _crashed, added, pid = results(rt, turn_session(rt))
        assert added == ("3", False) and not pid[1] and pid[0].isdigit()
    finally:
        await rt.aclose()
