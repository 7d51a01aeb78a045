"""An MCP server switched off and on in one session (issue 37 item 30, the chat's `/mcp`):
durable in the session, applied from its next turn; off keeps the server's tools in the request
byte for byte (the provider's cached prefix holds), says so in its instruction source, and
answers a call with an error without sending it. On main a server could only be configured,
not switched in a session."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeful.config import Config
from wakeful.errors import UsageError
from wakeful.execution import Runtime

from .conftest import call, script, stdio_server


def results(rt: Runtime, sid: str) -> list[tuple[str, bool]]:
    return [(str(r.output), r.is_error) for m in rt.store.messages(sid) for r in m.tool_results()]


async def test_a_server_switched_off_keeps_its_tools_listed_and_refuses_calls(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.txt"
    model = script(tmp_path / "s.json", [call("mcp__calc__record", text="x"), {"text": "ok"}])
    data = {"mcp": {"servers": {"calc": stdio_server(record)}}}
    config = Config.model_validate(data)
    rt = Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config)
    try:
        [one] = await rt.run("first")
        sid = rt.store.list_sessions().sessions[0].id
        assert rt.mcp_switches(sid) == {"calc": True}
        with pytest.raises(UsageError, match="no MCP server nope"):
            rt.switch_mcp(sid, "nope", False)
        assert rt.switch_mcp(sid, "calc", False) and not rt.switch_mcp(sid, "calc", False)
        assert rt.mcp_switches(sid) == {"calc": False}
        [two] = await rt.run("second", session_id=sid)
        assert rt.switch_mcp(sid, "calc", True)
        [three] = await rt.run("third", session_id=sid)
        assert [t.outcome for t in (one, two, three)] == ["completed"] * 3
        off = "MCP server calc is switched off in this session; the call was not sent"
        assert results(rt, sid) == [("recorded x", False), (off, True), ("recorded x", False)]
        assert record.read_text().splitlines() == ["x", "x"]  # the off call never reached it
        receipts = [r for r in rt.store.receipts(sid) if r.purpose == "step"]
        tools = {d for r in receipts for s, _src, d in r.sections if s == "tools"}
        assert len(tools) == 1  # the same tools in every request: the cached prefix holds
        notes = [
            str(e.event.text)  # type: ignore[union-attr]
            for e in rt.store.events(sid, types=["instructions.updated"])
        ][1:]
        assert "MCP server calc is switched off in this session" in notes[0]
        assert "switched off" not in notes[1]  # on again: the server's own text
        keys = [e.data["key"] for e in rt.store.plain_events(sid, types=["extension_state.set"])]
        assert keys == ["calc", "calc"]  # durable: off, then on
    finally:
        await rt.aclose()
