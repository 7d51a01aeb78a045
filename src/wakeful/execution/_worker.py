"""Workers: drive every session with pending work or an orphaned claim, sharing one store.

Several workers (processes, hosts) may run at once, and each session has one driver at a time:
- orphaned claims (lease expired, or owner a dead process on this host) are taken over in
  batches sized to the worker's free slots, with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so
  concurrent workers take disjoint sessions without waiting on each other;
- sessions with pending input and no claim (ready) are reserved in batches sized to the free
  slots (`LocalStore.claims.reserve`), with ``FOR UPDATE SKIP LOCKED`` over the ready sessions'
  rows on PostgreSQL, so concurrent workers take disjoint sessions there too: no claim is
  taken in vain and no worker waits on another's rows (the drain delivers under the claim);
- each look at the store is one read that locks nothing (`LocalStore.claims.look`); a worker
  opens a write transaction only when that read found an orphan or a ready session.
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

from .._defaults import WORKER_CONCURRENCY
from ..errors import CommitUnknownError
from ..store import Claim, LocalStore, Outage, Reservation, is_transient
from ._drain import DrainResult
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
    """What a worker did; `lost` counts drains that found their claim taken over; `busy`
    drains that found another live driver holding their session; `reserved` the ready
    sessions whose claims this worker took, `unused` those of them it released without a
    drive (their location is not served here, or a drive of it was still ending): `busy` and
    `unused` are the claims taken in vain; `failed`
    holds the sessions whose latest drain ended with an error (their work is left undone);
    `blocked` the sessions where this worker ended a turn `blocked` (e.g. a stored model that
    can no longer be built: the turn says why)."""

    drains: int = 0
    turns: int = 0
    busy: int = 0
    lost: int = 0
    taken_over: int = 0
    reserved: int = 0
    unused: int = 0
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
        current_owner(),
        rt.coordinator.options.lease_ms,
        owner_is_dead,
        local_host=host_id(),
        limit=limit,
        places=None if placement is None else placement.places(),
    )


def recover(rt: Runtime, claims: list[Claim]) -> dict[str, Recovered]:
    """Prepare the drives of `claims` (just taken over): the batch's healing and
    continuations (`recover_batch`: one read and one write transaction). The read carries the
    newest global event id too (each drive's `Recovered.drive.newest_event`): an interrupt
    requested up to it was for the dead drivers, not for these drains."""
    return recover_batch(rt.store, claims, rt.coordinator.options.max_recovery_attempts)


def look(rt: Runtime, placement: Placement, skip: Sequence[str]) -> tuple[bool, bool]:
    """Whether an orphan is there to take over and whether a ready session is there to
    reserve (one read, `LocalStore.claims.look`)."""
    return rt.store.claims.look(
        owner_is_dead, local_host=host_id(), places=placement.places(), skip=skip
    )


@dataclass(frozen=True)
class Reserved:
    """What `reserve` took: the newest global event id read after it (None when nothing is
    to be driven; an interrupt requested up to it was not for these drains), the
    reservations to drive, how many it released at once (their location is not served
    here), and the sessions left waiting for their location (id -> location)."""

    seen: int | None
    served: list[Reservation]
    released: int
    waits: dict[str, str]


def reserve(rt: Runtime, limit: int, placement: Placement, skip: Sequence[str]) -> Reserved:
    """Reserve up to `limit` ready sessions (not in `skip`) this worker serves (`Reserved`);
    the claims of those it does not serve are released at once and their waits noted
    durably, with any others the store knows of."""
    store = rt.store
    taken = store.claims.reserve(
        current_owner(),
        rt.coordinator.options.lease_ms,
        limit=limit,
        places=placement.places(),
        skip=skip,
    )
    served: list[Reservation] = []
    waits: dict[str, str] = {}
    for reservation in taken:
        location = reservation.location
        if placement.serves(location):
            served.append(reservation)
        else:
            assert location is not None
            placement.unserved.add(location)
            waits[reservation.claim.session_id] = location
    unserved = [r.claim for r in taken if r.claim.session_id in waits]
    if unserved:
        store.claims.release_all(unserved)
    waits.update(store.claims.unnoted_waits(placement.places()))
    store.claims.note_waits(waits)
    seen = store.feed.last_event_id() if served else None
    return Reserved(seen, served, len(unserved), waits)


async def run_worker(
    rt: Runtime,
    *,
    once: bool = False,
    concurrency: int = WORKER_CONCURRENCY,
    stop: asyncio.Event | None = None,
    locations: Sequence[str] | None = None,
) -> WorkerStats:
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
    worker = _Worker(rt, once, concurrency, stop or asyncio.Event(), locations)
    return await worker.run()


class _Worker:
    """One `run_worker`: what it knows between its looks at the store, and the drives it runs."""

    def __init__(
        self,
        rt: Runtime,
        once: bool,
        concurrency: int,
        stop: asyncio.Event,
        locations: Sequence[str] | None,
    ) -> None:
        self.rt, self.once, self.concurrency, self.stop = rt, once, concurrency, stop
        self.stats = WorkerStats()
        self.placement = Placement(locations, rt.coordinator.options.lease_ms / 1000)
        if self.placement.only is not None:  # a session moved elsewhere mid-drain is left there
            rt.serves = self.placement.serves
        self.gate = asyncio.Semaphore(concurrency)
        self.poll_s = rt.coordinator.options.poll_interval_ms / 1000
        self.stalled: dict[str, float] = {}  # session -> when to look at it again
        self.retrying: set[str] = set()  # stalled sessions whose drain hit a transient fault
        self.inflight: dict[str, asyncio.Task[None]] = {}
        self.loop = asyncio.get_running_loop()
        self.outage = Outage(log, "looking for work")  # the worker's own store calls
        self.failing = Outage(log, "in drains")  # drains: a session is retried after the backoff
        self.stopper: asyncio.Future[Any] = self.loop.create_future()  # set by `run`
        # Whether the last look found work while every slot was taken (more may be waiting):
        # only then is a drive's end a reason to look again before the next change or poll,
        # and only once `refill_at` slots are free, so takeovers and reservations stay batches.
        self.left = False
        self.refill_at = max(1, concurrency // 8)
        # What the last look found (orphans, ready), when the wait ended for drives' ends with
        # that work left behind: the next pass takes it without looking again (a look would
        # find the same; a takeover or reservation that finds none commits no more than the
        # look would have), one read less per refill (issue 36: a commit each on PostgreSQL).
        self.found: tuple[bool, bool] | None = None
        self.refilled = False  # the last wait ended for drives' ends only (`_wait`)
        # Set by the next drive to end (`_ended`): `_wait` waits on it, not on every drive in
        # flight, so a drive's end costs the loop one callback, not one per drive in flight.
        self.ended: asyncio.Future[None] = self.loop.create_future()

    async def run(self) -> WorkerStats:
        """Look at the store, start drives, wait for a change; until `stop` (or `once` done)."""
        self.stopper = asyncio.ensure_future(self.stop.wait())
        change: asyncio.Future[None] | None = None  # one waiter at a time: it holds a thread
        # Due schedules fire beside the drains (`_schedules.py`); a `once` worker fires none.
        # (and idle compactions are admitted before a cache expires: `_idle.py`)
        firing = None
        if not self.once:
            firing = asyncio.ensure_future(
                run_schedules(self.rt.store, self.stop, compaction=self.rt.compaction_at)
            )
        try:
            while not self.stop.is_set():
                self._unstall()
                slots = self.concurrency - len(self.inflight)
                if slots <= 0:  # full: a look could start nothing, so none until a drive ends
                    change = await self._wait(change)
                    continue
                looked = await self._look()
                if looked is None:
                    continue  # the store is unavailable: look again (after the backoff)
                orphans, ready = looked
                claims = await self._take_over(slots) if orphans else []
                started = await self._start_ready() if ready and claims is not None else 0
                if claims is None or started is None:
                    continue
                if await self._done(slots, claims, orphans, ready and not started):
                    break
                self.left = (orphans or ready) and len(self.inflight) >= self.concurrency
                change = await self._wait(change)
                if self.left and self.refilled:
                    self.found = (orphans, ready)
        finally:
            self.stopper.cancel()
            if firing is not None:
                firing.cancel()
                await asyncio.gather(firing, return_exceptions=True)
            if self.stop.is_set() or self.inflight:
                _shutdown(self.rt)
            await asyncio.gather(*self.inflight.values(), return_exceptions=True)
            await self.rt.coordinator.wait_idle()
        return self.stats

    async def _look(self) -> tuple[bool, bool] | None:
        """A look at the store (`look`; None when it could not be read), or, when the wait
        ended for drives' ends with work left behind, what the last look found (`found`)."""
        found, self.found = self.found, None
        if found is not None:
            return found
        return await self._attempt(look, self.rt, self.placement, sorted(self.stalled))

    def _unstall(self) -> None:
        now = self.loop.time()
        for sid in [s for s, until in self.stalled.items() if until <= now]:
            del self.stalled[sid]
            self.retrying.discard(sid)

    async def _take_over(self, slots: int) -> list[Claim] | None:
        """Take over orphaned claims for the free slots, heal them in one batch and start
        their drives; None when the store could not be read (after the backoff)."""
        claims = await self._attempt(take_over, self.rt, slots, self.placement)
        fresh = [c for c in claims or [] if c.session_id not in self.inflight]
        # (one taken over from a drive here, whose lease lapsed, lapses again)
        self.stats.taken_over += len(claims or [])
        # Healed together; after a store fault each drain heals its own session, and so it
        # does after any other error (which its drain then meets and reports alone).
        try:
            recovered = await self._attempt(recover, self.rt, fresh) if fresh else None
        except Exception as failure:
            log.warning(
                "batch recovery failed, each drain recovers its session: %s: %s",
                type(failure).__name__,
                failure,
            )
            recovered = None
        for claim in fresh:
            sid = claim.session_id
            if recovered is not None and sid not in recovered:
                self.stats.lost += 1  # its claim was taken from this batch meanwhile
                continue
            self.rt.coordinator.leases.hold(claim, lambda: None)  # alive while it waits
            # (without the batch's read, the drain reads the newest event id itself)
            mine = None if recovered is None else recovered[sid]
            seen = None if mine is None or mine.drive is None else mine.drive.newest_event
            self._start(sid, claim, mine, seen)
        return claims

    async def _start_ready(self) -> int | None:
        """Reserve ready sessions for the free slots and start their drives; how many were
        reserved (released ones included), None when the store could not be read."""
        free = self.concurrency - len(self.inflight)
        if free <= 0:
            return 0
        skip = sorted(self.stalled)
        reserved = await self._attempt(reserve, self.rt, free, self.placement, skip)
        if reserved is None:
            return None
        self.stats.waiting.update(reserved.waits)
        self.stats.reserved += len(reserved.served) + reserved.released
        self.stats.unused += reserved.released
        ending = [  # its drive released the claim and is still ending, or stalled meanwhile
            r.claim
            for r in reserved.served
            if r.claim.session_id in self.inflight or r.claim.session_id in self.stalled
        ]
        if ending:  # let it end; a session that stalled is looked at again when it is due
            self.stats.unused += len(ending)
            await self._attempt(self.rt.store.claims.release_all, ending)
        for reservation in reserved.served:
            claim = reservation.claim
            sid = claim.session_id
            if claim in ending:
                continue
            self.stats.waiting.pop(sid, None)
            self.rt.coordinator.leases.hold(claim, lambda: None)  # alive until the drive starts
            # No open turn behind a free claim; a call left running is settled by the drain.
            recovered = None if reservation.running_call else Recovered(None, None)
            self._start(sid, claim, recovered, reserved.seen)
        return len(reserved.served) + reserved.released

    async def _done(
        self, slots: int, claims: list[Claim] | None, orphans: bool, missed: bool
    ) -> bool:
        """Whether a `once` worker is done. It ends only after a look with free slots found
        nothing to take over: drains that ended during this pass's awaits leave `inflight`
        empty with orphans whose owners are dead (their leases still run, so only the store's
        check sees them; an orphan's row a paused writer still locks is waited for). A ready
        session the reservation passed over (`missed`: its row was locked) is waited for too."""
        if not (self.once and not self.inflight and not self.retrying and slots > 0):
            return False
        if claims != [] or missed:
            return False
        if not orphans:
            return True
        left = await self._attempt(self.rt.store.claims.any_orphaned, self.placement.places())
        return left is False

    async def _wait(self, change: asyncio.Future[None] | None) -> asyncio.Future[None] | None:
        """Wait for a stop, a change in the store (or the poll interval), or drives' ends that
        make a look worth it (`_refill`): one look per process and change, not per session.
        A full worker (every slot driving) waits for no change and no poll, only for a drive to
        end: a look could start nothing (issue 36: its polls were a commit each, 4 a second)."""
        while True:
            room = len(self.inflight) < self.concurrency
            if room and (change is None or change.done()):
                wait_for_work = self.rt.store.feed.wait_for_work
                change = asyncio.ensure_future(wait_off_loop(wait_for_work, self.poll_s))
            watched = change if change is not None and not change.done() else None
            if self.ended.done():
                self.ended = self.loop.create_future()
            waiting: set[asyncio.Future[Any]] = {self.stopper, self.ended}
            if watched is not None:
                waiting.add(watched)
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            changed = watched is not None and watched.done()
            if watched is not None and changed and (err := watched.exception()) is not None:
                if not is_transient(err):  # (a backend's wait retries its own connection)
                    raise err
                await asyncio.wait({self.stopper}, timeout=self.outage.failed(err))
            room = len(self.inflight) < self.concurrency
            self.refilled = not (self.stopper.done() or (changed and room)) and self._refill()
            if self.stopper.done() or (changed and room) or self.refilled:
                return change

    def _refill(self) -> bool:
        """Whether the drives that ended are a reason to look now: none is left (a `once`
        worker may be done, or its orphans' owners just died), or the last look left work
        behind and a batch of slots is free. Otherwise an ending drive found nothing new:
        what a look would find arrives as a change (an admission's NOTIFY) or by the poll."""
        free = self.concurrency - len(self.inflight)
        return not self.inflight or (self.left and free >= self.refill_at)

    def _start(
        self,
        sid: str,
        claim: Claim | None,
        recovered: Recovered | None = None,
        seen: int | None = None,
    ) -> None:
        self.inflight[sid] = asyncio.ensure_future(self._drive(sid, claim, recovered, seen))
        self.inflight[sid].add_done_callback(lambda _t: self._ended(sid))

    def _ended(self, sid: str) -> None:
        """A drive ended: its slot is free, and a waiting `_wait` looks at why it should wake."""
        self.inflight.pop(sid, None)
        if not self.ended.done():
            self.ended.set_result(None)

    async def _drive(
        self,
        sid: str,
        claim: Claim | None,
        recovered: Recovered | None = None,
        seen: int | None = None,
    ) -> None:
        """One session's drain, at most `concurrency` at a time; a session whose drain made no
        progress (paused, blocked, held elsewhere) is left alone for one lease period, one
        whose drain hit a transient store fault is tried again after the backoff. However it
        ends, its recovery batch's first commits wait for it no more (`FirstWrites.leave`)."""
        try:
            await self._drive_gated(sid, claim, recovered, seen)
        finally:
            if recovered is not None and recovered.first is not None:
                recovered.first.leave(sid)

    async def _drive_gated(
        self, sid: str, claim: Claim | None, recovered: Recovered | None, seen: int | None
    ) -> None:
        """`_drive` (the drain, under the concurrency gate)."""
        async with self.gate:
            if self.stop.is_set():  # a claim taken over stays held, like a shutdown's
                if claim is not None and not claim.taken_over:  # a reservation: nothing ran
                    self.rt.coordinator.leases.drop(claim)
                    await self._attempt(self.rt.store.claims.release, claim)
                return
            try:
                results = await self.rt.coordinator.resume(
                    sid, claim, recovered=recovered, seen=seen
                )
            except Exception as err:
                self.stats.failed.add(sid)
                if is_transient(err):  # retried after the backoff; a claim left lapses first
                    self.stalled[sid] = self.loop.time() + self.failing.failed(err)
                    self.retrying.add(sid)
                    return
                log.warning("session %s: drain failed: %s: %s", sid, type(err).__name__, err)
                results = []
            else:
                self.stats.failed.discard(sid)
                self.failing.ok()
            if not self._count(sid, results):
                self.stalled[sid] = self.loop.time() + self.rt.coordinator.options.lease_ms / 1000

    def _count(self, sid: str, results: Sequence[DrainResult]) -> bool:
        """Add a drive's results to the stats; whether its last turn completed (progress)."""
        progressed = False
        stats = self.stats
        for result in results:
            if result.waiting_for is not None:  # its location vanished, or was moved away
                self.placement.unserved.add(result.waiting_for)
                stats.waiting[sid] = result.waiting_for
            stats.drains += 1
            stats.turns += len(result.turns)
            stats.busy += int(result.busy)
            stats.lost += int(result.claim_lost)
            if any(t.outcome == "blocked" for t in result.turns):
                stats.blocked.add(sid)
            progressed |= bool(result.turns) and result.turns[-1].outcome == "completed"
        return progressed

    async def _attempt(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        """`fn(*args)` in a thread; None after a transient store fault, once waited out (also
        a commit whose outcome was lost: the worker reads the store again before it acts)."""
        try:
            result = await off_loop(fn, *args, **kwargs)
        except Exception as err:
            if not (is_transient(err) or isinstance(err, CommitUnknownError)):
                raise
            await asyncio.wait({self.stopper}, timeout=self.outage.failed(err))
            return None
        self.outage.ok()
        return result


def _shutdown(rt: Runtime) -> None:
    """Interrupt local drains as a shutdown: their claims stay for the next worker."""
    rt.shut_down()
