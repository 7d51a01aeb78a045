"""`run_worker` in one process: draining everything, surviving a store fault, stopping cleanly."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.allow import ALLOW_WRITES
from wakeful.config import Config, ExecutionConfig, RetryConfig
from wakeful.errors import StoreBusyError, StoreError
from wakeful.execution import Runtime, _drain, _worker, run_worker
from wakeful.execution._worker import candidates

from .helpers import check_session, write_script

CONFIG = Config(
    permissions=ALLOW_WRITES,
    retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    execution=ExecutionConfig(poll_interval_ms=10, lease_ms=300),
)


def runtime(db: str, tmp_path: Path, *, delay_ms: int = 0) -> Runtime:
    model = write_script(
        tmp_path / "script.json",
        [
            {"match": "slow", "replies": [{"text": "s l o w " * 50}]},
            {
                "match": ".",
                "replies": [
                    {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]},
                    {"text": "done"},
                ],
            },
        ],
        chunk_delay_ms=delay_ms,
        chunk_chars=4,
    )
    return Runtime(db, model=model, workspace=tmp_path, config=CONFIG)


async def test_once_drives_every_session_with_work(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path)
    sids = [rt.send(f"task {n}", resume=False).session_id for n in range(12)]
    rt.send("more", session_id=sids[0], delivery="queue", resume=False)
    stats = await run_worker(rt, once=True, concurrency=4)
    assert stats.turns == 13 and stats.lost == 0
    for sid in sids:
        check_session(rt.store, sid)
        assert rt.store.current_claim(sid) is None
    assert candidates(rt.store) == []
    await rt.aclose()


async def test_a_live_claim_is_not_a_candidate(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path)
    sid = rt.send("task", resume=False).session_id
    assert candidates(rt.store) == [sid]
    rt.store.claims.acquire(sid, "another-host/1/1", lease_ms=60_000)
    assert candidates(rt.store) == []  # its live driver delivers the input itself
    await rt.aclose()


def failing_start(mp: pytest.MonkeyPatch, *errors: Exception) -> None:
    """Make the drains' next first deliveries raise `errors`, one each (a worker's drain
    delivers under its reservation with `promote_or_release`; another's starts with
    `start_drain`)."""
    pending = list(errors)
    for name in ("start_drain", "promote_or_release"):
        real = getattr(_drain, name)

        def flaky(*args: object, _real: Any = real, **kw: object) -> object:
            if pending:
                raise pending.pop(0)
            return _real(*args, **kw)

        mp.setattr(_drain, name, flaky)


async def test_a_busy_store_is_waited_out_and_logged_once(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    rt = runtime(db_url, tmp_path)
    sid = rt.send("task", resume=False).session_id
    failing_start(monkeypatch, *[StoreBusyError("database is busy")] * 3)
    with caplog.at_level(logging.WARNING, logger="wakeful.worker"):
        stats = await run_worker(rt, once=True)
    assert stats.turns == 1 and stats.failed == set()  # retried after the backoff, same run
    assert caplog.text.count("store fault in drains, waiting it out") == 1
    assert caplog.text.count("store works again in drains") == 1
    check_session(rt.store, sid)
    await rt.aclose()


async def test_a_failed_drain_is_logged_and_the_session_retried_later(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    rt = runtime(db_url, tmp_path)
    sid = rt.send("task", resume=False).session_id
    failing_start(monkeypatch, StoreError("something else broke"))
    with caplog.at_level(logging.WARNING, logger="wakeful.worker"):
        stats = await run_worker(rt, once=True)
    assert "drain failed: StoreError: something else broke" in caplog.text
    assert stats.turns == 0 and stats.failed == {sid}  # `worker --once` exits 1 on this
    # The claim, the delivery and the turn start are one transaction: none of them happened.
    assert rt.store.current_claim(sid) is None and len(rt.store.pending(sid)) == 1
    await asyncio.sleep(CONFIG.execution.lease_ms / 1000 + 0.1)
    stats = await run_worker(rt, once=True)
    assert stats.turns == 1 and stats.failed == set()
    check_session(rt.store, sid)
    await rt.aclose()


async def test_stop_is_a_shutdown_that_keeps_claim_and_turn(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path, delay_ms=5)
    sid = rt.send("slow one", resume=False).session_id
    rt.send("queued after", session_id=sid, delivery="queue", resume=False)
    stop = asyncio.Event()

    def listener(ev: object) -> None:
        if getattr(ev, "kind", None) == "text":
            stop.set()

    rt.listener = listener
    await run_worker(rt, stop=stop)
    [turn] = rt.store.turns(sid)
    assert turn.status == "running" and rt.store.current_claim(sid) is not None
    assert len(rt.store.pending(sid)) == 1  # nothing more was promoted
    await rt.aclose()
    successor = runtime(db_url, tmp_path)
    await asyncio.sleep(CONFIG.execution.lease_ms / 1000 + 0.1)
    stats = await run_worker(successor, once=True)
    assert stats.turns == 2
    check_session(successor.store, sid)
    assert [t.status for t in successor.store.turns(sid)] == ["completed", "completed"]
    await successor.aclose()


async def test_by_default_sessions_waiting_on_their_model_are_driven_together(
    db_url: str, tmp_path: Path
):
    """The default concurrency fits sessions that mostly wait on a model: 24 of them, each
    waiting on every streamed chunk, are in flight at once (the old default drove 8)."""
    rt = runtime(db_url, tmp_path, delay_ms=20)
    sids = [rt.send(f"task {n}", resume=False).session_id for n in range(24)]
    most = 0

    async def watch() -> None:
        nonlocal most
        while True:
            most = max(most, len(rt.coordinator.active()))
            await asyncio.sleep(0.005)

    watcher = asyncio.ensure_future(watch())
    stats = await run_worker(rt, once=True)
    watcher.cancel()
    assert stats.turns == 24
    assert most == 24
    for sid in sids:
        check_session(rt.store, sid)
    await rt.aclose()


async def test_a_drive_ending_wakes_the_worker_through_one_future_not_one_per_drive(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Between its looks the worker waits for a stop, a change and the next drive to end:
    three futures, however many drives are in flight. It used to wait on every drive in
    flight, so each drive's end added and removed a callback on each of the others (O(in
    flight) per drive: ~1,000 per step with a fleet's 1,000 sessions)."""
    sizes: list[int] = []
    real = asyncio.wait

    async def counted(fs: Any, **kwargs: Any) -> Any:
        sizes.append(len(fs))
        return await real(fs, **kwargs)

    monkeypatch.setattr(_worker.asyncio, "wait", counted)
    rt = runtime(db_url, tmp_path, delay_ms=20)
    sids = [rt.send(f"task {n}", resume=False).session_id for n in range(24)]
    stats = await run_worker(rt, once=True)
    assert stats.turns == 24
    for sid in sids:
        check_session(rt.store, sid)
    assert sizes and max(sizes) <= 3, sizes  # (a tool step waits on its call and a waiter)
    await rt.aclose()


def counted_looks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each of the workers' looks at the store (`_worker.look`)."""
    looks: list[int] = []
    real = _worker.look

    def counted(*args: Any, **kwargs: Any) -> tuple[bool, bool]:
        looks.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_worker, "look", counted)
    return looks


def long_poll_runtime(db_url: str, tmp_path: Path) -> Runtime:
    """A runtime whose worker looks for work every 5 s only (its poll, on either backend),
    with a model that answers at once."""
    config = CONFIG.model_copy(
        update={"execution": ExecutionConfig(poll_interval_ms=5_000, lease_ms=30_000)}
    )
    model = write_script(tmp_path / "s.json", [{"match": ".", "replies": [{"text": "ok"}]}])
    rt = Runtime(db_url, model=model, workspace=tmp_path, config=config)
    if rt.store.backend.kind == "sqlite":  # its wait for work is a sleep of its own poll
        rt.store.backend.poll_s = 5.0  # type: ignore[attr-defined]
    return rt


async def test_drives_ending_are_one_look_per_batch_not_one_per_session(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A worker looks at the store again when drives end only if its last look left work
    behind for want of slots, and then once a batch of slots is free (issue 36 item 1:
    wakeups per process, not per session). With room for every session, 12 drives ending
    cost no look beyond the last one, which finds nothing (the poll is long here)."""
    looks = counted_looks(monkeypatch)
    rt = long_poll_runtime(db_url, tmp_path)
    for n in range(12):
        rt.send(f"task {n}", resume=False)
    stats = await run_worker(rt, once=True, concurrency=16)
    assert stats.turns == 12
    assert len(looks) <= 3  # the first, and the one after the last drive (one more at most)
    looks.clear()
    for n in range(12):  # two slots for 12 sessions: a look per freed batch (of 1 here)
        rt.send(f"more {n}", resume=False)
    stats = await run_worker(rt, once=True, concurrency=2)
    assert stats.turns == 12
    await rt.aclose()


async def test_a_refill_takes_the_work_left_behind_without_looking_again(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A look that left work behind for want of slots is not repeated when drives' ends free
    a batch of slots: the next takeover or reservation takes what it found (a look per
    refill before, a read and on PostgreSQL a commit each). Two slots, 24 sessions, a long
    poll: the first look, and a few where a reservation found fewer than the slots or none
    (6-9 here, where it made 19-21 before)."""
    looks = counted_looks(monkeypatch)
    rt = long_poll_runtime(db_url, tmp_path)
    sids = [rt.send(f"task {n}", resume=False).session_id for n in range(24)]
    stats = await run_worker(rt, once=True, concurrency=2)
    assert stats.turns == 24
    assert len(looks) <= 12, len(looks)
    for sid in sids:
        check_session(rt.store, sid)
    await rt.aclose()


async def test_an_idle_worker_looks_once_per_poll_interval(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """With nothing to do, a worker looks at the store once per `poll_interval_ms` (here
    200 ms), on SQLite too, where nothing announces an admission (its backend's own 50 ms poll
    made it look twenty times a second)."""
    looks = counted_looks(monkeypatch)
    config = CONFIG.model_copy(
        update={"execution": ExecutionConfig(poll_interval_ms=200, lease_ms=30_000)}
    )
    rt = Runtime(db_url, model="scripted:none", workspace=tmp_path, config=config)
    stop = asyncio.Event()
    worker = asyncio.ensure_future(run_worker(rt, stop=stop))
    await asyncio.sleep(1.0)
    stop.set()
    await worker
    assert 2 <= len(looks) <= 8  # ~5 in a second, with slack for a loaded machine
    await rt.aclose()


async def test_a_full_worker_does_not_look_until_a_drive_ends(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A worker whose every slot is driving has no room for what a look would find, so it
    waits for a drive to end, not for a change or its poll (issue 36: each look is a read
    and a commit; a fleet's workers are full all the time). Two slots, two sessions whose
    turn streams for about a second, a 10 ms poll: a look before and a few after, where
    before it looked at every poll (~100)."""
    looks = counted_looks(monkeypatch)
    rt = runtime(db_url, tmp_path, delay_ms=10)
    sids = [rt.send(f"slow {n}", resume=False).session_id for n in range(2)]
    stats = await run_worker(rt, once=True, concurrency=2)
    assert stats.turns == 2
    for sid in sids:
        check_session(rt.store, sid)
    # (at most 6 on a quiet machine; 8 in CI with 3 test processes, where the drives start
    # and end further apart: each start and end may make a look worth it)
    assert len(looks) <= 12, len(looks)
    await rt.aclose()
