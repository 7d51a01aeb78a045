"""The session's context (issue 37 item 27): the active history the next request carries, in
the library (`execution.session_context`), the API (`GET /sessions/{id}/context`, the clients)
and the CLI (`wakeful session show --context`). On main none of them existed."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.server.conftest import TOKEN, MakeServer, script, wait_for
from wakeful.cli._main import cli
from wakeful.client import Client
from wakeful.config import CompactionConfig, Config, RetryConfig
from wakeful.execution import Runtime, session_context
from wakeful.messages import CompactSummaryBlock
from wakeful.runner._tail import HIDDEN_RESULT

SUMMARY = {
    "match": "^Summarize the conversation below",
    "replies": [{"text": "## Objective\n- go"}],
}
GOAL = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}
RULES = [
    SUMMARY,
    {"match": "^one", "replies": [GOAL, {"text": "ok"}]},
    {"match": ".", "replies": [{"text": "ok"}]},
]


def runtime(tmp_path: Path, strategy: str) -> Runtime:
    config = Config(
        compaction=CompactionConfig(strategy=strategy, reuse_cache=False),  # type: ignore[arg-type]
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    )
    model = script(tmp_path, RULES)
    return Runtime(str(tmp_path / f"{strategy}.db"), model=model, workspace=tmp_path, config=config)


async def compacted(rt: Runtime) -> str:
    sid = ""
    for text in ("one", "two", "three", "four"):
        [turn] = await rt.run(text, session_id=sid or None)
        sid = sid or rt.store.list_sessions().sessions[0].id
    rt.send(session_id=sid, kind="compaction", payload={"tail_turns": 1}, input_id="c1")
    await rt.resume(sid)
    return sid


async def test_the_context_starts_at_the_summary_and_keeps_the_tail(tmp_path: Path) -> None:
    rt = runtime(tmp_path, "summary")
    sid = await compacted(rt)
    context = session_context(rt.reads, sid)
    assert isinstance(context[0].blocks[0], CompactSummaryBlock)
    assert [m.text() for m in context[1:]] == ["four", "ok"]
    assert len(rt.store.messages(sid)) == 11  # the transcript keeps everything (and the summary)
    await rt.aclose()


async def test_the_context_shows_hidden_tool_output_as_its_stub(tmp_path: Path) -> None:
    rt = runtime(tmp_path, "tail")
    sid = await compacted(rt)
    context = session_context(rt.reads, sid)
    results = [r for m in context for r in m.tool_results()]
    assert [r.output for r in results] == [HIDDEN_RESULT]  # the goal_set result of "one"
    stored = [r for m in rt.store.messages(sid) for r in m.tool_results()]
    assert stored[0].output != HIDDEN_RESULT  # the store keeps it whole
    assert len(context) == len(rt.store.messages(sid))  # tail: nothing replaced
    await rt.aclose()


def test_the_api_client_and_cli_show_the_context(make_server: MakeServer, tmp_path: Path) -> None:
    served = make_server(model=script(tmp_path, RULES))
    with Client(served.url, TOKEN) as c:
        sid = c.create_session(prompt="one", wait=True)["session"]["id"]
        for text in ("two", "three", "four"):
            c.prompt(sid, text, wait=True)
        c.compact(sid, tail_turns=1, input_id="c1")
        wait_for(lambda: c.get_session(sid)["status"] == "idle" and not c.pending(sid)["items"])
        wait_for(lambda: "summary" in json.dumps(c.context(sid)["messages"][0]), what="summary")
        got = c.context(sid)
        assert got["redacted"] is True
        assert [m["blocks"][0].get("text") for m in got["messages"][1:]] == ["four", "ok"]
    db = str(served.tmp_path / "s0.db")
    out = CliRunner().invoke(
        cli, ["session", "show", sid, "--context", "--format", "json", "--db", db]
    )
    assert out.exit_code == 0, out.output
    shown = json.loads(out.output)["messages"]
    assert shown[0]["blocks"][0]["type"] == "compact_summary" and len(shown) == 3


def test_the_pairing_heal_through_the_api(make_server: MakeServer, tmp_path: Path) -> None:
    """Issue 37 item 28 through `POST /sessions/{id}/history` (`heal_pairing`)."""
    from wakeful.events import MessageAdded
    from wakeful.messages import Message, ToolResultBlock, is_wire_valid

    served = make_server(model=script(tmp_path, RULES))
    with Client(served.url, TOKEN) as c:
        sid = c.create_session(prompt="two", wait=True)["session"]["id"]
        orphan = Message(role="user", blocks=(ToolResultBlock(call_id="c9", output="lost"),))
        served.store.append(sid, [MessageAdded(message=orphan)])
        revision = c.get_session(sid)["last_seq"]
        out = c.edit_history(sid, revision=revision, heal_pairing=True)
        assert out["revision"] == revision + 1
        assert is_wire_valid(served.store.messages(sid))
        assert orphan.id not in {m["message"]["id"] for m in c.messages(sid)["messages"]}
