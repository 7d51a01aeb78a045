"""Workers: drive every session with pending work or an orphaned claim, sharing one store.

Several workers (processes, hosts) may run at once; the claim decides who drives a session, so
each session has one driver at a time. SIGTERM is a shutdown: local turns are interrupted and
their claims kept for the next worker. `once=True` returns when nothing is left to do.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from ..store import SqlStore
from ._owner import owner_is_dead
from ._runtime import Runtime

log = logging.getLogger("wakeful.worker")


@dataclass
class WorkerStats:
    """What a worker did; `lost` counts drains that found their claim taken over."""

    drains: int = 0
    turns: int = 0
    busy: int = 0
    lost: int = 0


def candidates(store: SqlStore) -> list[str]:
    """Sessions with pending input or an unreleased claim, minus those a live driver holds.

    A claim is live while its lease runs and its owner is not a dead process on this host; its
    driver delivers the pending input itself (after releasing, it looks at the inbox again).
    """
    found = store.sessions_with_work()
    held = {c.session_id: c for c in store.claimed_sessions()}
    now = store.clock.now_ms()
    return [
        sid
        for sid in found
        if sid not in held or held[sid].lease_until_ms <= now or owner_is_dead(held[sid].owner)
    ]


async def run_worker(
    rt: Runtime, *, once: bool = False, concurrency: int = 8, stop: asyncio.Event | None = None
) -> WorkerStats:
    """Drive sessions with work until `stop` is set (or, with `once`, until none is left).

    Each session found gets one drive task (at most `concurrency` drain at a time); the store is
    polled again whenever a drive ends or `poll_interval_ms` passes (PostgreSQL: a NOTIFY from
    any writer ends the wait early). A session whose drain made no progress (paused, blocked,
    held elsewhere) is left alone for one lease period.
    """
    stop = stop or asyncio.Event()
    stats = WorkerStats()
    gate = asyncio.Semaphore(concurrency)
    poll_s = rt.coordinator.options.poll_interval_ms / 1000
    stalled: dict[str, float] = {}  # session -> when to look at it again
    inflight: dict[str, asyncio.Task[None]] = {}
    loop = asyncio.get_running_loop()

    async def drive(sid: str) -> None:
        async with gate:
            if stop.is_set():
                return
            progressed = False
            try:
                results = await rt.coordinator.resume(sid)
            except Exception as err:  # a store fault: the claim is kept, retry after a lease
                log.warning("session %s: drain failed: %s: %s", sid, type(err).__name__, err)
                results = []
            for result in results:
                stats.drains += 1
                stats.turns += len(result.turns)
                stats.busy += int(result.busy)
                stats.lost += int(result.claim_lost)
                progressed |= bool(result.turns) and result.turns[-1].outcome == "completed"
            if not progressed:
                stalled[sid] = loop.time() + rt.coordinator.options.lease_ms / 1000

    stopper = asyncio.ensure_future(stop.wait())
    change: asyncio.Future[None] | None = None  # one waiter at a time: it holds a thread
    try:
        while not stop.is_set():
            now = loop.time()
            for sid in [s for s, until in stalled.items() if until <= now]:
                del stalled[sid]
            found = await asyncio.to_thread(candidates, rt.store)
            todo = [s for s in found if s not in inflight and s not in stalled]
            for sid in todo:
                inflight[sid] = asyncio.ensure_future(drive(sid))
                inflight[sid].add_done_callback(lambda _t, sid=sid: inflight.pop(sid, None))
            if once and not inflight:
                break
            if change is None or change.done():
                change = asyncio.ensure_future(
                    asyncio.to_thread(rt.store.backend.wait_for_change, poll_s)
                )
            await asyncio.wait(
                {stopper, change, *inflight.values()}, return_when=asyncio.FIRST_COMPLETED
            )
    finally:
        stopper.cancel()
        if stop.is_set() or inflight:
            _shutdown(rt)
        await asyncio.gather(*inflight.values(), return_exceptions=True)
        await rt.coordinator.wait_idle()
    return stats


def _shutdown(rt: Runtime) -> None:
    """Interrupt local drains as a shutdown: their claims stay for the next worker."""
    rt.coordinator.options.shutdown.set()
    for sid in rt.coordinator.active():
        rt.coordinator.interrupt(sid)
