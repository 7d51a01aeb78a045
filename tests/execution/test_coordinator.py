"""The coordinator in one process: joining, coalescing, interrupts and the turn handoff race.

"Another process" is played by a second `Runtime` on the same database: it shares nothing in
memory with the first, so whatever reaches the first one went through the store.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.allow import ALLOW_WRITES
from tests.pg import fresh_database
from wakeful.config import Config, ExecutionConfig, RetryConfig
from wakeful.execution import Runtime, SessionNotFoundError, _coordinator
from wakeful.runner import LiveEvent
from wakeful.store._feed import Feed

from .helpers import check_session, write_script

FAST = Config(
    permissions=ALLOW_WRITES,
    retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    execution=ExecutionConfig(poll_interval_ms=10, lease_ms=2_000),
)


def runtime(db: str, tmp_path: Path, model: str, **kw: object) -> Runtime:
    return Runtime(db, model=model, workspace=tmp_path, config=FAST, **kw)


def script(tmp_path: Path, *, delay_ms: int = 0) -> str:
    return write_script(
        tmp_path / "script.json",
        [
            {"match": "slow", "replies": [{"text": "s l o w " * 40}]},
            {"match": ".", "replies": [{"text": "quick answer"}]},
        ],
        chunk_delay_ms=delay_ms,
        chunk_chars=4,
    )


def on(
    kind: str, action: Callable[[LiveEvent], None], times: int = 1
) -> Callable[[LiveEvent], None]:
    """A live listener that runs `action` on the first `times` events of `kind`."""
    left = [times]

    def listener(ev: LiveEvent) -> None:
        if ev.kind == kind and left[0] > 0:
            left[0] -= 1
            action(ev)

    return listener


async def test_interrupt_between_turns_arms_the_next_turn(db_url: str, tmp_path: Path):
    """The handoff race, deterministically: the interrupt lands after turn 1 ended and before
    turn 2 started; turn 2 ends `interrupted` at once, with no receipt (no provider request)."""
    rt = runtime(db_url, tmp_path, script(tmp_path))
    rt.listener = on("turn_end", lambda ev: rt.interrupt(ev.session_id))
    sid = rt.send("first", resume=False).session_id
    rt.send("second", session_id=sid, delivery="queue", resume=False)
    first, second = await rt.resume(sid)
    assert (first.outcome, second.outcome) == ("completed", "interrupted")
    assert second.steps == 0
    assert {r.turn_id for r in rt.store.receipts(sid)} == {first.turn_id}
    assert rt.store.pending(sid) == []  # the second input was delivered, not dropped
    [third] = await rt.run("third", session_id=sid)  # the interrupt was consumed by one turn
    assert third.outcome == "completed"
    check_session(rt.store, sid)
    await rt.aclose()


async def test_interrupt_after_the_last_turn_is_a_no_op(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path, script(tmp_path))
    rt.listener = on("turn_end", lambda ev: rt.interrupt(ev.session_id))
    [turn] = await rt.run("only")
    assert turn.outcome == "completed"
    [later] = await rt.run("later", session_id=rt.store.list_sessions().sessions[0].id)
    assert later.outcome == "completed"
    await rt.aclose()


async def test_interrupt_from_another_process_reaches_the_driver(db_url: str, tmp_path: Path):
    model = script(tmp_path, delay_ms=5)
    driver = runtime(db_url, tmp_path, model)
    other = runtime(db_url, tmp_path, model)
    sid = driver.send("slow please", resume=False).session_id

    def remote(_ev: LiveEvent) -> None:
        assert other.interrupt(sid) is False  # not driven there: only the durable request

    driver.listener = on("text", remote)
    [turn] = await driver.resume(sid)
    assert turn.outcome == "interrupted"
    assert driver.store.current_claim(sid) is None  # a user interruption releases
    check_session(driver.store, sid)
    await driver.aclose()
    await other.aclose()


@pytest.mark.postgres
async def test_an_interrupt_from_another_process_is_heard_without_polling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """On PostgreSQL the watcher hears a request announced by the process that wrote it
    (LISTEN): over a drive polled every 10 ms it reads the store once, a poll interval after
    it began to listen (it read it every poll interval before, ~30 times here), and the
    request stops the turn although the safety poll would come only after a minute."""
    monkeypatch.setattr(_coordinator, "SAFETY_POLL_S", 60.0)
    reads: list[int] = []
    read = Feed.interrupts_after

    def counted(self: Feed, after_id: int) -> tuple[int, list[tuple[int, str]]]:
        reads.append(after_id)
        return read(self, after_id)

    monkeypatch.setattr(Feed, "interrupts_after", counted)
    with fresh_database() as url:
        model = script(tmp_path, delay_ms=5)
        driver = runtime(url, tmp_path, model)
        other = runtime(url, tmp_path, model)
        sid = driver.send("slow please", resume=False).session_id
        chunks: list[LiveEvent] = []
        asked: list[float] = []

        def remote(ev: LiveEvent) -> None:
            chunks.append(ev)
            if len(chunks) == 60:  # (~0.3 s into the turn)
                asked.append(time.monotonic())
                assert other.interrupt(sid) is False  # not driven there: announced

        driver.listener = on("text", remote, times=60)
        [turn] = await driver.resume(sid)
        stopped = time.monotonic() - asked[0]
        assert turn.outcome == "interrupted"
        assert len(reads) == 1, reads  # the read owed as listening began, no poll
        assert stopped < 30, stopped  # heard, not polled (the safety poll: a minute)
        check_session(driver.store, sid)
        await driver.aclose()
        await other.aclose()


async def test_a_local_interrupt_is_not_applied_twice_by_the_store_watcher(
    db_url: str, tmp_path: Path
):
    rt = runtime(db_url, tmp_path, script(tmp_path, delay_ms=5))
    sid = rt.send("slow one", resume=False).session_id

    def interrupt_and_follow_up(ev: LiveEvent) -> None:
        rt.interrupt(sid)
        rt.send("slow two", session_id=sid)  # wakes: coalesces into a follow-up drain

    rt.listener = on("text", interrupt_and_follow_up)
    first, second = await rt.resume(sid)
    assert (first.outcome, second.outcome) == ("interrupted", "completed")
    await rt.aclose()


async def test_unknown_and_idle_sessions(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path, script(tmp_path))
    with pytest.raises(SessionNotFoundError):
        rt.interrupt("ses_nope")
    assert rt.coordinator.interrupt("ses_nope") is False  # no store call: safe on the loop
    sid = rt.send("hello", resume=False).session_id
    assert rt.coordinator.interrupt(sid) is False and rt.coordinator.active() == []
    assert [p.input_id for p in rt.store.pending(sid)]  # an interrupt deletes no pending input
    before = rt.store.high_water(sid)
    assert rt.busy(sid) is False and rt.interrupt(sid) is False
    assert rt.store.high_water(sid) == before  # idle: nothing written, nothing armed
    await rt.aclose()


async def test_resumes_join_and_wakes_coalesce(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path, script(tmp_path, delay_ms=2))
    sid = rt.send("slow start", resume=False).session_id
    streaming = asyncio.Event()
    rt.listener = on("text", lambda _ev: streaming.set())
    first = rt.coordinator.wake(sid)
    assert rt.coordinator.active() == [sid]
    await streaming.wait()  # the turn runs (wakes before the drain began join that drain itself)
    assert rt.coordinator.wake(sid) is first  # joined
    for n in range(5):
        rt.send(f"more {n}", session_id=sid)  # five wakes during the drain
    results = await rt.coordinator.resume(sid)
    assert len(results) == 2  # the drain plus one coalesced follow-up
    assert [len(r.turns) for r in results] == [1, 0]  # the steers joined the running turn
    assert rt.store.pending(sid) == [] and rt.coordinator.active() == []
    await rt.aclose()


async def test_sessions_run_concurrently(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path, script(tmp_path, delay_ms=2))
    sids = [rt.send(f"slow {n}", resume=False).session_id for n in range(3)]
    tasks = [rt.coordinator.wake(s) for s in sids]
    await asyncio.sleep(0.05)
    assert rt.coordinator.active() == sorted(sids)
    await asyncio.gather(*tasks)
    await rt.aclose()


async def test_cancelling_a_waiter_does_not_cancel_the_drain(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path, script(tmp_path, delay_ms=2))
    sid = rt.send("slow", resume=False).session_id
    waiter = asyncio.ensure_future(rt.resume(sid))
    await asyncio.sleep(0.05)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    await rt.coordinator.wait_idle()
    [turn] = rt.store.turns(sid)
    assert turn.status == "completed" and rt.store.current_claim(sid) is None
    await rt.aclose()


async def test_input_admitted_while_the_claim_is_released_is_driven(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Another process admits just as this drain makes its last look at the inbox (the unit
    that releases its claim when nothing is deliverable, `promote_or_release`; a look and a
    release of their own before): its wake would find the claim held, so this drain must
    pick the input up rather than release."""
    from wakeful.execution import _drain

    model = script(tmp_path)
    rt = runtime(db_url, tmp_path, model)
    other = runtime(db_url, tmp_path, model)
    sid = rt.send("first", resume=False).session_id
    last_look = _drain.promote_or_release
    late: list[object] = []

    def look_after_a_late_admission(*args: Any, **kwargs: Any) -> Any:
        if not late:
            late.append(other.send("late", session_id=sid, resume=False))
            assert other.store.current_claim(sid) is not None  # a wake there would be busy
        return last_look(*args, **kwargs)

    monkeypatch.setattr(_drain, "promote_or_release", look_after_a_late_admission)
    turns = await rt.resume(sid)
    assert [t.outcome for t in turns] == ["completed", "completed"]
    assert rt.store.pending(sid) == []
    check_session(rt.store, sid)
    await rt.aclose()
    await other.aclose()


async def test_a_drain_with_nothing_to_do_writes_nothing(db_url: str, tmp_path: Path):
    """An idle session's drain (no pending input, no open turn, no live claim) leaves the
    store as it was: no event, no claim row, no change to the session row."""
    rt = runtime(db_url, tmp_path, script(tmp_path))
    sid = rt.send("first", resume=False).session_id
    [first] = await rt.coordinator.resume(sid)
    assert [t.outcome for t in first.turns] == ["completed"]

    def state() -> tuple[object, ...]:
        with rt.store.backend.transaction(write=False) as tx:
            claims = tx.all("SELECT * FROM claims ORDER BY session_id")
        return rt.store.feed.last_event_id(), rt.store.get_session(sid), claims

    before = state()
    [idle] = await rt.coordinator.resume(sid)
    assert idle.turns == [] and not idle.busy
    assert state() == before
    await rt.aclose()
