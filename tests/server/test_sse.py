"""The log over SSE: ids are seqs, the sync marker, keep-alives, Last-Event-ID resume across a
burst (nothing lost, nothing repeated), the instance-wide stream and live deltas."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from tests.server.conftest import MakeServer, Served, script, wait_for
from wakeful.client import ServerEvent, parse_sse
from wakeful.store import open_store


def _read(
    c: httpx.Client,
    path: str,
    params: dict[str, object],
    headers: dict[str, str] | None = None,
    stop_after: int | None = None,
    out: list[ServerEvent] | None = None,
) -> list[ServerEvent]:
    """Read SSE events (pings included) into `out` until the stream ends or `stop_after`
    durable events arrived."""
    out = [] if out is None else out
    with c.stream("GET", path, params=params, headers=headers or {}) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for ev in parse_sse(r.iter_lines()):
            out.append(ev)
            if stop_after is not None and sum(e.event == "message" for e in out) >= stop_after:
                break  # closing the response drops the connection mid-stream
    return out


def _new_session(c: httpx.Client) -> str:
    return str(c.post("/sessions", json={}).json()["session"]["id"])


def test_follow_replays_then_sync_then_live_with_seq_ids(server: Served):
    c = server.client()
    sid = _new_session(c)
    c.post(f"/sessions/{sid}/prompt", json={"text": "one", "resume": False})
    got: list[ServerEvent] = []

    def follow() -> None:
        _read(c, f"/sessions/{sid}/log", {"follow": "true", "idle_timeout": 1.5}, out=got)

    t = threading.Thread(target=follow)
    t.start()
    wait_for(lambda: any(e.event == "sync" for e in got), what="the sync marker")
    c.post(f"/sessions/{sid}/prompt", json={"text": "two", "resume": False})
    t.join(10)
    durable = [e for e in got if e.event == "message"]
    sync = [e for e in got if e.event == "sync"]
    assert [int(e.id) for e in durable] == [e.data["seq"] for e in durable] == [1, 2, 3]  # type: ignore[arg-type]
    assert len(sync) == 1 and sync[0].data == {"seq": 2} and sync[0].id == "2"
    assert got.index(sync[0]) == 2  # replay (seq 1, 2), then the marker, then the live event
    assert any(e.event == "ping" for e in got)  # keep-alive every second in the tests


def test_reconnect_with_last_event_id_across_a_burst_loses_and_repeats_nothing(
    make_server: MakeServer, db_url: str
):
    server = make_server(db=db_url)  # both backends: the hub reads the instance log by id
    c = server.client()
    sid = _new_session(c)
    burst = 400
    writer = open_store(server.runtime.store.url)  # another connection, as another process

    def write() -> None:
        for i in range(burst):
            writer.admit(sid, None, "user", {"text": f"m{i}"})

    t = threading.Thread(target=write)
    t.start()
    seen: list[int] = []
    last: str | None = None
    reconnects = 0
    deadline = time.monotonic() + 60
    while len(seen) < burst + 1 or t.is_alive():
        assert time.monotonic() < deadline, f"stuck after {len(seen)} events"
        headers = {"Last-Event-ID": last} if last is not None else {}
        events = _read(
            c,
            f"/sessions/{sid}/log",
            {"follow": "true", "idle_timeout": 0.5},
            headers,
            stop_after=37,
        )
        for e in events:
            if e.event == "message":
                seen.append(e.data["seq"])
                last = e.id
        reconnects += 1
    t.join()
    writer.close()
    assert reconnects >= 10
    assert seen == list(range(1, burst + 2))  # session.created + every admission, in order, once


def test_after_and_last_event_id_pick_the_start(server: Served):
    c = server.client()
    sid = _new_session(c)
    for i in range(4):
        c.post(f"/sessions/{sid}/prompt", json={"text": f"{i}", "resume": False})
    evs = _read(c, f"/sessions/{sid}/log", {"after": 2}, {"Accept": "text/event-stream"})
    assert [e.data["seq"] for e in evs if e.event == "message"] == [3, 4, 5]
    evs = _read(
        c,
        f"/sessions/{sid}/log",
        {"after": 2},
        {"Accept": "text/event-stream", "Last-Event-ID": "4"},
    )
    assert [e.data["seq"] for e in evs if e.event == "message"] == [5]
    page = c.get(f"/sessions/{sid}/log", params={"after": 1, "limit": 2}).json()
    assert [e["seq"] for e in page["events"]] == [2, 3] and page["next_after"] == 3


def test_instance_stream_follows_every_session_by_global_id(server: Served):
    c = server.client()
    a, b = _new_session(c), _new_session(c)
    got: list[ServerEvent] = []
    start = c.get("/events", params={"limit": 1000}).json()["next_after"]

    def follow() -> None:
        _read(c, "/events", {"follow": "true", "after": start, "idle_timeout": 1.0}, out=got)

    t = threading.Thread(target=follow)
    t.start()
    wait_for(lambda: any(e.event == "sync" for e in got), what="the sync marker")
    c.post(f"/sessions/{a}/prompt", json={"text": "to a", "resume": False})
    c.post(f"/sessions/{b}/prompt", json={"text": "to b", "resume": False})
    t.join(10)
    durable = [e for e in got if e.event == "message"]
    assert [e.data["session_id"] for e in durable] == [a, b]
    assert [int(e.id) for e in durable] == [e.data["id"] for e in durable]  # type: ignore[arg-type]
    assert durable[0].data["id"] < durable[1].data["id"]


def test_live_deltas_stream_while_a_turn_runs(make_server: MakeServer, tmp_path: Path):
    slow = script(
        tmp_path,
        [{"match": ".", "replies": [{"text": "abcdefghij" * 6}]}],
        chunk_chars=6,
        chunk_delay_ms=15,
    )
    server = make_server(model=slow)
    c = server.client()
    sid = _new_session(c)
    got: list[ServerEvent] = []

    def follow() -> None:
        params = {"follow": "true", "live": "true", "idle_timeout": 1.0}
        _read(c, f"/sessions/{sid}/log", params, out=got)

    t = threading.Thread(target=follow)
    t.start()
    wait_for(lambda: any(e.event == "sync" for e in got), what="the sync marker")
    c.post(f"/sessions/{sid}/prompt", json={"text": "go"})
    t.join(15)
    text = "".join(
        e.data["data"].get("text", "")
        for e in got
        if e.event == "live" and e.data["kind"] == "text"
    )
    assert text == "abcdefghij" * 6
    assert all(e.id is None for e in got if e.event == "live")
    first_live = next(i for i, e in enumerate(got) if e.event == "live")
    added = next(
        i for i, e in enumerate(got) if e.event == "message" and e.data["type"] == "message.added"
    )
    assert first_live < added  # the text streamed before the durable message landed


def test_many_followers_each_see_every_event(server: Served):
    c = server.client()
    sid = _new_session(c)
    results: list[list[int]] = [[] for _ in range(20)]
    synced = [threading.Event() for _ in results]

    def follow(i: int) -> None:
        # (an idle timeout of 1 s ended followers between two prompts under load)
        params = {"follow": "true", "idle_timeout": 5.0}
        with (
            httpx.Client(base_url=server.url, headers=c.headers, timeout=30) as own,
            own.stream("GET", f"/sessions/{sid}/log", params=params) as r,
        ):
            for e in parse_sse(r.iter_lines()):
                if e.event == "sync":
                    synced[i].set()
                elif e.event == "message":
                    results[i].append(e.data["seq"])

    threads = [threading.Thread(target=follow, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for s in synced:
        assert s.wait(10)
    for i in range(50):
        c.post(f"/sessions/{sid}/prompt", json={"text": f"{i}", "resume": False})
    for t in threads:
        t.join(30)
    assert all(r == list(range(1, 52)) for r in results)
