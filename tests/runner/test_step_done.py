"""A step's single terminal event, `step_done` (issue 37 item 23): `ended` once its reply and
its calls' results are durable, `failed` when the turn ends otherwise during it; hosted calls
(provider-run tools) tracked as calls. On main a step had no terminal event (`step_end` says
the reply finished streaming, before its calls ran) and hosted calls were not calls."""

from __future__ import annotations

import json
from pathlib import Path

from wakeful.execution import HookEvent, Runtime
from wakeful.messages import Message, ServerToolResultBlock, ServerToolUseBlock, TextBlock
from wakeful.runner._step_done import hosted_calls

GOAL = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}


async def done_events(tmp_path: Path, replies: list[dict[str, object]]) -> list[HookEvent]:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": replies}]}))
    rt = Runtime(str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=tmp_path)
    seen: list[HookEvent] = []
    rt.hooks.on("step_done", seen.append)
    await rt.run("go")
    await rt.hooks.flush()
    await rt.aclose()
    return seen


async def test_each_step_ends_once_after_its_calls_are_durable(tmp_path: Path) -> None:
    seen = await done_events(tmp_path, [GOAL, GOAL, {"text": "done"}])
    assert [(e.data["step"], e.data["outcome"]) for e in seen] == [
        (1, "ended"),
        (2, "ended"),
        (3, "ended"),
    ]


async def test_a_step_the_turn_fails_in_is_failed(tmp_path: Path) -> None:
    error = {"kind": "invalid_request", "times": 9}
    seen = await done_events(tmp_path, [GOAL, {"text": "x", "error": error}])
    assert [(e.data["step"], e.data["outcome"]) for e in seen] == [(1, "ended"), (2, "failed")]
    assert "scripted invalid_request" in str(seen[-1].data["error"])


def test_hosted_calls_are_tracked_with_their_status() -> None:
    reply = Message(
        role="assistant",
        blocks=(
            ServerToolUseBlock(id="srv_1", name="web_search", input={"query": "x"}),
            ServerToolResultBlock(tool_use_id="srv_1", content=[{"type": "web_search_result"}]),
            ServerToolUseBlock(id="srv_2", name="web_search", input={"query": "y"}),
            ServerToolResultBlock(
                tool_use_id="srv_2",
                content={"type": "web_search_tool_result_error", "error_code": "x"},
            ),
            ServerToolUseBlock(id="srv_3", name="web_fetch"),
            TextBlock(text="found it"),
        ),
    )
    assert [(c["call_id"], c["status"]) for c in hosted_calls(reply)] == [
        ("srv_1", "completed"),
        ("srv_2", "failed"),
        ("srv_3", "failed"),
    ]
