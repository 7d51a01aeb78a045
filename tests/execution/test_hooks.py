"""Lifecycle hooks on a real SQLite store with the scripted provider: every hook, in order,
for a turn with tools, an overflow compaction and a repaired pairing; hooks that raise or are
slow change nothing about the turn or what it made durable."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from wakeful.config import CompactionConfig, Config, RetryConfig
from wakeful.errors import UsageError
from wakeful.events import MessageAdded
from wakeful.execution import HOOK_KINDS, HookEvent, Runtime
from wakeful.messages import Message, ToolCallBlock

SUMMARY_RULE = {
    "match": "^Summarize the conversation below",
    "replies": [{"text": "## Objective\n- go on"}],
}
PAD = "lorem ipsum dolor sit amet " * 12  # ~80 tokens


def model(tmp_path: Path) -> str:
    path = tmp_path / "script.json"
    rules = [
        SUMMARY_RULE,
        {
            "match": "^tools",
            "replies": [
                {
                    "tool_calls": [{"name": "shell", "input": {"command": "echo hi"}}],
                    "error": {"kind": "context_overflow", "times": 1},
                },
                {"text": "done", "error": {"kind": "rate_limit", "times": 1, "retry_after_ms": 5}},
            ],
        },
        {"match": ".", "replies": [{"text": "ok " + PAD}]},
    ]
    path.write_text(json.dumps({"rules": rules, "chunk_chars": 4096}))
    return f"scripted:{path}"


def runtime(tmp_path: Path, name: str = "s.db") -> Runtime:
    config = Config(
        compaction=CompactionConfig(reserved=500),
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    )
    return Runtime(
        str(tmp_path / name), model=model(tmp_path), workspace=tmp_path, config=config, ask=allow
    )


async def allow(name: str, tool_input: dict[str, object]) -> bool:
    """Someone present who allows every call (the shell asks by default)."""
    return True


async def prepared(rt: Runtime) -> str:
    """A session with some history and, at its end, a tool call that never got a result (the
    next request's wire copy repairs that pairing)."""
    sid: str | None = None
    for i in range(6):
        [turn] = await rt.run(f"turn {i}: {PAD}", session_id=sid)
        assert turn.outcome == "completed"
        sid = sid or rt.store.list_sessions().sessions[0].id
    assert sid is not None
    call = ToolCallBlock(id="call_lost", name="shell", input={"command": "true"})
    rt.store.append(sid, [MessageAdded(message=Message(role="assistant", blocks=(call,)))])
    return sid


def squeeze(kinds: list[str]) -> list[str]:
    """Consecutive progress events as one (their number depends on the stream's chunks)."""
    out: list[str] = []
    for kind in kinds:
        if not (kind == "compaction_progress" and out and out[-1] == kind):
            out.append(kind)
    return out


async def test_every_hook_fires_in_order_for_a_turn(tmp_path: Path):
    rt = runtime(tmp_path)
    sid = await prepared(rt)
    seen: list[HookEvent] = []
    for kind in HOOK_KINDS:
        rt.hooks.on(kind, seen.append)  # type: ignore[arg-type]  # every name of HOOK_KINDS
    [turn] = await rt.run("tools please", session_id=sid)
    await rt.hooks.flush()
    assert turn.outcome == "completed" and turn.final_text == "done"
    assert {e.session_id for e in seen} == {sid}
    assert squeeze([e.kind for e in seen]) == [
        "input_admitted",
        "session_start",
        "input_delivered",
        "turn_start",
        "pairing_repair",  # the lost call's result, synthesized in the request's wire copy
        "step_start",  # attempt 1: the provider answers with a context overflow
        "compaction_start",
        "compaction_progress",
        "compaction_end",
        "step_start",  # attempt 2, from the compacted history
        "step_end",
        "tool_start",
        "tool_end",
        "step_done",  # step 1's call is durable: the step ended
        "step_start",  # step 2: a rate limit, then a durable retry
        "retry_scheduled",
        "step_start",
        "step_end",
        "step_done",
        "turn_end",
        "session_end",
    ]
    by_kind = {e.kind: e for e in seen}
    assert by_kind["compaction_start"].data["reason"] == "overflow"
    assert by_kind["compaction_end"].data["outcome"] == "compacted"
    assert by_kind["pairing_repair"].data["repair"] == "synthetic-tool-result"
    assert by_kind["pairing_repair"].data["call_id"] == "call_lost"
    assert by_kind["tool_end"].data["name"] == "shell"
    assert by_kind["turn_end"].data["outcome"] == "completed"
    end = by_kind["session_end"].data
    assert end["status"] == "idle" and end["turns"] == 1
    assert end["first_turn_id"] == end["last_turn_id"] == turn.turn_id
    assert by_kind["turn_start"].data["turn_id"] == turn.turn_id
    progress = [e.data for e in seen if e.kind == "compaction_progress"]
    assert progress[0]["stage"] == "summarizing" and progress[-1]["stage"] == "streaming"
    assert all(isinstance(e.at_ms, int) and e.at_ms > 0 for e in seen)
    await rt.aclose()


async def test_raising_and_slow_hooks_change_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    plain = runtime(tmp_path, "plain.db")
    sid = await prepared(plain)
    [expected] = await plain.run("tools please", session_id=sid)
    want = [s.event.type for s in plain.store.events(sid)]
    await plain.aclose()

    rt = runtime(tmp_path, "hooked.db")
    rt.hooks.timeout_s = 0.5  # bounded: the async 2 s hook is cut off after this
    sid = await prepared(rt)
    released = threading.Event()
    blocked: list[bool] = []
    late: list[str] = []

    def boom(event: HookEvent) -> None:
        raise RuntimeError("a broken hook")

    def slow_sync(event: HookEvent) -> None:  # 2 s unless released; runs in a worker thread
        blocked.append(released.wait(2))

    async def slow_async(event: HookEvent) -> None:
        await asyncio.sleep(2)

    for kind in HOOK_KINDS:
        rt.hooks.on(kind, boom)  # type: ignore[arg-type]  # every name of HOOK_KINDS
    rt.hooks.on("turn_start", slow_async)
    rt.hooks.on("session_start", slow_sync)
    rt.hooks.on("turn_end", lambda e: late.append(e.kind))
    [turn] = await rt.run("tools please", session_id=sid)
    # The turn ended while the 2 s hook was still blocked: the loop never waited for it.
    assert not blocked
    released.set()
    await rt.hooks.flush()
    assert blocked == [True] and late == ["turn_end"]  # later hooks still ran, in order
    assert (turn.outcome, turn.final_text, turn.steps) == (
        expected.outcome,
        expected.final_text,
        expected.steps,
    )
    assert [s.event.type for s in rt.store.events(sid)] == want
    assert "a broken hook" in caplog.text and "took over 0.5s" in caplog.text
    await rt.aclose()


def test_an_unknown_hook_is_a_usage_error(tmp_path: Path):
    rt = runtime(tmp_path)
    with pytest.raises(UsageError, match="unknown hook 'turn_begin'"):
        rt.hooks.on("turn_begin", print)  # type: ignore[arg-type]  # the mistake under test
    off = rt.hooks.on("input_admitted", print)
    off()
    assert not rt.hooks
    rt.close()


def test_a_send_without_an_event_loop_calls_its_hooks_at_once(tmp_path: Path):
    rt = runtime(tmp_path)
    seen: list[HookEvent] = []
    rt.hooks.on("input_admitted", seen.append)
    sent = rt.send("hello", resume=False)
    assert [(e.kind, e.session_id, e.data["input_id"]) for e in seen] == [
        ("input_admitted", sent.session_id, sent.input_id)
    ]
    rt.close()
