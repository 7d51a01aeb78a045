"""`off_loop`: the one policy for blocking store I/O — run it in a worker thread, never on the
event loop — and the lean thread pool it runs on; `wait_off_loop` for a call that blocks for long
on purpose. Both are typed with a `ParamSpec` (mypy checks each call's arguments) and are the
only way the server, execution and the CLI leave the loop (issue 35 item 4; a test runs a turn,
a worker and the server in asyncio's debug mode and fails on a store call made on the loop,
`tests/execution/test_no_store_on_loop.py`).

A turn makes three or four store calls per step (docs/port.md), so the cost of one hop to a
thread and back is part of every step. `asyncio.to_thread` pays for a general executor on each
call: `ThreadPoolExecutor.submit` takes two locks and builds a `concurrent.futures.Future`,
which asyncio then chains to a future of the loop's. `StoreThreads` hands the call straight to
a waiting thread through a `SimpleQueue` and the thread resolves the loop's future itself: the
same semantics (the context is copied, an exception is raised in the caller, a cancelled caller
does not stop a call that has started) for about half the CPU per hop
(`bench/bench_runner.py`).

Threads start on demand up to the default executor's bound, `min(32, cpus + 4)`, so as many
sessions' round trips overlap as before; they are daemons, and the pool drains its queue and
joins them at interpreter exit (`atexit`), so a store call that was started is finished before
the process ends, as the default executor's are. Calls that block for long on purpose (a
worker's wait for work, closing tool processes) go through `wait_off_loop`, on the default
executor: they would hold a slot here.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import os
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_Call = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[], Any]
]


def _resolve(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """Set the loop's future (on its loop), unless its waiter was cancelled meanwhile."""
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class StoreThreads:
    """A pool of threads for blocking store calls (see the module docstring)."""

    def __init__(self, max_threads: int | None = None) -> None:
        self.max_threads = max_threads or min(32, (os.cpu_count() or 1) + 4)
        self._calls: SimpleQueue[_Call | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for a call
        self._closed = False

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run `fn(*args, **kwargs)` in a pool thread, in a copy of the caller's context, and
        return its result (or raise its exception) to the awaiting coroutine."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()
        self._submit((loop, future, context, lambda: fn(*args, **kwargs)))
        return await future

    def _submit(self, call: _Call) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the store's threads are closed (the interpreter is exiting)")
            if self._idle > 0:
                self._idle -= 1  # this call is that thread's
            elif len(self._threads) < self.max_threads:
                thread = threading.Thread(
                    target=self._serve, name=f"wakeful-store-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            self._calls.put(call)

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            loop, future, context, fn = call
            try:
                value, ok = context.run(fn), True
            except BaseException as err:  # the caller's to handle, as with to_thread
                value, ok = err, False
            with self._lock:  # before the caller can resume and submit again
                self._idle += 1
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits it now
                loop.call_soon_threadsafe(_resolve, future, ok, value)
            del call, fn, value

    def _forked(self) -> None:
        """In a forked child: the parent's threads do not exist here; start over."""
        self._calls = SimpleQueue()
        self._lock = threading.Lock()
        self._threads = []
        self._idle = 0

    def close(self) -> None:
        """Finish the queued calls, then stop and join the threads (at interpreter exit)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._calls.put(None)
        for thread in threads:
            thread.join()


_THREADS = StoreThreads()
atexit.register(_THREADS.close)
os.register_at_fork(after_in_child=_THREADS._forked)


async def off_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking store call in a worker thread (`StoreThreads`): the one policy for store
    I/O, so one session's fsync or round trip never stalls the event loop."""
    return await _THREADS.run(fn, *args, **kwargs)


async def wait_off_loop(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a call that blocks for long on purpose (a worker's wait for work, closing tool
    processes) in a thread of the loop's default executor, in a copy of the caller's context,
    so it holds no thread of the store's pool (`asyncio.to_thread`'s semantics)."""
    return await asyncio.to_thread(fn, *args, **kwargs)
