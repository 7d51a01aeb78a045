"""The instance-wide log on PostgreSQL without a database-wide append lock (issue 24).

Writers in several processes append to their own sessions through the real append path, each
pausing inside its transaction after its event ids are reserved and its rows sent, so events
with larger ids often commit first. A follower of `log_all` must still see every event exactly
once and each session's events in `seq` order. A reader that takes "id greater than the last
seen" in id order fails this test (it skips the events committed late with smaller ids).
"""

from __future__ import annotations

import multiprocessing as mp
import random
import time
from typing import Any

import pytest

from tests.pg import fresh_database
from wakeful.events import SessionUpdated, StoredEvent
from wakeful.store import open_store
from wakeful.store._append import append_events

pytestmark = pytest.mark.postgres

WRITERS = 4
APPENDS = 60


def batch_sizes(seed: int) -> list[int]:
    """How many events each append of `_write(..., seed)` writes, in order."""
    rnd = random.Random(seed)
    return [rnd.randint(1, 3) for _ in range(APPENDS)]


def _write(url: str, session_id: str, seed: int, start: Any) -> None:
    rnd = random.Random(-1 - seed)  # the pauses (the sizes are `batch_sizes`, drawn apart)
    store = open_store(url)
    start.wait(60)  # every writer at once: spawned processes start seconds apart under load
    try:
        for i, size in enumerate(batch_sizes(seed)):
            events = [SessionUpdated(title=f"{seed}.{i}.{k}") for k in range(size)]
            with store.backend.transaction(write=True) as tx:
                # The transaction's id first (a write asks for it with its first statement),
                # then a pause before the append reserves its event ids: a transaction that
                # took its id first then often takes the larger event ids. (Sent together, as
                # the store's wire sends an append's statements, the id and the reservation
                # are taken back to back on the server, and that order almost never differs.)
                tx.one("SELECT 1")
                time.sleep(rnd.random() * 0.002)
                append_events(tx, session_id, events, int(time.time() * 1000))
                tx.one("SELECT 1")  # the ids are reserved and the rows written: now commit late
                time.sleep(rnd.random() * 0.01)
    finally:
        store.close()


def test_follower_sees_every_event_once_in_session_order_with_concurrent_writers() -> None:
    with fresh_database() as url:
        store = open_store(url)
        try:
            sids = [store.create_session().id for _ in range(WRITERS)]
            ctx = mp.get_context("spawn")
            start = ctx.Barrier(WRITERS)
            writers = [
                ctx.Process(target=_write, args=(url, sid, n, start)) for n, sid in enumerate(sids)
            ]
            seen: list[StoredEvent] = []
            for p in writers:
                p.start()

            def done() -> bool:
                if any(p.is_alive() for p in writers):
                    return False
                with store.backend.transaction(write=False) as tx:
                    row = tx.one("SELECT count(*) FROM events")
                return row is not None and len(seen) >= int(row[0])

            for item in store.log_all(follow=True, idle_timeout_s=30, stop=done):
                if isinstance(item, StoredEvent):
                    seen.append(item)
            for p in writers:
                p.join()
                assert p.exitcode == 0
            with store.backend.transaction(write=False) as tx:
                every = {int(r[0]) for r in tx.all("SELECT id FROM events")}
        finally:
            store.close()
    ids = [ev.id for ev in seen]
    assert len(ids) == len(set(ids)), "an event was repeated"
    assert set(ids) == every, f"{len(every - set(ids))} events were skipped"
    last: dict[str, int] = {}
    for ev in seen:
        assert ev.seq == last.get(ev.session_id, 0) + 1, "a session's events out of seq order"
        last[ev.session_id] = ev.seq
    assert ids != sorted(ids), "no event committed out of id order: the test proved nothing"
