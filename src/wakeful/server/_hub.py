"""The hub: one poller of the instance-wide log that fans events out to every follower.

A hundred followers cost one cheap query per poll interval (`events_since`), not a hundred, and
each event is decoded and encoded once. Commits of this process nudge the poller at once; on
PostgreSQL a LISTEN thread nudges it on every commit of any process; otherwise (SQLite, other
processes) an event waits at most one poll interval. Live-only deltas of this process's runtime (streamed
text, tool progress) go to subscribers that asked for them; they are never replayed.

Invariant: a subscription is registered before its follower captures the replay watermark, and
from then on the hub delivers every event with a global id above the position it had at
registration. Replay plus queue therefore covers the log with no gap; duplicates are possible
and followers drop them by sequence. A subscriber whose queue overflows is marked `lagged` and
re-reads the store; it never silently loses an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ..events import StoredEvent
from ..execution import Reads, off_loop
from ..runner import LiveEvent
from ._redact import event_json

log = logging.getLogger("wakeful.server")


@dataclass(eq=False, slots=True)
class Packed:
    """A durable event with its JSON encodings (redacted and full), made once for all followers."""

    event: StoredEvent
    _redacted: str | None = None
    _full: str | None = None

    def data(self, sensitive: bool) -> str:
        """The SSE data of the event for a caller with or without the sensitive view."""
        if sensitive:
            if self._full is None:
                self._full = json.dumps(event_json(self.event, sensitive=True))
            return self._full
        if self._redacted is None:
            self._redacted = json.dumps(event_json(self.event, sensitive=False))
        return self._redacted


@dataclass(frozen=True, slots=True)
class Live:
    """A live-only delta as the hub queues it."""

    session_id: str
    data: str


@dataclass(eq=False)
class Subscription:
    """One follower's queue: every session (`session_id` None) or one session."""

    session_id: str | None
    live: bool
    queue: asyncio.Queue[Packed | Live]
    lagged: bool = False


@dataclass
class HubStats:
    """Counters for the benchmark and the health of the fan-out."""

    polls: int = 0
    events: int = 0
    lagged: int = 0
    subscribers: int = 0
    peak_subscribers: int = 0


@dataclass
class Hub:
    """See the module docstring. Start it inside the server's event loop."""

    reads: Reads
    poll_s: float = 0.01
    max_queue: int = 4096
    batch: int = 1000
    stats: HubStats = field(default_factory=HubStats)

    def __post_init__(self) -> None:
        self._subs: set[Subscription] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._unwatch: Callable[[], None] | None = None
        self.last_id = 0  # the last event dispatched, and its `tx` (its position)
        self.last_tx = 0

    async def start(self) -> None:
        """Begin at the current end of the log. Commits are watched for (on PostgreSQL, a
        LISTEN thread) only while someone follows: a NOTIFY nobody needs cost the server more
        CPU than the admission that sent it (docs/server.md, "Benchmark")."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.last_tx, self.last_id = await off_loop(self.reads.feed.last_event_position)
        self._task = asyncio.create_task(self._run(), name="wakeful-hub")

    async def stop(self) -> None:
        """Stop polling and listening."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._unwatch is not None:
            await off_loop(self._unwatch)
            self._unwatch = None

    def _committed(self) -> None:
        """A commit of some process was announced (PostgreSQL's NOTIFY): poll now if anyone
        follows, so the event need not wait for the next poll."""
        if self._subs:
            self.nudge()

    async def subscribe(self, session_id: str | None, *, live: bool = False) -> Subscription:
        """Register a follower; capture the replay watermark only after this returns."""
        if not self._subs:  # idle: the poller stopped advancing, so jump to the log's end
            newest = await off_loop(self.reads.feed.last_event_position)
            if not self._subs:  # still nobody whose position that jump could skip
                self.last_tx, self.last_id = max((self.last_tx, self.last_id), newest)
        sub = Subscription(session_id, live, asyncio.Queue(self.max_queue))
        self._subs.add(sub)
        if self._unwatch is None and self._task is not None:
            self._unwatch = self.reads.feed.watch_commits(self._committed)
        self.stats.subscribers = len(self._subs)
        self.stats.peak_subscribers = max(self.stats.peak_subscribers, len(self._subs))
        self._wake.set()
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget a follower."""
        self._subs.discard(sub)
        self.stats.subscribers = len(self._subs)

    def nudge(self) -> None:
        """Poll now (something was just committed in this process); safe from any thread.
        Nothing while nobody follows: a subscription wakes the poller itself."""
        if self._loop is None or not self._subs:
            return
        if threading.get_ident() == self._thread:
            self._wake.set()
        else:
            self._loop.call_soon_threadsafe(self._wake.set)

    def on_live(self, ev: LiveEvent) -> None:
        """The runtime's live listener: queue the delta for live subscribers; nudge the poller."""
        if self._loop is None:
            return
        if threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self.on_live, ev)
            return
        self._wake.set()  # a delta is emitted around durable writes: look for them now
        item: Live | None = None
        for sub in self._subs:
            if sub.live and sub.session_id in (None, ev.session_id) and not sub.lagged:
                if item is None:
                    body = {"session_id": ev.session_id, "kind": ev.kind, "data": ev.data}
                    item = Live(ev.session_id, json.dumps(body, default=str))
                with contextlib.suppress(asyncio.QueueFull):  # live deltas carry no guarantee
                    sub.queue.put_nowait(item)

    async def _run(self) -> None:
        while True:
            if not self._subs:
                if self._unwatch is not None:  # nobody follows: stop listening for commits
                    unwatch, self._unwatch = self._unwatch, None
                    await off_loop(unwatch)
                    if self._subs:  # someone subscribed meanwhile (and watches anew)
                        continue
                await self._wake.wait()
                self._wake.clear()
                continue
            self.stats.polls += 1
            batch = await off_loop(
                functools.partial(
                    self.reads.feed.events_since, self.last_id, self.batch, after_tx=self.last_tx
                )
            )
            for ev in batch:
                self._dispatch(Packed(ev))
            if batch:  # (batches come in position order, not necessarily id order)
                self.last_tx, self.last_id = batch[-1].position
                self.stats.events += len(batch)
            if len(batch) >= self.batch:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_s)
            self._wake.clear()

    def _dispatch(self, packed: Packed) -> None:
        sid = packed.event.session_id
        for sub in self._subs:
            if sub.session_id is not None and sub.session_id != sid:
                continue
            try:
                sub.queue.put_nowait(packed)
            except asyncio.QueueFull:
                if not sub.lagged:
                    self.stats.lagged += 1
                sub.lagged = True
