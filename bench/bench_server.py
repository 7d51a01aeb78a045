"""The HTTP server's costs: admissions per second over HTTP against the store directly, and the
latency from an event's commit to its arrival at SSE followers.

    python bench/bench_server.py [--admissions N] [--concurrency C] [--followers F]
                                 [--events K] [--postgres ADMIN_URL] [--dir DIR] [--httpx]
                                 [--rounds R]

The server is a real `wakeful serve` process (uvicorn) on a free loopback port; the load comes
from this process over keep-alive connections. Measures:
- admissions/s: `POST /sessions/{id}/prompt` with `resume: false`, sequentially and with C
  requests in flight, next to `SqlStore.admit` called directly on a store of the same backend in
  the same run (same disk, same durability settings), interleaved in R rounds. The requests
  come from `RawClient` (prebuilt bytes on keep-alive connections), so the load generator's own
  CPU, on the same cores, hardly counts; `--httpx` adds the sequential figure through httpx.
  Beside them, two bounds: the direct admissions each through `asyncio.to_thread` (the thread
  hop that keeps the server's store calls off its event loop, without HTTP), and the floor, a
  bare ASGI app on the same uvicorn answering a constant (`floor_app`), under the same load:
  no HTTP admission beats it. CPU per admission: the direct loops', and the server process's
  sequential and in flight apart;
- commit -> SSE latency: F followers on one session's log (`follow=true`); this process commits
  K admissions straight to the store (as another process would), timing each commit's return,
  and every follower timestamps each event as it parses it (one clock, one process). Also the
  latency when the input is admitted through the server (POST sent -> event at the followers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg

from wakeful.client import AsyncClient
from wakeful.store import SqlStore, new_session_id, open_store

TOKEN = "bench-token-" + secrets.token_hex(8)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(db: str, workdir: Path) -> Iterator[tuple[str, int]]:
    """A `wakeful serve` process over `db`; yields its base URL and process id."""
    port = free_port()
    with _server(
        [
            sys.executable,
            "-m",
            "wakeful",
            "serve",
            "--port",
            str(port),
            "--token",
            TOKEN,
            "--db",
            db,
            "--log-level",
            "warning",
            "--no-recover",
            "--model",
            "local",
        ],
        port,
        workdir,
    ) as running:
        yield running


async def floor_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI app answering every request with a constant `AdmissionOut`-sized body after
    reading the request's: what uvicorn and httptools alone cost per request (`floor`)."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 202, "headers": _FLOOR_HEAD})
    await send({"type": "http.response.body", "body": _FLOOR_BODY})


_FLOOR_BODY = json.dumps(
    {
        "session_id": "ses_" + "0" * 26,
        "input_id": "in_" + "0" * 24,
        "created": True,
        "status": "pending",
        "turns": None,
    },
    separators=(",", ":"),
).encode()
_FLOOR_HEAD = [
    (b"content-length", str(len(_FLOOR_BODY)).encode()),
    (b"content-type", b"application/json"),
]


@contextmanager
def floor(workdir: Path) -> Iterator[tuple[str, int]]:
    """`floor_app` on uvicorn with the options `wakeful serve` gives it (httptools picked as
    there; no lifespan: nothing to start); yields its base URL and process id. Its rate is a
    ceiling for any HTTP admission on this machine with this load generator."""
    port = free_port()
    root = str(Path(__file__).resolve().parents[1])
    with _server(
        [
            sys.executable,
            "-c",
            "import sys, uvicorn; sys.path.insert(0, sys.argv[1]); "
            "uvicorn.run('bench.bench_server:floor_app', port=int(sys.argv[2]), "
            "log_level='warning', lifespan='off', timeout_graceful_shutdown=5)",
            root,
            str(port),
        ],
        port,
        workdir,
    ) as running:
        yield running


@contextmanager
def _server(command: list[str], port: int, workdir: Path) -> Iterator[tuple[str, int]]:
    """A server process on loopback `port`, started with `command`, once it answers."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"HOME": str(workdir), "XDG_CONFIG_HOME": str(workdir / ".config")}
    proc = subprocess.Popen(
        command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code in (200, 202):
                break
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{command[1:3]} did not start: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
        time.sleep(0.05)
    try:
        yield url, proc.pid
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- admissions ----------------------------------------------------------------------------


async def http_admissions(url: str, n: int, concurrency: int) -> float:
    """Admissions per second through the API with `concurrency` requests in flight."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, headers=AUTH, limits=limits, timeout=60) as c:
        sid = (await c.post("/sessions", json={})).json()["session"]["id"]
        body = {"text": "benchmark input", "resume": False}
        await c.post(f"/sessions/{sid}/prompt", json=body)  # warm the connection and the path
        todo = iter(range(n))

        async def worker() -> None:
            for _ in todo:
                r = await c.post(f"/sessions/{sid}/prompt", json=body)
                r.raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return n / (time.perf_counter() - start)


class RawClient:
    """A keep-alive HTTP/1.1 connection that sends one prebuilt request at a time and reads
    the response by its Content-Length: a load generator costing a few microseconds per
    request, so the figure is the server's (httpx spends ~1 ms of CPU per request on the same
    two cores; `--httpx` measures with it too)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url: str) -> RawClient:
        """A connection to `url`'s host and port."""
        host, port = url.removeprefix("http://").split(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        """Send `raw` (a whole request); the response's status and body."""
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        """Close the connection."""
        self.writer.close()


def prompt_request(url: str, sid: str) -> bytes:
    """The bytes of one `POST /sessions/{sid}/prompt` with `resume: false`, keep-alive."""
    body = json.dumps({"text": "benchmark input", "resume": False}).encode()
    host = url.removeprefix("http://")
    return (
        f"POST /sessions/{sid}/prompt HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def new_session(url: str) -> str:
    """A new session's id, created through the API."""
    return str(httpx.post(f"{url}/sessions", json={}, headers=AUTH).json()["session"]["id"])


async def raw_admissions(url: str, sid: str, n: int, concurrency: int) -> float:
    """Admissions per second into session `sid` through the API with `concurrency`
    connections in flight, each a `RawClient`."""
    raw = prompt_request(url, sid)
    conns = [await RawClient.open(url) for _ in range(concurrency)]
    for conn in conns:  # warm each connection and the path
        assert (await conn.request(raw))[0] == 202
    todo = iter(range(n))

    async def worker(conn: RawClient) -> None:
        for _ in todo:
            status, body = await conn.request(raw)
            if status != 202:
                raise SystemExit(f"admission failed: {status} {body[:200]!r}")

    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    rate = n / (time.perf_counter() - start)
    for conn in conns:
        conn.close()
    return rate


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time process `pid` has used so far (Linux `/proc`; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def direct_admissions(store: SqlStore, sid: str, n: int) -> float:
    """Admissions per second into `sid` calling the store in process (one input per
    transaction)."""
    start = time.perf_counter()
    for _ in range(n):
        store.admit(sid, None, "user", {"text": "benchmark input"})
    return n / (time.perf_counter() - start)


async def hopped_admissions(store: SqlStore, sid: str, n: int) -> float:
    """`direct_admissions` with each call in a worker thread from an event loop, as the
    server makes it (`asyncio.to_thread`): what one admission after another costs with the
    thread hop that keeps store calls off the event loop, and no HTTP."""
    start = time.perf_counter()
    for _ in range(n):
        await asyncio.to_thread(store.admit, sid, None, "user", {"text": "benchmark input"})
    return n / (time.perf_counter() - start)


# -- commit -> SSE latency ---------------------------------------------------------------------


class Followers:
    """F SSE followers of one session, each timestamping every event it parses."""

    def __init__(self, url: str, sid: str, count: int) -> None:
        self.url, self.sid, self.count = url, sid, count
        self.arrivals: list[dict[int, float]] = [{} for _ in range(count)]
        self.synced = 0
        self.ready = threading.Event()

    async def _one(self, i: int) -> None:
        async with AsyncClient(self.url, TOKEN, stream_read_timeout=60) as client:
            async for ev in client.log(self.sid, idle_timeout=3):
                if ev.event == "sync":
                    self.synced += 1
                    if self.synced == self.count:
                        self.ready.set()
                elif ev.event == "message":
                    self.arrivals[i][ev.data["seq"]] = time.perf_counter()

    def run(self) -> None:
        """Follow until every stream ends (idle timeout); call from its own thread."""

        async def main() -> None:
            await asyncio.gather(*(self._one(i) for i in range(self.count)))

        asyncio.run(main())


def percentiles(samples: list[float]) -> str:
    """p50, p95, p99 and max of `samples` (seconds) in milliseconds."""
    ms = sorted(s * 1000 for s in samples)
    q = statistics.quantiles(ms, n=100)
    return f"p50 {q[49]:.1f} ms  p95 {q[94]:.1f} ms  p99 {q[98]:.1f} ms  max {ms[-1]:.1f} ms"


def latency(
    url: str, db: str, followers: int, events: int, spacing_s: float
) -> tuple[tuple[str, str, str], int]:
    """Commit -> arrival at every follower and at the first one (direct commits), and POST sent
    -> arrival (admitted through the server)."""
    with httpx.Client(base_url=url, headers=AUTH) as c:
        sid = c.post("/sessions", json={}).json()["session"]["id"]
        group = Followers(url, sid, followers)
        thread = threading.Thread(target=group.run)
        thread.start()
        if not group.ready.wait(60):
            raise SystemExit("the followers did not all sync")
        writer = open_store(db)
        commits: dict[int, float] = {}
        for _ in range(events):
            adm = writer.admit(sid, None, "user", {"text": "tick"})
            commits[adm.item.seq] = time.perf_counter()
            time.sleep(spacing_s * random.uniform(0.5, 1.5))  # no phase lock with the poll
        writer.close()
        posts: dict[int, float] = {}
        for _ in range(events):
            sent = time.perf_counter()
            out = c.post(f"/sessions/{sid}/prompt", json={"text": "tock", "resume": False}).json()
            posts[out["input_id"]] = sent
            time.sleep(spacing_s * random.uniform(0.5, 1.5))
        seq_of = {i.input_id: i.seq for i in open_store(db).pending(sid)}
        thread.join(120)
    direct = [a[s] - t for a in group.arrivals for s, t in commits.items() if s in a]
    via_http = [
        a[seq_of[i]] - t for a in group.arrivals for i, t in posts.items() if seq_of[i] in a
    ]
    first = [min(a[s] for a in group.arrivals if s in a) - t for s, t in commits.items()]
    expected = followers * events * 2
    missing = expected - len(direct) - len(via_http)
    return (percentiles(direct), percentiles(first), percentiles(via_http)), missing


# -- main ------------------------------------------------------------------------------------


def run(db: str, direct_db: str, args: argparse.Namespace, workdir: Path, label: str) -> None:
    """Every measure on one backend: `db` is served, `direct_db` takes the direct admissions."""
    with serve(db, workdir) as (url, pid), floor(workdir) as (floor_url, _):
        # Interleaved in rounds, so the disk's and the machine's drift hits every measure alike.
        # CPU per admission too (the direct loop's, the server process's in each HTTP run):
        # on a busy shared machine it drifts less than the rates.
        per = max(1, args.admissions // args.rounds)
        c = args.concurrency
        store = open_store(direct_db)
        direct_sid = store.create_session(new_session_id()).id
        seq_sid, conc_sid = new_session(url), new_session(url)
        spent = dict.fromkeys(("direct", "hopped", "seq", "conc", "httpx", "floor1", "floorc"), 0.0)
        cpu = dict.fromkeys(("direct", "hopped", "seq", "conc"), 0.0)
        for _ in range(args.rounds):
            before = time.process_time()
            spent["direct"] += per / direct_admissions(store, direct_sid, per)
            cpu["direct"] += time.process_time() - before
            before = time.process_time()
            spent["hopped"] += per / asyncio.run(hopped_admissions(store, direct_sid, per))
            cpu["hopped"] += time.process_time() - before
            before = cpu_seconds(pid)
            spent["seq"] += per / asyncio.run(raw_admissions(url, seq_sid, per, 1))
            cpu["seq"] += cpu_seconds(pid) - before
            before = cpu_seconds(pid)
            spent["conc"] += per / asyncio.run(raw_admissions(url, conc_sid, per, c))
            cpu["conc"] += cpu_seconds(pid) - before
            spent["floor1"] += per / asyncio.run(raw_admissions(floor_url, seq_sid, per, 1))
            spent["floorc"] += per / asyncio.run(raw_admissions(floor_url, seq_sid, per, c))
            if args.httpx:
                spent["httpx"] += per / asyncio.run(http_admissions(url, per, 1))
        store.close()
        n = per * args.rounds
        served = {"direct": n, "hopped": n, "seq": n + args.rounds, "conc": n + args.rounds * c}
        cpu_us = {k: cpu[k] / served[k] * 1e6 for k in cpu}
        direct, hopped, seq, conc, seq_httpx, floor1, floorc = (
            n / t if t else 0.0 for t in spent.values()
        )
        (commit_lat, first_lat, post_lat), missing = latency(
            url, db, args.followers, args.events, 0.02
        )
    print(f"\n[{label}]")
    print(f"admissions/s, direct SqlStore.admit:        {direct:8.0f}")
    print(
        f"admissions/s, direct, each in a thread hop:  {hopped:8.0f}  ({hopped / direct:.2f}x direct)"
    )
    print(f"admissions/s, HTTP sequential:               {seq:8.0f}  ({seq / direct:.2f}x direct)")
    print(
        f"admissions/s, HTTP {c:>2} in flight:            {conc:8.0f}  ({conc / direct:.2f}x direct)"
    )
    if args.httpx:
        print(
            f"admissions/s, HTTP sequential, httpx client: {seq_httpx:8.0f}  ({seq_httpx / direct:.2f}x direct)"
        )
    print(
        f"floor, bare uvicorn app answering a constant, sequential: {floor1:6.0f}/s  ({floor1 / direct:.2f}x direct; HTTP sequential is {seq / floor1:.2f}x it)"
    )
    print(
        f"floor, bare uvicorn app answering a constant, {c:>2} in flight: {floorc:6.0f}/s  ({floorc / direct:.2f}x direct; HTTP in flight is {conc / floorc:.2f}x it)"
    )
    print(
        f"CPU per admission: direct {cpu_us['direct']:.0f} us, in a thread hop {cpu_us['hopped']:.0f} us; server process, sequential {cpu_us['seq']:.0f} us, {c} in flight {cpu_us['conc']:.0f} us"
    )
    print(f"commit -> SSE arrival, {args.followers} followers, {args.events} events: {commit_lat}")
    print(f"commit -> SSE arrival at the first of them:             {first_lat}")
    print(f"POST sent -> SSE arrival, {args.followers} followers, {args.events} events: {post_lat}")
    print(f"events missing at followers: {missing}")


def main() -> None:
    """Parse the options and run SQLite (and PostgreSQL when asked)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admissions", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--followers", type=int, default=100)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--postgres", metavar="ADMIN_URL", default=None)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--httpx", action="store_true", help="also admit through httpx")
    parser.add_argument("--rounds", type=int, default=5, help="admission rounds, interleaved")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        work = Path(tmp)
        (work / ".git").mkdir()
        run(str(work / "served.db"), str(work / "direct.db"), args, work, "sqlite")
        if args.postgres:
            base = args.postgres.rsplit("/", 1)[0]
            names = [f"wakeful_bench_{secrets.token_hex(4)}" for _ in range(2)]
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                for name in names:
                    conn.execute(f'CREATE DATABASE "{name}"')
            try:
                run(f"{base}/{names[0]}", f"{base}/{names[1]}", args, work, "postgresql")
            finally:
                with psycopg.connect(args.postgres, autocommit=True) as conn:
                    for name in names:
                        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
