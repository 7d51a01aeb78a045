"""The two waits inside a turn: a durable retry's deadline, and a store outage.

- `wait_until`: a retry waits for its deadline, which is durable (`retry.scheduled`, invariant
  9); new steer input or an interrupt cuts it short.
- `waited_out`: what must not be asked again (tool results whose side effects ran, the step
  boundary's delivery, the turn's end) is written again until the store takes it, for as long
  as a transient fault lasts, with the claim kept.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..errors import StoreError
from ..store import Outage, is_transient
from ._context import Interrupted, RunContext
from ._crashpoints import crash_point
from ._port import SessionPort

log = logging.getLogger("wakeful.runner")
T = TypeVar("T")


async def wait_until(ctx: RunContext, port: SessionPort, deadline_ms: int) -> None:
    """Wait for a durable deadline; new pending steer input or an interrupt cuts it short
    (the interrupt raises `Interrupted`). A failed look for steers is only a missed hint:
    it is looked at again at the next poll."""
    poll_s = ctx.retry.poll_interval_ms / 1000
    while (left := deadline_ms - ctx.clock.now_ms()) > 0:
        if ctx.interrupt.is_set():
            raise Interrupted
        try:
            if any(i.delivery == "steer" for i in await port.pending()):
                return
        except StoreError as err:
            if not is_transient(err):
                raise
        await ctx.sleep(min(poll_s, left / 1000))


async def waited_out(
    ctx: RunContext,
    what: str,
    call: Callable[[bool], Awaitable[T]],
    *,
    crash: str | None = None,
) -> T:
    """`call(retry)` until it succeeds: a transient store fault (a lock held past the busy
    timeout, a lost connection, a full disk) is waited out, for as long as it lasts, with
    the claim kept (the lease keeper goes on renewing it); `retry` says an earlier try
    failed (it committed nothing: `StoreError.retryable`). For what must not be asked
    again: tool results (their side effects ran), the step boundary's delivery and the
    turn's end (a turn does not end `failed` because a connection dropped there). The backoff
    doubles up to `Outage`'s bound; the outage (`what`) is logged when it begins and ends.

    A lost claim (`ClaimLostError`), any other store error, or a shutdown ends the wait by
    raising: the calls stay `running` and the next drain's recovery settles them.
    """
    outage = Outage(log, what)
    retry = False
    while True:
        try:
            result = await call(retry)
        except StoreError as err:
            if not is_transient(err):
                raise
            delay = outage.failed(err)
        else:
            outage.ok()
            return result
        if ctx.shutting_down():
            raise Interrupted
        if crash is not None:
            crash_point(crash)
        await ctx.sleep(delay)
        retry = True
