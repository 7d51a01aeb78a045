"""Streaming one model request to its finish, stopped by an interrupt: the one place a turn
and its compaction read a provider's stream.

Deltas go to the caller's `on_delta` (the turn publishes them live and keeps streamed text for
a cut reply); only the `Finish` is returned. An interrupt cancels the stream and returns None
(`until_interrupted`, which a step's single tool call runs under too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TypeVar

from ..errors import IncompleteStreamError
from ..providers import Finish, ModelRequest, Provider, StreamEvent
from ._interrupt import on_interrupt

T = TypeVar("T")


async def stream_to_finish(
    provider: Provider,
    request: ModelRequest,
    interrupt: asyncio.Event,
    on_delta: Callable[[StreamEvent], None] | None = None,
) -> Finish | None:
    """The request's `Finish` (`IncompleteStreamError` when the stream ends without one);
    None when `interrupt` is set first (the stream is cancelled)."""
    finished = await until_interrupted(interrupt, _consume(provider, request, on_delta))
    return None if finished is None else finished[0]


async def until_interrupted(
    interrupt: asyncio.Event, work: Coroutine[object, None, T]
) -> tuple[T] | None:
    """`work` awaited in the calling task, its value in a 1-tuple; None when `interrupt` is
    set first: `work` is then cancelled where it waits, as a task of its own was, and what it
    does with the cancellation is not waited for beyond its end. No task at all when
    `interrupt` is an `Interrupt` (`_interrupt.py`; a waiter task for any other event), instead
    of two and an `asyncio.wait`: a step streams and runs its tool call so. A cancellation of
    the calling task from elsewhere goes through, as before."""
    if interrupt.is_set():
        work.close()
        return None
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("until_interrupted runs in a task")
    cut, waiting = False, True

    def stop() -> None:
        nonlocal cut
        if waiting:  # scheduled before `work` ended: too late then
            cut = True
            task.cancel()

    unwatch = on_interrupt(interrupt, stop)
    try:
        finished = (await work,)
    except BaseException:
        if not cut:
            raise
        finished = None  # cut: whatever `work` ended with, it was interrupted (as before)
    finally:
        waiting = False
        unwatch()
    if cut and task.uncancel() > 0:  # cancelled from elsewhere too: that goes through
        raise asyncio.CancelledError
    return None if cut else finished


async def _consume(
    provider: Provider, request: ModelRequest, on_delta: Callable[[StreamEvent], None] | None
) -> Finish:
    """The stream's `Finish`, its deltas handed to `on_delta`. The stream is closed here, at
    its `Finish` (an async generator's `aclose`): left to the garbage collector, the event
    loop's finalizer closed it in a task of its own, a task per request."""
    stream = provider.stream(request)
    try:
        async for event in stream:
            if isinstance(event, Finish):
                return event
            if on_delta is not None:
                on_delta(event)
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    raise IncompleteStreamError("the provider stream ended without a finish")
