"""Workers: drive every session with pending work or an orphaned claim, sharing one store.

Several workers (processes, hosts) may run at once, and each session has one driver at a time:
- orphaned claims (lease expired, or owner a dead process on this host) are taken over in
  batches sized to the worker's free slots, with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so
  concurrent workers take disjoint sessions without waiting on each other;
- a session with pending input and no claim is started by `SqlStore.start_drain`, whose claim
  row decides a race between workers (the loser sees a live claim and moves on).
PostgreSQL NOTIFY wakes a waiting worker at once; SQLite is polled. SIGTERM is a shutdown:
local turns are interrupted and their claims kept for the next worker. `once=True` returns when
nothing is left to do.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from ..store import Claim, SqlStore
from ._owner import current_owner, host_id, owner_is_dead
from ._runtime import Runtime

log = logging.getLogger("wakeful.worker")


@dataclass
class WorkerStats:
    """What a worker did; `lost` counts drains that found their claim taken over."""

    drains: int = 0
    turns: int = 0
    busy: int = 0
    lost: int = 0
    taken_over: int = 0


def candidates(store: SqlStore) -> list[str]:
    """Sessions with pending input and no unreleased claim: a drain may start them now.

    A session whose claim is live is its driver's to deliver (after releasing, a driver looks
    at the inbox again); one whose claim is orphaned is taken over, not started.
    """
    return store.startable_sessions()


def take_over(rt: Runtime, limit: int) -> list[Claim]:
    """Take over up to `limit` orphaned claims for this worker (see the module docstring)."""
    if limit <= 0:
        return []
    return rt.store.take_over_claims(
        current_owner(), rt.coordinator.options.lease_ms, owner_is_dead, local_host=host_id(),
        limit=limit,
    )  # fmt: skip


async def run_worker(
    rt: Runtime, *, once: bool = False, concurrency: int = 8, stop: asyncio.Event | None = None
) -> WorkerStats:
    """Drive sessions with work until `stop` is set (or, with `once`, until none is left).

    Each session found gets one drive task (at most `concurrency` drain at a time, and at most
    that many claims taken over and waiting); the store is looked at again whenever a drive ends
    or `poll_interval_ms` passes (PostgreSQL: a NOTIFY from any writer ends the wait early). A
    session whose drain made no progress (paused, blocked, held elsewhere) is left alone for one
    lease period.
    """
    stop = stop or asyncio.Event()
    stats = WorkerStats()
    gate = asyncio.Semaphore(concurrency)
    poll_s = rt.coordinator.options.poll_interval_ms / 1000
    stalled: dict[str, float] = {}  # session -> when to look at it again
    inflight: dict[str, asyncio.Task[None]] = {}
    loop = asyncio.get_running_loop()

    async def drive(sid: str, claim: Claim | None) -> None:
        async with gate:
            if stop.is_set():
                return  # a claim taken over stays held, like a shutdown's
            progressed = False
            try:
                results = await rt.coordinator.resume(sid, claim)
            except Exception as err:  # a store fault: retry after a lease
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

    def start(sid: str, claim: Claim | None) -> None:
        inflight[sid] = asyncio.ensure_future(drive(sid, claim))
        inflight[sid].add_done_callback(lambda _t, sid=sid: inflight.pop(sid, None))

    stopper = asyncio.ensure_future(stop.wait())
    change: asyncio.Future[None] | None = None  # one waiter at a time: it holds a thread
    try:
        while not stop.is_set():
            now = loop.time()
            for sid in [s for s, until in stalled.items() if until <= now]:
                del stalled[sid]
            for claim in await asyncio.to_thread(take_over, rt, concurrency - len(inflight)):
                stats.taken_over += 1
                if claim.session_id in inflight:  # (its lease lapsed here) it lapses again
                    continue
                rt.coordinator.leases.hold(claim, lambda: None)  # alive while it waits its turn
                start(claim.session_id, claim)
            found = await asyncio.to_thread(candidates, rt.store)
            for sid in found:
                if sid not in inflight and sid not in stalled:
                    start(sid, None)
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
