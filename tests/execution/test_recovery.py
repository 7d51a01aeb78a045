"""Recovery at drain start, in one process: the state a dead driver left is built in the store.

A claim owned by "this host, this pid, another start time" is a dead owner (a pid reused by a
new process), so the takeover is immediate; an owner on another host waits for its lease.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tests.allow import ALLOW_WRITES
from wakeful.config import Config, ExecutionConfig, RetryConfig
from wakeful.events import MessageAdded, SessionCreated, ToolCallStarted
from wakeful.execution import Runtime
from wakeful.execution._owner import host_id
from wakeful.execution._recovery import CONTINUATION, NOT_RUN_RESULT, PARTIAL_RESULT
from wakeful.execution._writes import promote_idle
from wakeful.messages import Message, TextBlock, TextOrigin, ToolCallBlock
from wakeful.store import ClaimToken, fence

from .helpers import check_session, write_script

DEAD = f"{host_id()}/{os.getpid()}/not-this-start"
CONFIG = Config(
    permissions=ALLOW_WRITES,
    retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    execution=ExecutionConfig(poll_interval_ms=10, lease_ms=300),
)


def setup(db: str, tmp_path: Path) -> tuple[Runtime, str]:
    model = write_script(
        tmp_path / "script.json",
        [
            {
                "match": "^job",
                "replies": [
                    {
                        "tool_calls": [
                            {"name": "shell", "input": {"command": "echo ran >> ran.txt"}}
                        ]
                    },
                    {"text": "job done"},
                ],
            },
            {"match": ".", "replies": [{"text": "plain answer"}]},
        ],
    )
    rt = Runtime(db, model=model, workspace=tmp_path, config=CONFIG)
    return rt, rt.send("job one", resume=False).session_id


def crashed_turn(rt: Runtime, sid: str, owner: str = DEAD) -> tuple[str, ClaimToken]:
    """Take the claim as `owner` and start a turn on the pending input, as a driver would."""
    claim = rt.store.claims.acquire(sid, owner, lease_ms=CONFIG.execution.lease_ms)
    assert claim is not None
    token = fence(claim)
    promote_idle(rt.store, sid, token, start_turn="turn_dead")
    return "turn_dead", token


def call_message() -> Message:
    call = ToolCallBlock(id="call_1", name="shell", input={"command": "echo ran >> ran.txt"})
    return Message(id="msg_calls", role="assistant", blocks=(call,))


async def test_a_running_call_is_failed_never_replayed(db_url: str, tmp_path: Path):
    rt, sid = setup(db_url, tmp_path)
    tid, token = crashed_turn(rt, sid)
    rt.store.append(
        sid,
        [
            MessageAdded(message=call_message(), turn_id=tid),
            ToolCallStarted(call_id="call_1", message_id="msg_calls", name="shell", input={}),
        ],
        token,
    )
    [turn] = await rt.resume(sid)
    assert turn.turn_id == tid and turn.outcome == "completed" and turn.final_text == "job done"
    assert not (tmp_path / "ran.txt").exists()
    results = [r for m in rt.store.messages(sid) for r in m.tool_results()]
    assert [(r.output, r.is_error) for r in results] == [(PARTIAL_RESULT, True)]
    assert [c.status for c in rt.store.tool_calls(sid)] == ["failed"]
    texts = [m.text() for m in rt.store.messages(sid)]
    assert CONTINUATION in texts  # the durable continuation instruction
    assert rt.store.current_claim(sid) is None
    check_session(rt.store, sid)
    await rt.aclose()


async def test_calls_that_never_started_are_answered_as_not_run(db_url: str, tmp_path: Path):
    rt, sid = setup(db_url, tmp_path)
    tid, token = crashed_turn(rt, sid)
    rt.store.append(sid, [MessageAdded(message=call_message(), turn_id=tid)], token)
    [turn] = await rt.resume(sid)
    assert turn.outcome == "completed"
    results = [r for m in rt.store.messages(sid) for r in m.tool_results()]
    assert [r.output for r in results] == [NOT_RUN_RESULT]
    assert rt.store.tool_calls(sid) == [] and not (tmp_path / "ran.txt").exists()
    check_session(rt.store, sid)
    await rt.aclose()


async def test_a_turn_whose_final_reply_is_durable_just_completes(db_url: str, tmp_path: Path):
    rt, sid = setup(db_url, tmp_path)
    tid, token = crashed_turn(rt, sid)
    final = Message(role="assistant", blocks=(TextBlock(text="already answered"),))
    rt.store.append(sid, [MessageAdded(message=final, turn_id=tid)], token)
    [turn] = await rt.resume(sid)
    assert (turn.outcome, turn.final_text, turn.steps) == ("completed", "already answered", 0)
    assert rt.store.receipts(sid) == []  # no provider request
    check_session(rt.store, sid)
    await rt.aclose()


async def test_recovery_attempts_are_durable_and_bounded(db_url: str, tmp_path: Path):
    rt, sid = setup(db_url, tmp_path)
    rt.send("after", session_id=sid, delivery="queue", resume=False)
    tid, token = crashed_turn(rt, sid)
    origin = TextOrigin(kind="event", source="wakeful")
    notes = [
        Message(
            role="user",
            blocks=(TextBlock(text=CONTINUATION, origin=origin),),
            metadata={"recovery_of": tid, "attempt": n},
        )
        for n in (1, 2, 3)
    ]
    rt.store.append(sid, [MessageAdded(message=m, turn_id=tid) for m in notes], token)
    failed, after = await rt.resume(sid)
    assert failed.outcome == "failed" and failed.error_kind == "recovery_exhausted"
    assert after.outcome == "completed" and after.final_text == "plain answer"
    check_session(rt.store, sid)
    await rt.aclose()


async def test_a_live_claim_elsewhere_is_left_alone_until_its_lease_expires(
    db_url: str, tmp_path: Path
):
    rt, sid = setup(db_url, tmp_path)
    crashed_turn(rt, sid, owner="another-host/1/1")
    assert await rt.resume(sid) == []  # busy: a live driver on another host
    await asyncio.sleep(CONFIG.execution.lease_ms / 1000 + 0.1)
    [turn] = await rt.resume(sid)
    assert turn.outcome == "completed"
    check_session(rt.store, sid)
    await rt.aclose()


async def test_an_orphaned_foreground_child_is_failed_not_resumed(db_url: str, tmp_path: Path):
    rt, parent = setup(db_url, tmp_path)
    child = "ses_child_orphan"
    created = SessionCreated(
        parent_id=parent, agent="build", model=rt.model, metadata={"delegation": "foreground"}
    )
    rt.store.admit(child, None, "user", {"text": "job child"}, create=created)
    crashed_turn(rt, child)
    [turn] = await rt.resume(child)
    assert turn.outcome == "failed" and turn.error_kind == "orphaned_child"
    assert rt.store.receipts(child) == []
    check_session(rt.store, child)
    await rt.aclose()
