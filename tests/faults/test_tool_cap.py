"""Issue 43 item 1: one cap on what any tool returns to the model (built-in, MCP, user tools),
one notice where its middle was cut, and the whole output kept as a blob of the session that
the person reads with `wakeful session show --output CALL` and through the inspector's link.

A real MCP server returns 10 MB; a user tool returns 1 MB; a small result passes untouched."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import httpx
from pydantic import BaseModel

from tests.execution.helpers import WAKEFUL, cli_env
from tests.mcp.conftest import call, script, stdio_server
from tests.mcp.mcp_server import numbered
from wakeful.config import Config
from wakeful.execution import Runtime
from wakeful.messages import FULL_OUTPUT, ToolResultBlock, tool_result_text
from wakeful.runner.tools import MAX_RESULT_BYTES
from wakeful.server import Tokens, create_app
from wakeful.tools import tool

TEN_MB = 10 * 1024 * 1024


class Size(BaseModel):
    size: int


@tool
def flood(args: Size) -> str:
    """`size` bytes of numbered lines."""
    return numbered(args.size)


def _results(rt: Runtime, sid: str) -> list[tuple[str, ToolResultBlock]]:
    return [(b.call_id, b) for m in rt.store.messages(sid) for b in m.tool_results()]


async def _cap_turn(db: str, model: str, work: Path, config: Config) -> tuple[str, str, str]:
    """Run the turn calling the big MCP tool, the flooding user tool and a small one; check
    what was stored; return the two big calls' ids and the session."""
    rt = Runtime(db, model=model, workspace=work, config=config, tools=[flood])
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed", turn
        sid = rt.store.list_sessions().sessions[0].id
        (big_id, big), (flood_id, flooded), (_, small) = _results(rt, sid)
        assert small.output == "5" and small.metadata is None  # within the cap: untouched
        for block, size in ((big, TEN_MB), (flooded, 1024 * 1024)):
            text = tool_result_text(block.output)
            assert len(text.encode()) <= MAX_RESULT_BYTES
            assert text.startswith("line 0 ") and text.rstrip("\n").endswith(
                numbered(size)[-40:].rstrip("\n")
            )
            assert (
                f"bytes of this result omitted (the cap is {MAX_RESULT_BYTES // 1024} KiB)" in text
            )
            kept = (block.metadata or {})[FULL_OUTPUT]
            assert isinstance(kept, dict) and kept["bytes"] == size
            assert rt.store.get_blob(str(kept["ref"])).decode() == numbered(size)
        # the request the model was sent holds the cut result, not 10 MB
        assert all(len(m.model_dump_json()) < 4 * MAX_RESULT_BYTES for m in rt.store.messages(sid))
        return big_id, flood_id, sid
    finally:
        await rt.aclose()


def test_every_kind_of_tool_result_shares_the_cap_and_the_whole_output_is_kept(tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").mkdir()
    model = script(
        tmp_path / "s.json",
        [
            {
                "tool_calls": [
                    {"name": "mcp__calc__big", "input": {"size": TEN_MB}},
                    {"name": "flood", "input": {"size": 1024 * 1024}},
                    {"name": "mcp__calc__add", "input": {"a": 2, "b": 3}},
                ]
            },
            {"text": "ok"},
        ],
    )
    db = str(tmp_path / "s.db")
    config = Config.model_validate({"mcp": {"servers": {"calc": stdio_server(tmp_path / "r.txt")}}})
    big_id, flood_id, sid = asyncio.run(_cap_turn(db, model, work, config))
    env = cli_env(db, tmp_path)
    whole = subprocess.run(
        [WAKEFUL, "session", "show", sid, "--output", big_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout == numbered(TEN_MB)
    shown = subprocess.run(
        [WAKEFUL, "session", "show", sid], env=env, capture_output=True, text=True, timeout=60
    )
    assert f"the whole output, {TEN_MB} bytes: session show --output {big_id}" in shown.stdout
    assert f"session show --output {flood_id}" in shown.stdout
    missing = subprocess.run(
        [WAKEFUL, "session", "show", sid, "--output", "call_nope"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "no result of a tool call 'call_nope'" in missing.stderr


async def test_the_inspector_links_the_whole_output(tmp_path: Path):
    work = tmp_path / "work"
    work.mkdir()
    model = script(tmp_path / "s.json", [call("flood", size=300_000), {"text": "ok"}])
    rt = Runtime(str(tmp_path / "s.db"), model=model, workspace=work, tools=[flood])
    [turn] = await rt.run("go")
    sid = rt.store.list_sessions().sessions[0].id
    [(_, block)] = _results(rt, sid)
    ref = str((block.metadata or {})[FULL_OUTPUT]["ref"])  # type: ignore[index]
    app = create_app(rt, tokens=Tokens(["t" * 16]))
    auth = {"Authorization": "Bearer " + "t" * 16}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://x", headers=auth
    ) as c:
        page = await c.get(f"/ui/sessions/{sid}")
        assert page.status_code == 200
        assert (
            f"/sessions/{sid}/media/{ref}" in page.text
            and "the whole output (300000 bytes" in page.text
        )
        whole = await c.get(f"/sessions/{sid}/media/{ref}")
        assert whole.status_code == 200 and whole.text == numbered(300_000)
        assert whole.headers["content-type"].startswith("text/plain")
    await rt.aclose()


def test_the_shell_keeps_its_whole_output(tmp_path: Path):
    """A command printing 280 KB: the model reads the capped view with the one notice; the
    person reads all of it, its middle included (issue 43 item 1; the shell used to keep only
    its head and tail, and the middle was lost)."""
    work = tmp_path / "work"
    work.mkdir()
    command = (
        "i=0; while [ $i -lt 5000 ]; do printf 'line %050d\\n' $i;"
        " [ $i -eq 2500 ] && echo MIDDLE-MARKER-7f3a; i=$((i+1)); done"
    )
    model = script(tmp_path / "s.json", [call("shell", command=command), {"text": "ok"}])
    db = str(tmp_path / "s.db")
    config = Config.model_validate({"permissions": {"shell": "allow"}})

    async def turn() -> tuple[str, str]:
        rt = Runtime(db, model=model, workspace=work, config=config)
        try:
            [done] = await rt.run("go")
            assert done.outcome == "completed", done
            sid = rt.store.list_sessions().sessions[0].id
            [(call_id, block)] = _results(rt, sid)
            text = tool_result_text(block.output)
            assert len(text.encode()) <= MAX_RESULT_BYTES and "MIDDLE-MARKER" not in text
            assert (
                "bytes of this result omitted (the cap is 64 KiB); the person can read the whole output, kept as blob"
                in text
            )
            assert text.startswith("line 000") and text.endswith("04999\n[exit code 0]")
            return sid, call_id
        finally:
            await rt.aclose()

    sid, call_id = asyncio.run(turn())
    whole = subprocess.run(
        [WAKEFUL, "session", "show", sid, "--output", call_id],
        env=cli_env(db, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert whole.returncode == 0, whole.stderr
    lines = whole.stdout.splitlines()
    assert len(lines) == 5002 and lines[2501] == "MIDDLE-MARKER-7f3a"
    assert lines[0] == f"line {0:050d}" and lines[-1] == "[exit code 0]"
