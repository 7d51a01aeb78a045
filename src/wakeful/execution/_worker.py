"""Workers: drive every session with pending work or an orphaned claim, sharing one store.

Several workers (processes, hosts) may run at once, and each session has one driver at a time:
- orphaned claims (lease expired, or owner a dead process on this host) are taken over in
  batches sized to the worker's free slots, with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so
  concurrent workers take disjoint sessions without waiting on each other;
- a session with pending input and no claim is started by `_writes.start_drain`, whose claim
  row decides a race between workers (the loser sees a live claim and moves on).
PostgreSQL NOTIFY of an admission (new input) wakes a waiting worker at once; SQLite is polled,
and so is what no admission announces (an expired lease, a dead owner). SIGTERM is a shutdown:
local turns are interrupted and their claims kept for the next worker. `once=True` returns when
nothing is left to do, an orphaned claim included (one whose row a paused writer still locks is
waited for until the database ends that writer's transaction). A worker serves some locations (`locations`, or by default every
location that is a directory on this host): it claims only sessions there, and notes the others
it finds as waiting for their location (`LocalStore.claims.note_waits`) instead of running or failing
them (`docs/locations.md`). A transient store fault (a lock held past the busy timeout, a lost
connection) never ends a worker: it is waited out with a bounded backoff and logged once
(`store.Outage`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from ..errors import CommitUnknownError
from ..store import Claim, LocalStore, Outage, is_transient
from ._off_loop import off_loop, wait_off_loop
from ._owner import current_owner, host_id, owner_is_dead
from ._recovery import Recovered, recover_batch
from ._runtime import Runtime
from ._schedules import run_schedules

T = TypeVar("T")
P = ParamSpec("P")

log = logging.getLogger("wakeful.worker")


@dataclass
class WorkerStats:
    """What a worker did; `lost` counts drains that found their claim taken over; `failed`
    holds the sessions whose latest drain ended with an error (their work is left undone);
    `blocked` the sessions where this worker ended a turn `blocked` (e.g. a stored model that
    can no longer be built: the turn says why)."""

    drains: int = 0
    turns: int = 0
    busy: int = 0
    lost: int = 0
    taken_over: int = 0
    failed: set[str] = field(default_factory=set)
    waiting: dict[str, str] = field(default_factory=dict)  # left for their location: id -> it
    blocked: set[str] = field(default_factory=set)


class Placement:
    """Which locations a worker serves: `only` those (absolute paths), or (None) every one
    that is a directory on this host. Sessions without a location are served everywhere.
    Locations found missing are remembered (`unserved`) so the store leaves them out, and
    forgotten every `recheck_s`, so a directory created later is served."""

    def __init__(self, only: Sequence[str] | None = None, recheck_s: float = 30.0) -> None:
        self.only = None if only is None else sorted(set(only))
        self.unserved: set[str] = set()
        self._recheck_s = recheck_s
        self._since = time.monotonic()

    def serves(self, location: str | None) -> bool:
        """Whether this worker runs sessions at `location`."""
        if location is None:
            return True
        if self.only is not None:
            return location in self.only
        if location in self.unserved:
            return False
        return Path(location).is_dir()

    def places(self) -> tuple[Sequence[str] | None, Sequence[str]]:
        """The store's filter (`only`, `exclude`) for this worker's locations."""
        if time.monotonic() - self._since >= self._recheck_s:
            self.unserved.clear()
            self._since = time.monotonic()
        return self.only, sorted(self.unserved)


def candidates(store: LocalStore, placement: Placement | None = None) -> list[str]:
    """Sessions with pending input and no unreleased claim at a location `placement` serves:
    a drain may start them now.

    A session whose claim is live is its driver's to deliver (after releasing, a driver looks
    at the inbox again); one whose claim is orphaned is taken over, not started.
    """
    return store.claims.startable(places=None if placement is None else placement.places())


def take_over(rt: Runtime, limit: int, placement: Placement | None = None) -> list[Claim]:
    """Take over up to `limit` orphaned claims for this worker (see the module docstring)."""
    if limit <= 0:
        return []
    return rt.store.claims.take_over(
        current_owner(), rt.coordinator.options.lease_ms, owner_is_dead, local_host=host_id(),
        limit=limit, places=None if placement is None else placement.places(),
    )  # fmt: skip


def recover(rt: Runtime, claims: list[Claim]) -> tuple[int, dict[str, Recovered]]:
    """Prepare the drives of `claims` (just taken over): the newest global event id (an
    interrupt requested up to it was for the dead drivers, not for these drains) and the
    batch's healing and continuations (`recover_batch`: one read and one write transaction)."""
    seen = rt.store.feed.last_event_id()
    return seen, recover_batch(rt.store, claims, rt.coordinator.options.max_recovery_attempts)


def place(
    store: LocalStore, found: list[str], placement: Placement
) -> tuple[list[str], dict[str, str]]:
    """Split `found` into the sessions this worker serves and those it leaves waiting (id ->
    location), noting the waits (and any others the store knows of) durably."""
    locations = store.claims.locations(found) if placement.only is None and found else {}
    served: list[str] = []
    waits: dict[str, str] = {}
    for sid in found:
        location = locations.get(sid)
        if placement.serves(location):
            served.append(sid)
        else:
            assert location is not None
            placement.unserved.add(location)
            waits[sid] = location
    waits.update(store.claims.unnoted_waits(placement.places()))
    store.claims.note_waits(waits)
    return served, waits


async def run_worker(
    rt: Runtime, *, once: bool = False, concurrency: int = 8, stop: asyncio.Event | None = None,
    locations: Sequence[str] | None = None,
) -> WorkerStats:  # fmt: skip
    """Drive sessions with work until `stop` is set (or, with `once`, until none is left).

    Only sessions at `locations` (absolute paths; None: every location present on this host)
    are claimed; the others found are noted as waiting for their location (`stats.waiting`).

    Each session found gets one drive task (at most `concurrency` drain at a time, and at most
    that many claims taken over and waiting); the store is looked at again whenever a drive ends
    or `poll_interval_ms` passes (PostgreSQL: an admission's NOTIFY, from any process, ends the
    wait early; other sessions' appends do not, `LocalStore.feed.wait_for_work`). A
    session whose drain made no progress (paused, blocked, held elsewhere) is left alone for one
    lease period; one whose drain hit a transient store fault is tried again after the backoff
    (and `once` waits for that retry).
    """
    stop = stop or asyncio.Event()
    stats = WorkerStats()
    placement = Placement(locations, rt.coordinator.options.lease_ms / 1000)
    if placement.only is not None:  # a session moved elsewhere mid-drain is left there
        rt.serves = placement.serves
    gate = asyncio.Semaphore(concurrency)
    poll_s = rt.coordinator.options.poll_interval_ms / 1000
    stalled: dict[str, float] = {}  # session -> when to look at it again
    retrying: set[str] = set()  # stalled sessions whose drain hit a transient store fault
    inflight: dict[str, asyncio.Task[None]] = {}
    loop = asyncio.get_running_loop()
    outage = Outage(log, "looking for work")  # the worker's own store calls
    failing = Outage(log, "in drains")  # drains: a session is retried after the backoff

    async def drive(
        sid: str, claim: Claim | None, recovered: Recovered | None = None, seen: int | None = None
    ) -> None:
        async with gate:
            if stop.is_set():
                return  # a claim taken over stays held, like a shutdown's
            progressed = False
            try:
                results = await rt.coordinator.resume(sid, claim, recovered=recovered, seen=seen)
            except Exception as err:
                stats.failed.add(sid)
                if is_transient(err):  # retried after the backoff; a claim left lapses first
                    stalled[sid] = loop.time() + failing.failed(err)
                    retrying.add(sid)
                    return
                log.warning("session %s: drain failed: %s: %s", sid, type(err).__name__, err)
                results = []
            else:
                stats.failed.discard(sid)
                failing.ok()
            for result in results:
                if result.waiting_for is not None:  # its location vanished, or was moved away
                    placement.unserved.add(result.waiting_for)
                    stats.waiting[sid] = result.waiting_for
                stats.drains += 1
                stats.turns += len(result.turns)
                stats.busy += int(result.busy)
                stats.lost += int(result.claim_lost)
                if any(t.outcome == "blocked" for t in result.turns):
                    stats.blocked.add(sid)
                progressed |= bool(result.turns) and result.turns[-1].outcome == "completed"
            if not progressed:
                stalled[sid] = loop.time() + rt.coordinator.options.lease_ms / 1000

    def start(
        sid: str, claim: Claim | None, recovered: Recovered | None = None, seen: int | None = None
    ) -> None:
        inflight[sid] = asyncio.ensure_future(drive(sid, claim, recovered, seen))
        inflight[sid].add_done_callback(lambda _t: inflight.pop(sid, None))

    async def attempt(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        """`fn(*args)` in a thread; None after a transient store fault, once waited out (also
        a commit whose outcome was lost: the worker reads the store again before it acts)."""
        try:
            result = await off_loop(fn, *args, **kwargs)
        except Exception as err:
            if not (is_transient(err) or isinstance(err, CommitUnknownError)):
                raise
            await asyncio.wait({stopper}, timeout=outage.failed(err))
            return None
        outage.ok()
        return result

    stopper = asyncio.ensure_future(stop.wait())
    change: asyncio.Future[None] | None = None  # one waiter at a time: it holds a thread
    # Due schedules fire beside the drains (`_schedules.py`); a `once` worker fires none.
    # (and idle compactions are admitted before a cache expires: `_idle.py`)
    firing = None
    if not once:
        firing = asyncio.ensure_future(run_schedules(rt.store, stop, compaction=rt.compaction_at))
    try:
        while not stop.is_set():
            now = loop.time()
            for sid in [s for s, until in stalled.items() if until <= now]:
                del stalled[sid]
                retrying.discard(sid)
            slots = concurrency - len(inflight)
            claims = await attempt(take_over, rt, slots, placement)
            fresh = [c for c in claims or [] if c.session_id not in inflight]
            # (one taken over from a drive here, whose lease lapsed, lapses again)
            stats.taken_over += len(claims or [])
            # Healed together; after a store fault each drain heals its own session, and so it
            # does after any other error (which its drain then meets and reports alone).
            try:
                prepared = await attempt(recover, rt, fresh) if fresh else None
            except Exception as failure:
                log.warning("batch recovery failed, each drain recovers its session: %s: %s",
                            type(failure).__name__, failure)  # fmt: skip
                prepared = None
            seen, recovered = prepared or (None, None)
            for claim in fresh:
                sid = claim.session_id
                if recovered is not None and sid not in recovered:
                    stats.lost += 1  # its claim was taken from this batch meanwhile
                    continue
                rt.coordinator.leases.hold(claim, lambda: None)  # alive while it waits its turn
                start(sid, claim, None if recovered is None else recovered[sid], seen)
            found = None if claims is None else await attempt(candidates, rt.store, placement)
            placed = None if found is None else await attempt(place, rt.store, found, placement)
            if placed is None:
                continue  # the store is unavailable: look again (after the backoff)
            found, waits = placed
            stats.waiting.update(waits)
            for sid in found:
                stats.waiting.pop(sid, None)
                if sid not in inflight and sid not in stalled:
                    start(sid, None)
            # `once` ends only after a look with free slots found nothing to take over: drains
            # that ended during this pass's awaits leave `inflight` empty with orphans whose
            # owners are dead (their leases still run, so the check below does not see them).
            if once and not inflight and not retrying and slots > 0 and claims == []:
                orphans = await attempt(rt.store.claims.any_orphaned, placement.places())
                if orphans is False:
                    break  # (an orphan's row a paused writer still locks is waited for)
            if change is None or change.done():
                change = asyncio.ensure_future(wait_off_loop(rt.store.feed.wait_for_work, poll_s))
            waiting: set[asyncio.Future[Any]] = {stopper, change, *inflight.values()}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if change.done() and (err := change.exception()) is not None:
                if not is_transient(err):  # (a backend's wait retries its own connection)
                    raise err
                await asyncio.wait({stopper}, timeout=outage.failed(err))
    finally:
        stopper.cancel()
        if firing is not None:
            firing.cancel()
            await asyncio.gather(firing, return_exceptions=True)
        if stop.is_set() or inflight:
            _shutdown(rt)
        await asyncio.gather(*inflight.values(), return_exceptions=True)
        await rt.coordinator.wait_idle()
    return stats


def _shutdown(rt: Runtime) -> None:
    """Interrupt local drains as a shutdown: their claims stay for the next worker."""
    rt.shut_down()
