"""Workers: drive every session with pending work or an orphaned claim, sharing one store.

Several workers (processes, hosts) may run at once; the claim decides who drives a session, so
each session has one driver at a time. SIGTERM is a shutdown: local turns are interrupted and
their claims kept for the next worker. `once=True` returns when nothing is left to do.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from ._runtime import Runtime


@dataclass
class WorkerStats:
    """What a worker did."""

    drains: int = 0
    turns: int = 0
    busy: int = 0


async def run_worker(
    rt: Runtime, *, once: bool = False, concurrency: int = 8, stop: asyncio.Event | None = None
) -> WorkerStats:
    """Drive sessions with work until `stop` is set (or, with `once`, until none is left)."""
    stop = stop or asyncio.Event()
    stats = WorkerStats()
    gate = asyncio.Semaphore(concurrency)
    poll_s = rt.config.retry.poll_interval_ms / 1000
    stalled: set[str] = set()  # drained without progress (paused, blocked, held elsewhere)

    async def drive(sid: str) -> None:
        async with gate:
            progressed = False
            for result in await rt.coordinator.resume(sid):
                stats.drains += 1
                stats.turns += len(result.turns)
                stats.busy += int(result.busy)
                progressed |= bool(result.turns) and result.turns[-1].outcome == "completed"
            if not progressed:
                stalled.add(sid)

    while not stop.is_set():
        found = await asyncio.to_thread(rt.store.sessions_with_work)
        todo = [s for s in found if s not in stalled and s not in rt.coordinator.active()]
        if not todo and once:
            break
        if todo:
            stopper = asyncio.ensure_future(stop.wait())
            work = asyncio.ensure_future(asyncio.gather(*(drive(s) for s in todo)))
            await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not work.done():
                _shutdown(rt)
                await asyncio.gather(work, return_exceptions=True)
            continue
        stalled.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=poll_s * 4)
    _shutdown(rt)
    await rt.coordinator.wait_idle()
    return stats


def _shutdown(rt: Runtime) -> None:
    """Interrupt local drains as a shutdown: their claims stay for the next worker."""
    rt.coordinator.options.shutdown.set()
    for sid in rt.coordinator.active():
        rt.coordinator.interrupt(sid)
