"""The store's logs, read to the end or followed: a session's (`log`, `plain_log`) and the
instance's (`log_all`), each a `SyncMarker` then live events when followed.

Invariant: following subscribes (`wait_for_change`, PostgreSQL's LISTEN) before it captures the
watermark it replays up to, so no event is missed or repeated, also when another process
writes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from ._records import SyncMarker

if TYPE_CHECKING:
    from ..events import PlainEvent, StoredEvent
    from ._backend import Backend
    from ._feed import Feed

_E = TypeVar("_E", bound="StoredEvent | PlainEvent")  # what a log yields: models or plain bodies


class FollowMixin:
    """The logs of `SqlStore` (see the module docstring)."""

    backend: Backend
    feed: Feed

    high_water: Callable[[str], int]  # `SqlStore.high_water`
    events: Callable[..., list[StoredEvent]]  # `SqlStore.events`
    plain_events: Callable[..., list[PlainEvent]]  # `SqlStore.plain_events`

    def log(
        self,
        session_id: str,
        after: int = 0,
        *,
        follow: bool = False,
        idle_timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[StoredEvent | SyncMarker]:
        """Yield durable events after `after`; with `follow`, a `SyncMarker` then live events.

        Following subscribes before replay (the watermark is captured after subscribing), so no
        event is missed or repeated, also when written by another process. It ends when `stop()`
        is true or nothing arrives for `idle_timeout_s`.
        """
        return self._log(self.events, session_id, after, follow, idle_timeout_s, stop)

    def plain_log(
        self,
        session_id: str,
        after: int = 0,
        *,
        follow: bool = False,
        idle_timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[PlainEvent | SyncMarker]:
        """`log` of `plain_events`: the same events, markers and follow contract."""
        return self._log(self.plain_events, session_id, after, follow, idle_timeout_s, stop)

    def _log(
        self,
        events: Callable[..., list[_E]],
        session_id: str,
        after: int,
        follow: bool,
        idle_timeout_s: float | None,
        stop: Callable[[], bool] | None,
    ) -> Iterator[_E | SyncMarker]:
        if follow:
            self.backend.wait_for_change(0)  # subscribe (LISTEN) before capturing the watermark
        watermark = self.high_water(session_id)
        last = after
        while last < watermark:
            batch = events(session_id, last, limit=1000)
            for ev in batch:
                if ev.seq > watermark:
                    break
                yield ev
                last = ev.seq
            if not batch:
                break
        if not follow:
            return
        last = max(last, watermark)
        yield SyncMarker(last)
        yield from self._follow(
            lambda after: events(session_id, after, limit=1000),
            last,
            lambda ev: ev.seq,
            idle_timeout_s,
            stop,
        )

    def log_all(
        self,
        after_id: int = 0,
        *,
        follow: bool = False,
        idle_timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[StoredEvent | SyncMarker]:
        """Instance-wide log over every session in its order (`events_since`); same follow
        contract as `log`. `after_id` is the id of the last event already seen."""
        if follow:
            self.backend.wait_for_change(0)
        at: list[int | None] = [after_id, None]  # (id, tx) of the last event read

        def fetch(_last: int) -> list[StoredEvent]:
            batch = self.feed.events_since(int(at[0] or 0), after_tx=at[1])
            if batch:
                at[:] = [batch[-1].id, batch[-1].tx]
            return batch

        while batch := fetch(0):
            yield from batch
        if not follow:
            return
        yield SyncMarker(int(at[0] or 0))
        yield from self._follow(fetch, 0, lambda ev: ev.id, idle_timeout_s, stop)

    def _follow(
        self,
        fetch: Callable[[int], list[_E]],
        start: int,
        key: Callable[[_E], int],
        idle_timeout_s: float | None,
        stop: Callable[[], bool] | None,
    ) -> Iterator[_E]:
        last = start
        idle_since = time.monotonic()
        while not (stop and stop()):
            batch = fetch(last)
            if batch:
                idle_since = time.monotonic()
                yield from batch
                last = key(batch[-1])
                continue
            if idle_timeout_s is not None and time.monotonic() - idle_since >= idle_timeout_s:
                return
            self.backend.wait_for_change(
                0.5 if idle_timeout_s is None else min(0.5, idle_timeout_s)
            )
