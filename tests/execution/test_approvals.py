"""Approvals that survive a restart, in one process per step: a call whose permission is `ask`
pauses the turn durably when nobody can answer; a decision admitted later (by another
`Runtime`, as another process would) runs the call exactly once or denies it, and the turn
goes on. Each `Runtime` here is closed before the next opens, like processes that exit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wakeful.config import Config, ExecutionConfig, RetryConfig
from wakeful.errors import ConflictError, NotFoundError, UsageError
from wakeful.events import ApprovalDecided, ApprovalRequested
from wakeful.execution import Runtime
from wakeful.execution._owner import host_id
from wakeful.execution._writes import start_drain

from .helpers import check_session, ledger_lines, shell, write_script

CONFIG = Config(
    retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    execution=ExecutionConfig(poll_interval_ms=10, lease_ms=300),
)
DEAD = f"{host_id()}/{os.getpid()}/not-this-start"  # a dead driver: its claim is taken over
GO = "echo one >> ledger.txt"


def model(tmp_path: Path) -> str:
    return write_script(
        tmp_path / "script.json",
        [
            {"match": "^go$", "replies": [{"tool_calls": [shell(GO)]}, {"text": "done"}]},
            {
                "match": "^two$",
                "replies": [
                    {"tool_calls": [shell("echo a >> ledger.txt"), shell("echo b >> ledger.txt")]},
                    {"text": "both"},
                ],
            },
            {
                "match": "^again$",
                "replies": [
                    {"tool_calls": [shell("echo again >> ledger.txt")]},
                    {"text": "again done"},
                ],
            },
            {"match": ".", "replies": [{"text": "plain"}]},
        ],
    )


def runtime(db: str, tmp_path: Path, config: Config = CONFIG) -> Runtime:
    return Runtime(db, model=model(tmp_path), workspace=tmp_path, config=config)


async def paused(
    db: str, tmp_path: Path, prompt: str = "go"
) -> tuple[str, list[ApprovalRequested]]:
    """Run `prompt` with nobody to ask; return the session and what it waits on."""
    rt = runtime(db, tmp_path)
    [turn] = await rt.run(prompt)
    sid = rt.store.list_sessions().sessions[0].id
    assert (turn.outcome, turn.error_kind) == ("paused", "awaiting_approval")
    assert rt.store.get_session(sid).status == "awaiting_approval"
    waiting = rt.approvals(sid)
    await rt.aclose()
    return sid, waiting


async def decide(
    db: str, tmp_path: Path, sid: str, call_id: str, decision: str = "allow"
) -> list[object]:
    rt = runtime(db, tmp_path)
    sent = rt.approve(sid, call_id, decision, resume=False)
    turns = await rt.drive_input(sid, sent.input_id)
    await rt.aclose()
    return turns  # type: ignore[return-value]


async def test_a_paused_call_runs_exactly_once_after_a_later_approval(db_url: str, tmp_path: Path):
    sid, [request] = await paused(db_url, tmp_path)
    assert request.name == "shell" and request.preview == f"$ {GO}"
    assert not (tmp_path / "ledger.txt").exists()  # nothing ran while waiting
    [turn] = await decide(db_url, tmp_path, sid, request.call_id)
    assert turn.outcome == "completed" and turn.final_text == "done"  # type: ignore[attr-defined]
    assert ledger_lines(tmp_path) == {"one": 1}
    rt = runtime(db_url, tmp_path)
    assert rt.store.get_session(sid).status == "idle" and rt.approvals(sid) == []
    with pytest.raises(NotFoundError):  # decided and run: nothing waits any more
        rt.approve(sid, request.call_id)
    assert [await rt.resume(sid)] == [[]]  # another drive runs nothing again
    check_session(rt.store, sid, ledger_lines(tmp_path))
    await rt.aclose()
    assert ledger_lines(tmp_path) == {"one": 1}


async def test_a_deny_answers_the_model_with_an_error_and_the_turn_goes_on(
    db_url: str, tmp_path: Path
):
    sid, [request] = await paused(db_url, tmp_path)
    [turn] = await decide(db_url, tmp_path, sid, request.call_id, "deny")
    assert turn.outcome == "completed" and turn.final_text == "done"  # type: ignore[attr-defined]
    assert not (tmp_path / "ledger.txt").exists()
    rt = runtime(db_url, tmp_path)
    results = [r for m in rt.store.messages(sid) for r in m.tool_results()]
    assert [(r.is_error, r.output) for r in results] == [
        (True, "permission denied: the user declined shell")
    ]
    check_session(rt.store, sid)
    await rt.aclose()


async def test_every_call_of_a_step_waits_until_each_is_decided(db_url: str, tmp_path: Path):
    sid, requests = await paused(db_url, tmp_path, "two")
    assert [r.preview for r in requests] == ["$ echo a >> ledger.txt", "$ echo b >> ledger.txt"]
    [turn] = await decide(db_url, tmp_path, sid, requests[1].call_id, "deny")
    assert turn.outcome == "paused" and turn.steps == 0  # type: ignore[attr-defined]
    rt = runtime(db_url, tmp_path)
    assert [r.call_id for r in rt.approvals(sid)] == [requests[0].call_id]
    assert rt.store.get_session(sid).status == "awaiting_approval"
    await rt.aclose()
    [turn] = await decide(db_url, tmp_path, sid, requests[0].call_id[:9])  # a prefix will do
    assert turn.final_text == "both"  # type: ignore[attr-defined]
    assert ledger_lines(tmp_path) == {"a": 1}


async def test_always_allows_the_tool_for_the_rest_of_the_session(db_url: str, tmp_path: Path):
    sid, [request] = await paused(db_url, tmp_path)
    await decide(db_url, tmp_path, sid, request.call_id, "always")
    rt = runtime(db_url, tmp_path)
    [turn] = await rt.run("again", session_id=sid)
    assert turn.outcome == "completed" and turn.final_text == "again done"
    assert ledger_lines(tmp_path) == {"one": 1, "again": 1}
    decided = [e.event for e in rt.store.events(sid, types=["approval.decided"])]
    assert [(d.decision, d.input_id) for d in decided if isinstance(d, ApprovalDecided)] == [
        ("always", f"approval_{request.call_id}")
    ]
    await rt.aclose()


async def test_new_input_waits_in_the_inbox_until_the_decision(db_url: str, tmp_path: Path):
    sid, [request] = await paused(db_url, tmp_path)
    rt = runtime(db_url, tmp_path)
    sent = rt.send("hello there", session_id=sid, resume=False)
    assert await rt.resume(sid) == []  # only a decision is delivered now
    assert [i.input_id for i in rt.store.pending(sid)] == [sent.input_id]
    await rt.aclose()
    [turn] = await decide(db_url, tmp_path, sid, request.call_id)
    assert turn.final_text == "plain"  # type: ignore[attr-defined]  # the steer joined the turn
    rt = runtime(db_url, tmp_path)
    texts = [m.text() for m in rt.store.messages(sid) if m.text()]
    assert texts == ["go", "done", "hello there", "plain"]  # after the step it waited for
    check_session(rt.store, sid, ledger_lines(tmp_path))
    await rt.aclose()


async def test_bad_decisions_are_typed_errors_and_write_nothing(db_url: str, tmp_path: Path):
    sid, [request] = await paused(db_url, tmp_path)
    rt = runtime(db_url, tmp_path)
    before = rt.store.get_session(sid).last_seq
    with pytest.raises(UsageError):
        rt.approve(sid, request.call_id, "maybe")
    with pytest.raises(NotFoundError):
        rt.approve(sid, "call_nope")
    with pytest.raises(NotFoundError):
        rt.approvals("ses_missing")
    assert rt.store.get_session(sid).last_seq == before
    first = rt.approve(sid, request.call_id, "deny", resume=False)
    again = rt.approve(sid, request.call_id, "deny", resume=False)  # the same: a no-op
    assert again.input_id == first.input_id and not again.created
    with pytest.raises(ConflictError):  # the call was decided otherwise
        rt.approve(sid, request.call_id, "allow", resume=False)
    await rt.aclose()


async def test_a_crash_after_the_decision_is_delivered_still_runs_the_call_once(
    db_url: str, tmp_path: Path
):
    """The delivery of the decision started the turn; the driver died before the call ran.
    The next driver takes the claim over and runs the call once, from the durable decision."""
    sid, [request] = await paused(db_url, tmp_path)
    rt = runtime(db_url, tmp_path)
    rt.approve(sid, request.call_id, resume=False)
    start = start_drain(rt.store, sid, DEAD, 300, start_turn="turn_d")
    assert start.claim is not None and len(start.delivered) == 1  # delivered, turn started
    assert rt.store.get_session(sid).status == "interrupted"  # running, but its owner is dead
    turns = await rt.resume(sid)
    assert [t.final_text for t in turns] == ["done"]
    assert ledger_lines(tmp_path) == {"one": 1}
    check_session(rt.store, sid, ledger_lines(tmp_path))
    await rt.aclose()


async def test_a_worker_pauses_a_session_and_runs_a_decision_admitted_later(
    db_url: str, tmp_path: Path
):
    """Nobody answers in a worker: the turn pauses and the worker moves on; a decision only
    recorded elsewhere (`--no-wake`) is picked up by the next worker pass."""
    from wakeful.execution import run_worker

    rt = runtime(db_url, tmp_path)
    sid = rt.send("go", resume=False).session_id
    await run_worker(rt, once=True)
    assert rt.store.get_session(sid).status == "awaiting_approval"
    [request] = rt.approvals(sid)
    rt.approve(sid, request.call_id, resume=False)  # recorded only: nothing drives it here
    assert ledger_lines(tmp_path) == {}
    await run_worker(rt, once=True)
    assert ledger_lines(tmp_path) == {"one": 1}
    assert rt.store.get_session(sid).status == "idle"
    await rt.aclose()


async def test_an_interrupt_while_asking_leaves_the_call_waiting_for_a_later_decision(
    db_url: str, tmp_path: Path
):
    """Someone is asked on a terminal and never answers; an interrupt ends the question (the
    person left it: issue 38 item 5), no call runs or gets a result, the turn pauses with the
    call waiting, and a decision admitted later runs it exactly once."""
    import asyncio

    from wakeful.execution import run_worker

    asked = asyncio.Event()

    async def never(name: str, args: dict[str, object]) -> bool:
        asked.set()
        await asyncio.Event().wait()
        return True

    rt = Runtime(db_url, model=model(tmp_path), workspace=tmp_path, config=CONFIG, ask=never)
    sid = rt.send("go", resume=False).session_id
    driving = asyncio.ensure_future(rt.resume(sid))
    await asyncio.wait_for(asked.wait(), 10)
    rt.interrupt(sid)
    [turn] = await asyncio.wait_for(driving, 10)
    assert (turn.outcome, turn.error_kind) == ("paused", "awaiting_approval")
    assert rt.store.tool_calls(sid) == []  # nothing started
    assert [r for m in rt.store.messages(sid) for r in m.tool_results()] == []
    [request] = rt.approvals(sid)
    assert rt.store.get_session(sid).status == "awaiting_approval"
    await rt.aclose()
    later = runtime(db_url, tmp_path)
    later.approve(sid, request.call_id, resume=False)
    await run_worker(later, once=True)
    assert ledger_lines(tmp_path) == {"one": 1}
    assert later.store.get_session(sid).status == "idle"
    check_session(later.store, sid)
    await later.aclose()


async def test_an_answer_on_the_terminal_runs_the_call_once_after_its_request(
    db_url: str, tmp_path: Path
):
    """With someone to ask, the call waits durably first (its `approval.requested`), then the
    answer commits with its `tool.started`, and the call runs once."""

    async def yes(name: str, args: dict[str, object]) -> bool:
        return True

    rt = Runtime(db_url, model=model(tmp_path), workspace=tmp_path, config=CONFIG, ask=yes)
    [turn] = await rt.run("go")
    sid = rt.store.list_sessions().sessions[0].id
    assert turn.outcome == "completed" and ledger_lines(tmp_path) == {"one": 1}
    types = [e.type for e in rt.store.events(sid)]
    asked = types.index("approval.requested")
    assert asked < types.index("approval.decided") < types.index("tool.started")
    assert rt.approvals(sid) == []
    check_session(rt.store, sid)
    await rt.aclose()
