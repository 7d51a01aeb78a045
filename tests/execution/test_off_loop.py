"""`off_loop`'s thread pool (`StoreThreads`): what `asyncio.to_thread` promised, for less."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from wakeful.execution._off_loop import StoreThreads, off_loop

WHO = contextvars.ContextVar("WHO", default="nobody")


async def test_a_call_runs_in_another_thread_with_the_callers_context():
    WHO.set("the turn")
    loop_thread = threading.get_ident()
    thread, who = await off_loop(lambda: (threading.get_ident(), WHO.get()))
    assert thread != loop_thread and who == "the turn"


async def test_an_exception_is_raised_in_the_caller():
    def fails() -> None:
        raise KeyError("gone")

    with pytest.raises(KeyError, match="gone"):
        await off_loop(fails)


async def test_calls_one_after_another_reuse_one_thread():
    pool = StoreThreads(max_threads=4)
    threads = {await pool.run(threading.get_ident) for _ in range(50)}
    assert len(threads) == 1
    pool.close()


async def test_overlapping_calls_run_side_by_side_up_to_the_bound():
    pool = StoreThreads(max_threads=3)
    barrier = threading.Barrier(3, timeout=5)  # fails unless three calls run at once
    await asyncio.gather(*(pool.run(barrier.wait) for _ in range(3)))
    release = threading.Event()
    running = [pool.run(release.wait, 5) for _ in range(5)]
    tasks = [asyncio.ensure_future(c) for c in running]
    await asyncio.sleep(0.05)
    assert len(pool._threads) == 3  # the other two wait for a thread
    release.set()
    assert await asyncio.gather(*tasks) == [True] * 5
    pool.close()


async def test_a_cancelled_caller_does_not_stop_a_started_call():
    pool = StoreThreads(max_threads=1)
    started, finish, done = threading.Event(), threading.Event(), threading.Event()

    def call() -> None:
        started.set()
        finish.wait(5)
        done.set()

    task = asyncio.ensure_future(pool.run(call))
    await asyncio.to_thread(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    finish.set()
    assert await asyncio.to_thread(done.wait, 5)
    assert await pool.run(lambda: "still serving") == "still serving"
    pool.close()


def test_closing_finishes_the_queued_calls_first():
    pool = StoreThreads(max_threads=1)
    finished: list[int] = []
    gate = threading.Event()

    async def submit() -> None:
        loop_done = [asyncio.ensure_future(pool.run(gate.wait, 5))]
        loop_done += [asyncio.ensure_future(pool.run(finished.append, i)) for i in range(3)]
        await asyncio.sleep(0.01)

    asyncio.run(submit())  # the loop is gone: the results have nobody to go to
    gate.set()
    pool.close()
    assert finished == [0, 1, 2]
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(pool.run(int))
