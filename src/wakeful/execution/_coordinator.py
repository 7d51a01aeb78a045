"""The process-global coordinator: at most one local drain per session.

Explicit resumes join the active drain; wakes during a drain coalesce into one follow-up drain;
different sessions run concurrently as asyncio tasks; an interrupt stops local execution and
deletes no pending input.

Interrupts are linearizable across the turn handoff: an interrupt stops the turn running when
it arrives; one that arrives after a turn ended and before the next one started arms that next
turn, which ends at once as `interrupted` without a provider request. Either way it is consumed
by exactly one turn. Interrupts requested through the store by any process reach local drains
through one watcher per coordinator, for every session: on PostgreSQL it hears each request
announced (LISTEN, `Feed.wait_for_interrupts`: the payload names the request and its session, so
no read is needed) and reads the store only every `SAFETY_POLL_S`, for an announcement lost with
a process or a connection; on SQLite, where nothing is announced, it reads the requests committed
since its last look once per poll interval (one cheap query).

A drain that ends normally looks at the inbox once more after releasing its claim: an input
admitted by another process whose wake found the claim still held is driven, never stranded.
One `LeaseKeeper` renews the claims of all local drains together.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import NotFoundError
from ..runner import Interrupt
from ..store import Claim, DriveReads, LocalStore, is_transient
from ._drain import STOP_OUTCOMES, DrainOptions, DrainResult, drain
from ._leases import LeaseKeeper
from ._off_loop import off_loop, wait_off_loop
from ._port import SessionSetup
from ._recovery import Recovered

log = logging.getLogger("wakeful.coordinator")


class SessionNotFoundError(NotFoundError):
    """The session to interrupt or wake does not exist."""


# A drain's `seen_request` until it has read the newest event id (`Coordinator.wake`): above
# every request id, so the watcher applies none to it before then (it keeps them: `early`).
_UNREAD = sys.maxsize
# How often a watcher that hears interrupt requests announced (PostgreSQL) reads them from the
# store all the same: only an announcement lost with the process that wrote the request (between
# its commit and its notifier's batch) or with the listening connection waits this long.
SAFETY_POLL_S = 5.0


@dataclass
class _Active:
    task: asyncio.Task[list[DrainResult]]
    interrupt: asyncio.Event = field(default_factory=Interrupt)  # watched without a task
    again: bool = False
    seen_request: int = 0  # newest durable interrupt request already applied here
    # The newest global event id the drain's context read (`DriveReads.newest_event`; None:
    # it could not): where a watcher started with this drain begins, instead of a read of
    # its own.
    read: asyncio.Future[int | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    # Requests the watcher found for this drain before it read the newest id (`_seen` applies
    # those after it), and the newest one `interrupt` applied meanwhile.
    early: list[int] = field(default_factory=list)
    applied: int = 0


class Coordinator:
    """Keyed by session id; see the module docstring."""

    def __init__(
        self,
        store: LocalStore,
        make_context: Callable[[str, asyncio.Event, DriveReads | None], SessionSetup],
        options: DrainOptions | None = None,
    ) -> None:
        self.store = store
        self._make_context = make_context
        self.options = options or DrainOptions()
        self.leases = LeaseKeeper(store, self.options.lease_ms)
        self._active: dict[str, _Active] = {}
        self._watcher: asyncio.Future[None] | None = None
        self._failing = False  # the watcher's last read failed (logged once per run)
        self._read_at = time.monotonic()  # when a listening watcher last read (or began)

    def active(self) -> list[str]:
        """Session ids this process is driving right now."""
        return sorted(sid for sid, a in self._active.items() if not a.task.done())

    def wake(
        self,
        session_id: str,
        claim: Claim | None = None,
        *,
        recovered: Recovered | None = None,
        seen: int | None = None,
    ) -> asyncio.Task[list[DrainResult]]:
        """Start a drain, or ask the running one to drain again when it ends (coalesced).

        `claim` is one the caller already took for this session (a worker's takeover): the
        first drain uses it instead of claiming, and `recovered` (its batch's healing and plan,
        `recover_batch`) instead of recovering it. `seen`: the newest global event id read
        before the caller decided to drive the session (interrupts up to it are not for this
        drain); None reads it here.
        """
        current = self._active.get(session_id)
        if current is not None and not current.task.done():
            # A claim taken over from this very drain (its lease lapsed) fences it out; the new
            # claim is not released: its lease lapses too and recovery drives the session.
            current.again = True
            return current.task
        entry = _Active(task=None)  # type: ignore[arg-type]  # the task is set below, once `_run` can see the entry
        # An interrupt requested before this drain began was for an earlier one (or an idle
        # session, a no-op): the store watcher must not apply it here, however late it polls.
        # Unknown here (`seen` None), the drain reads the newest id off the loop as it starts
        # (`_run`); until then the watcher applies nothing to it.
        entry.seen_request = _UNREAD if seen is None else seen
        entry.task = asyncio.ensure_future(self._run(session_id, entry, claim, recovered))
        self._active[session_id] = entry
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.ensure_future(self._watch(seen, entry))
        return entry.task

    async def resume(
        self,
        session_id: str,
        claim: Claim | None = None,
        *,
        recovered: Recovered | None = None,
        seen: int | None = None,
    ) -> list[DrainResult]:
        """Drive the session now, joining the active drain if there is one; wait for it.

        Cancelling the caller does not cancel the drain: a drain stops by interrupt only, so it
        always leaves its turn and claim consistent. `claim`, `recovered`, `seen`: as for `wake`.
        """
        return await asyncio.shield(self.wake(session_id, claim, recovered=recovered, seen=seen))

    def interrupt(self, session_id: str, request_id: int | None = None) -> bool:
        """Hard-interrupt local execution; return whether something was running.

        Unknown, idle or driven elsewhere: a no-op (False). No store call: this runs on the
        event loop (a signal handler, the server). `request_id` is the global id of the durable
        request this call applies, so the store watcher does not apply it a second time to a
        later turn.
        """
        current = self._active.get(session_id)
        if current is None or current.task.done():
            return False
        current.seen_request = max(current.seen_request, request_id or 0)
        current.applied = max(current.applied, request_id or 0)
        current.interrupt.set()
        return True

    def _newest_of(self, entry: _Active, setup: SessionSetup) -> None:
        """For a drain that has not read the newest global event id yet, that id as its
        context read it (`DriveReads.newest_event`; a context that does not say is followed by
        a read of it, in the context's worker thread), handed to the loop (`_seen`)."""
        if entry.seen_request != _UNREAD:
            return
        newest = setup.read.newest_event if setup.read is not None else None
        if newest is None:
            newest = self.store.feed.last_event_id()
        entry.task.get_loop().call_soon_threadsafe(self._seen, entry, newest)

    @staticmethod
    def _seen(entry: _Active, newest: int) -> None:
        """The drain `entry` read the newest global event id `newest` as it started (on the
        loop): requests up to it were for earlier drains; one the watcher kept for it
        (`early`) after it arms its next turn, unless `interrupt` applied it already."""
        if entry.seen_request != _UNREAD:
            return
        entry.seen_request = max(newest, entry.applied)
        later = [r for r in entry.early if r > entry.seen_request]
        entry.early.clear()
        if later:
            entry.seen_request = max(later)
            entry.interrupt.set()
        if not entry.read.done():
            entry.read.set_result(newest)

    async def _run(
        self, session_id: str, entry: _Active, claim: Claim | None, recovered: Recovered | None
    ) -> list[DrainResult]:
        results: list[DrainResult] = []
        idle_rechecks = 0
        try:
            while True:
                entry.again = False
                result = await drain(
                    self.store,
                    session_id,
                    self._contexts(session_id, entry, recovered),
                    self.leases,
                    self.options,
                    claim,
                    recovered,
                )
                claim, recovered = None, None
                results.append(result)
                if result.busy or result.claim_lost or result.shutdown:
                    return results
                if entry.again:
                    idle_rechecks = 0
                    continue
                if not await self._input_arrived(session_id, result):
                    return results
                idle_rechecks = idle_rechecks + 1 if not result.turns else 0
                if idle_rechecks > 1:  # nothing deliverable twice in a row: do not spin
                    return results
        finally:
            if self._active.get(session_id) is entry:
                del self._active[session_id]
            if not entry.read.done():  # read none: the watcher reads its own (`_watch`)
                entry.read.set_result(None)

    def _contexts(
        self, session_id: str, entry: _Active, recovered: Recovered | None
    ) -> Callable[[], SessionSetup]:
        """A drain's `make_context`: its first call builds the context from what the batch
        recovery read for it (`recovered.drive`, when it did), every later one (a move's
        rebinding, a refresh) reads the store; each tells the drain's entry the newest event
        id its read saw (`_newest_of`)."""
        seen = [recovered.drive] if recovered is not None and recovered.drive else []

        def make() -> SessionSetup:
            drive = seen.pop() if seen else None
            setup = self._make_context(session_id, entry.interrupt, drive)
            self._newest_of(entry, setup)
            return setup

        return make

    async def _input_arrived(self, session_id: str, result: DrainResult) -> bool:
        """Whether input is pending after a drain that ended by running out of input."""
        if result.turns and result.turns[-1].outcome in STOP_OUTCOMES:
            return False
        if result.pending is not None:  # looked at as the drain released its claim
            return result.pending
        return bool(await off_loop(self.store.pending, session_id))

    async def _newest_id(self) -> int | None:
        """The newest global event id, read off the loop (store faults waited out); None once
        this process drives nothing."""
        while self._active:
            try:
                return await off_loop(self.store.feed.last_event_id)
            except Exception as err:  # a store fault must not end the watcher: try again
                if not is_transient(err):
                    log.warning("interrupt watcher: %s: %s", type(err).__name__, err)
                await asyncio.sleep(self.options.poll_interval_ms / 1000)
        return None

    async def _watch(self, after_id: int | None, first: _Active) -> None:
        """Apply interrupts requested through the store to the drains of this process, those
        after `after_id` (None: after the newest event as the drain `first`, started with
        the watcher, read it as it began; or as read here, when that drain read none)."""
        if after_id is None:
            started: set[asyncio.Future[Any]] = {first.read, first.task}
            await asyncio.wait(started, return_when=asyncio.FIRST_COMPLETED)
            after_id = first.read.result() if first.read.done() else None
        if after_id is None:
            after_id = await self._newest_id()
        if after_id is None:
            return
        # Listening begins before the first read, so no request falls between the two.
        heard = await self._hear(0)
        if heard is None:
            await self._poll(after_id)
        else:
            await self._listen(after_id, heard)

    async def _hear(self, timeout_s: float) -> tuple[bool, list[tuple[int, str]]] | None:
        """The interrupt requests announced within `timeout_s` (`Feed.wait_for_interrupts`),
        waited for in a thread of the loop's executor; a failed wait counts as a fresh start
        (read the store). None: nothing is announced here (SQLite), poll."""
        try:
            return await wait_off_loop(self.store.feed.wait_for_interrupts, timeout_s)
        except Exception as err:  # a store fault must not end the watcher: read the store
            if not is_transient(err):
                log.warning("interrupt watcher: %s: %s", type(err).__name__, err)
            await asyncio.sleep(self.options.poll_interval_ms / 1000)
            return True, []

    async def _listen(self, after_id: int, heard: tuple[bool, list[tuple[int, str]]]) -> None:
        """Apply the requests announced as they are heard; read the store one wait after
        listening (re)started (a request committed before it began is applied as late as the
        poll applied it: a drain that ends sooner reads nothing), and every `SAFETY_POLL_S`
        for an announcement that was lost. A watcher started again while the store still
        listens owes no read: what was announced meanwhile waits in the listening connection.
        Each wait lasts at most a poll interval (and a second), so the watcher ends soon after
        the last drain."""
        wait_s = min(self.options.poll_interval_ms / 1000, 1.0)
        due: float | None = None  # (monotonic) when the read owed since listening began is due
        while self._active:
            fresh, requests = heard
            self._apply(requests)
            now = time.monotonic()
            if fresh and due is None:
                due = now + wait_s
            if (due is not None and now >= due) or now - self._read_at >= SAFETY_POLL_S:
                read = await self._read(after_id)
                if read is not None:
                    (after_id, requests), self._read_at, due = read, now, None
                    self._apply(requests)
            if not self._active:
                return
            heard = await self._hear(wait_s) or (True, [])

    async def _poll(self, after_id: int) -> None:
        """Read the requests committed since the last look once per poll interval (a store
        that announces none, SQLite)."""
        while self._active:
            await asyncio.sleep(self.options.poll_interval_ms / 1000)
            if not self._active:
                return
            read = await self._read(after_id)
            if read is not None:
                after_id, requests = read
                self._apply(requests)

    async def _read(self, after_id: int) -> tuple[int, list[tuple[int, str]]] | None:
        """`Feed.interrupts_after(after_id)` off the loop; None after a store fault (logged
        once per run of failures)."""
        try:
            read = await off_loop(self.store.feed.interrupts_after, after_id)
        except Exception as err:  # a store fault must not end the watcher: read again later
            if not self._failing and not is_transient(err):
                log.warning("interrupt watcher: %s: %s", type(err).__name__, err)
            self._failing = True
            return None
        self._failing = False
        return read

    def _apply(self, requests: list[tuple[int, str]]) -> None:
        """Stop the drains the requests (request id, session id) are for: those after what
        each drain had read as it began; kept for a drain that has not read that yet."""
        for request_id, session_id in requests:
            entry = self._active.get(session_id)
            if entry is not None and entry.seen_request == _UNREAD:
                entry.early.append(request_id)  # applied once it read the newest id
            elif entry is not None and request_id > entry.seen_request:
                entry.seen_request = request_id
                entry.interrupt.set()

    async def wait_idle(self) -> None:
        """Wait until every local drain has finished (and the store watcher with them)."""
        while tasks := [a.task for a in self._active.values() if not a.task.done()]:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None
        await self.leases.aclose()
