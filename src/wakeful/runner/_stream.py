"""Streaming one model request to its finish, stopped by an interrupt: the one place a turn
and its compaction read a provider's stream.

Deltas go to the caller's `on_delta` (the turn publishes them live and keeps streamed text for
a cut reply); only the `Finish` is returned. An interrupt cancels the stream and returns None.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..errors import IncompleteStreamError
from ..providers import Finish, ModelRequest, Provider, StreamEvent


async def stream_to_finish(
    provider: Provider,
    request: ModelRequest,
    interrupt: asyncio.Event,
    on_delta: Callable[[StreamEvent], None] | None = None,
) -> Finish | None:
    """The request's `Finish` (`IncompleteStreamError` when the stream ends without one);
    None when `interrupt` is set first (the stream is cancelled)."""
    if interrupt.is_set():
        return None
    stream_task = asyncio.ensure_future(_consume(provider, request, on_delta))
    interrupt_task = asyncio.ensure_future(interrupt.wait())
    try:
        done, _ = await asyncio.wait(
            {stream_task, interrupt_task}, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        interrupt_task.cancel()
    if stream_task not in done:
        stream_task.cancel()
        await asyncio.gather(stream_task, return_exceptions=True)
        return None
    return stream_task.result()


async def _consume(
    provider: Provider, request: ModelRequest, on_delta: Callable[[StreamEvent], None] | None
) -> Finish:
    async for event in provider.stream(request):
        if isinstance(event, Finish):
            return event
        if on_delta is not None:
            on_delta(event)
    raise IncompleteStreamError("the provider stream ended without a finish")
