"""`GET /events` on PostgreSQL without a database-wide append lock (issue 24): writers in several
processes commit events out of id order (`tests/store/test_commit_order.py`); followers of the
SSE stream (the server's hub), one of which drops its connection and resumes with
`Last-Event-ID` midway, each see every event exactly once and each session's in `seq` order."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.pg import fresh_database
from tests.server.conftest import MakeServer
from tests.store.test_commit_order import WRITERS, _write, batch_sizes
from wakeful.client import ServerEvent, parse_sse

pytestmark = pytest.mark.postgres


def _follow(c: httpx.Client, total: int, *, drop_after: int | None = None) -> list[ServerEvent]:
    got: list[ServerEvent] = []
    last: str | None = None
    deadline = time.monotonic() + 40  # (a follower that skipped an event would wait forever)
    while sum(e.event == "message" for e in got) < total and time.monotonic() < deadline:
        headers = {"Accept": "text/event-stream"} | ({"Last-Event-ID": last} if last else {})
        params = {"follow": "true", "idle_timeout": 5}
        with c.stream("GET", "/events", params=params, headers=headers) as r:
            assert r.status_code == 200
            for ev in parse_sse(r.iter_lines()):
                if ev.event != "message":
                    continue
                got.append(ev)
                last = ev.id
                n = len(got)
                if n >= total or (drop_after is not None and n == drop_after):
                    break  # (a dropped connection: the loop resumes with Last-Event-ID)
        drop_after = None
    return got


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped after the server (set up before it) stopped."""
    with fresh_database() as url:
        yield url


def test_events_stream_sees_every_event_once_with_concurrent_writers(
    pg_url: str, make_server: MakeServer
) -> None:
    url = pg_url
    served = make_server(db=url)
    c = served.client()
    sids = [str(c.post("/sessions", json={}).json()["session"]["id"]) for _ in range(WRITERS)]
    with served.store.backend.transaction(write=False) as tx:
        row = tx.one("SELECT count(*) FROM events")
    total = int(row[0]) + sum(sum(batch_sizes(n)) for n in range(WRITERS))  # type: ignore[index]
    results: dict[str, list[ServerEvent]] = {}

    def follow(name: str, drop: int | None) -> None:
        results[name] = _follow(served.client(), total, drop_after=drop)

    followers = [
        threading.Thread(target=follow, args=("whole", None)),
        threading.Thread(target=follow, args=("resumed", total // 2)),
    ]
    for t in followers:
        t.start()
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(WRITERS)  # every writer at once (`_write` waits for the others)
    writers = [ctx.Process(target=_write, args=(url, sid, n, start)) for n, sid in enumerate(sids)]
    for p in writers:
        p.start()
    for p in writers:
        p.join()
        assert p.exitcode == 0
    for t in followers:
        t.join(60)
    with served.store.backend.transaction(write=False) as tx:
        every = {int(r[0]) for r in tx.all("SELECT id FROM events")}
        ordered = [int(r[0]) for r in tx.all("SELECT id FROM events ORDER BY tx, id")]
    assert len(every) == total
    assert sorted(results) == ["resumed", "whole"], "a follower did not get every event in time"
    for name, got in results.items():
        ids = [int(e.id or 0) for e in got]
        assert len(ids) == len(set(ids)), f"{name}: an event was repeated"
        assert set(ids) == every, f"{name}: {len(every - set(ids))} events were skipped"
        assert ids == ordered, f"{name}: not in the log's order"
        last: dict[str, int] = {}
        for ev in got:
            sid, seq = str(ev.data["session_id"]), int(ev.data["seq"])  # type: ignore[call-overload, index]
            assert seq == last.get(sid, 0) + 1, f"{name}: a session's events out of seq order"
            last[sid] = seq
    assert ordered != sorted(ordered), "nothing committed out of id order: the test proved nothing"
