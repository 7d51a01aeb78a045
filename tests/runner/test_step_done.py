"""A step's single terminal event, `step_done` (issue 37 item 23): `ended` once its reply and
its calls' results are durable, `failed` when the turn ends otherwise during it; hosted calls
(provider-run tools) tracked as calls. On main a step had no terminal event (`step_end` says
the reply finished streaming, before its calls ran) and hosted calls were not calls."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

from pydantic import JsonValue

from tests.execution.helpers import check_session
from wakeful.events import HostedToolCall, MessageAdded
from wakeful.execution import HookEvent, Runtime
from wakeful.execution._place import Place
from wakeful.messages import Message, ServerToolResultBlock, ServerToolUseBlock, TextBlock
from wakeful.providers import Finish, ModelRequest, Provider, StreamEvent
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


class HostedSearch:
    """The scripted provider, each reply of which starts with a web search the provider ran
    itself: the first one found something, later ones failed."""

    def __init__(self, inner: Provider) -> None:
        self._inner = inner
        self.name, self.model = inner.name, inner.model
        self.context_window, self.max_output_tokens = inner.context_window, inner.max_output_tokens
        self.replies = 0

    def wire_request(self, request: ModelRequest) -> dict[str, JsonValue]:
        return self._inner.wire_request(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async for event in self._inner.stream(request):
            if isinstance(event, Finish):
                self.replies += 1
                n = self.replies
                found = {"type": "web_search_result"} if n == 1 else {"type": "x_tool_result_error"}
                blocks = (
                    ServerToolUseBlock(id=f"srv_{n}", name="web_search", input={"query": f"q{n}"}),
                    ServerToolResultBlock(
                        tool_use_id=f"srv_{n}", content=[found] if n == 1 else found
                    ),
                    *event.message.blocks,
                )
                event = Finish(
                    event.reason, event.message.model_copy(update={"blocks": blocks}), event.usage
                )
            yield event

    async def aclose(self) -> None:
        await self._inner.aclose()


class HostedRuntime(Runtime):
    def build_provider(self, spec: str, place: Place | None = None) -> Provider:
        return HostedSearch(super().build_provider(spec, place))


async def test_hosted_calls_are_durable_calls_committed_with_their_reply(tmp_path: Path) -> None:
    """Issue 37 item 23: a hosted call is in the log as a call (`tool.hosted`, with its outcome),
    in the reply's own commit. On main it was only a live event."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [GOAL, {"text": "done"}]}]}))
    rt = HostedRuntime(str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=tmp_path)
    [turn] = await rt.run("go")
    assert turn.outcome == "completed"
    sid = rt.store.list_sessions().sessions[0].id
    log = rt.store.events(sid, types=["message.added", "tool.hosted"])
    hosted = [(e.seq, e.event) for e in log if isinstance(e.event, HostedToolCall)]
    replies = {
        e.event.message.id: e.seq
        for e in log
        if isinstance(e.event, MessageAdded) and e.event.message.role == "assistant"
    }
    assert [(h.call_id, h.name, h.input, h.status) for _, h in hosted] == [
        ("srv_1", "web_search", {"query": "q1"}, "completed"),
        ("srv_2", "web_search", {"query": "q2"}, "failed"),
    ]
    for seq, call in hosted:  # right after the reply that holds it: the same commit
        assert replies[call.message_id] == seq - 1
    assert {c.call_id for c in rt.store.tool_calls(sid)} == {
        c.id for m in rt.store.messages(sid) for c in m.tool_calls()
    }  # local calls only: nothing hosted is left running for recovery
    check_session(rt.store, sid)
    await rt.aclose()
