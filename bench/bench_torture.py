"""The crash-torture run of docs/reliability.md: SIGKILLed drivers, a worker stopped past its
lease, and store faults, on SQLite and PostgreSQL; the invariants checked from the tables after.

    python bench/bench_torture.py [--kills N] [--seed S] [--backends sqlite,postgres]
                                  [--postgres ADMIN_URL]        (also: make torture)

Per backend: two long-lived `wakeful worker` processes share a fresh store with drivers
(`wakeful run --session` or `wakeful worker --once`) that are SIGKILLed at a random moment,
until N drivers were killed. Every fifth driver, one of the long-lived workers is SIGSTOPped
for one and a half of its leases (another driver takes its sessions over; its writes are fenced
when it wakes) and then continued; after every fourth, one of them is SIGKILLed (with claims in
hand, most likely mid-turn) and a new one started in its place. Meanwhile, at random moments, the store misbehaves: another
process holds SQLite's write lock for 6 s (past the 5 s busy timeout), or the PostgreSQL server
ends every connection of the store. The jobs' tool calls append to a ledger file.

Afterwards, when every input is settled, the invariants are checked from the tables
(`wakeful._checks.check_session`, the one check the crash and fault tests use): every input
delivered exactly once, no message stored twice, no tool side effect run twice (the ledger),
every completed call's side effects present, no call left running, every turn terminal, `seq`
gap-free, fencing epochs never decreasing, the transcript wire-valid as persisted; then both
workers must still run and exit 0 on SIGTERM without a traceback. Each violation is an anomaly;
the script prints one row per backend and exits 1 when any anomaly was found. The seed of each
backend is printed; `--seed` replays a run's choices (not its timing).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import secrets
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import psycopg

from wakeful._checks import check_session, create_session, job_script, kill_after, ledger_lines
from wakeful.errors import StoreError
from wakeful.events import ToolCallEnded
from wakeful.store import SqlStore, open_store

DEFAULT_PG = os.environ.get("WAKEFUL_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
WAKEFUL = str(Path(sys.executable).with_name("wakeful"))
T = TypeVar("T")
SESSIONS = [f"ses_tort{i}" for i in range(3)]
LEASE_MS = 3_000
STARTUP_S = 15.0  # what a `wakeful worker` may take to start on a loaded 2-core machine
WORKSPACE_TOML = (
    "[retry]\ninitial_delay_ms = 40\nmax_delay_ms = 400\npoll_interval_ms = 10\n"
    f"[execution]\nlease_ms = {LEASE_MS}\npoll_interval_ms = 20\n"
    '[permissions]\nshell = "allow"\n'
)


@dataclass
class Row:
    """What one backend's run did and found."""

    backend: str
    seed: int
    kills: int = 0  # drivers SIGKILLed
    worker_kills: int = 0  # long-lived workers SIGKILLed (and replaced), claims in hand
    runs: int = 0
    stops: int = 0
    faults: int = 0
    drains: int = 0  # claims taken (distinct fencing epochs that wrote)
    settled: int = 0  # tool calls a later drain settled as possibly run (partial: driver died)
    turns: int = 0
    ledger: int = 0
    seconds: float = 0.0
    anomalies: list[str] = field(default_factory=list)


def patiently(fn: Callable[[], T]) -> T:
    """This script's own store calls wait out the faults it causes, as a worker would."""
    while True:
        try:
            return fn()
        except StoreError as err:
            if not err.retryable:
                raise
            time.sleep(0.2)


class Torment:
    """A thread doing `hurt()` at random moments until stopped; counts the faults caused."""

    def __init__(self, rng: random.Random, pause: tuple[float, float], hurt: Callable[[], int]):
        self.rng, self.pause, self.hurt = rng, pause, hurt
        self.faults = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.rng.uniform(*self.pause)):
            self.faults += self.hurt()

    @contextmanager
    def running(self) -> Iterator[Torment]:
        """Torment while the block runs."""
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=60)


def hold_sqlite_lock(db: str) -> Callable[[], int]:
    """Hold SQLite's write lock for 6 s, past the store's 5 s busy timeout."""

    def hurt() -> int:
        conn = sqlite3.connect(db, isolation_level=None, timeout=60)
        try:
            conn.execute("BEGIN IMMEDIATE")
            time.sleep(6.0)
            conn.execute("COMMIT")
        finally:
            conn.close()
        return 1

    return hurt


def end_pg_connections(admin_url: str, name: str) -> Callable[[], int]:
    """End every connection of the database `name` (`pg_terminate_backend`)."""

    def hurt() -> int:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            ).fetchall()
        return 1 if rows else 0

    return hurt


def _env(db: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("WAKEFUL_CRASH_AT", None)
    return env | {
        "WAKEFUL_DB": db,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local"),
    }


def _start(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [WAKEFUL, *args],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


class Workers:
    """The two long-lived `wakeful worker` processes, their output in files (a pipe nobody
    reads would fill and stop them); one killed is replaced by a new one."""

    def __init__(self, env: dict[str, str], work: Path, logs: Path) -> None:
        self.env, self.work, self.logs = env, work, logs
        self.started = 0
        self.procs = [self._new(), self._new()]

    def _new(self) -> subprocess.Popen[str]:
        self.started += 1
        self.last_start = time.monotonic()
        log = (self.logs / f"worker-{self.started}.log").open("w")
        with log:
            return subprocess.Popen(
                [WAKEFUL, "worker"],
                cwd=self.work,
                env=self.env,
                text=True,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def kill_one(self, i: int) -> None:
        """SIGKILL worker `i` (claims in hand, mid-turn most likely) and start another."""
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()
        self.procs[i] = self._new()

    def alive(self) -> bool:
        """Whether both current workers still run."""
        return all(p.poll() is None for p in self.procs)

    def stop(self, row: Row) -> None:
        """SIGTERM both (continued first); each must exit 0 without a traceback. A worker
        is given `STARTUP_S` from its start first: Python's default handler ends a process
        SIGTERMed before the worker has installed its own (exit 143, nothing lost)."""
        time.sleep(max(0.0, self.last_start + STARTUP_S - time.monotonic()))
        for w in self.procs:
            if w.poll() is None:
                w.send_signal(signal.SIGCONT)
                w.send_signal(signal.SIGTERM)
        for w in self.procs:
            try:
                w.wait(timeout=60)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
                row.anomalies.append("a worker did not stop within 60 s of SIGTERM")
            if w.returncode != 0:
                row.anomalies.append(f"a worker exited {w.returncode} on SIGTERM")
        for n in range(1, self.started + 1):
            out = (self.logs / f"worker-{n}.log").read_text(errors="replace")
            if "Traceback" in out or "never retrieved" in out:
                row.anomalies.append(f"worker {n} printed a traceback: {out.strip()[-200:]}")


def _settled(store: SqlStore) -> bool:
    return all(
        not store.pending(s) and all(t.status != "running" for t in store.turns(s))
        for s in SESSIONS
    )


def _wait_settled(store: SqlStore, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not patiently(lambda: _settled(store)):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _drive(
    row: Row,
    store: SqlStore,
    rng: random.Random,
    kills: int,
    env: dict[str, str],
    work: Path,
    model: str,
    workers: Workers,
) -> None:
    """Start and SIGKILL drivers until `kills` were killed; every fifth run a worker is
    SIGSTOPped past its lease meanwhile, every fourth one of them is SIGKILLed after it."""
    tags = iter(f"T{i}" for i in range(100_000))
    for sid in SESSIONS:
        create_session(store, sid, model, [f"job {next(tags)}" for _ in range(2)], workspace=work)
    while row.kills < kills:
        sid = rng.choice(SESSIONS)
        for _ in range(max(3 - len(patiently(partial(store.pending, sid))), 0)):
            patiently(partial(create_session, store, sid, model, [f"job {next(tags)}"]))
        stopped = workers.procs[rng.randrange(2)] if row.runs % 5 == 4 else None
        if stopped is not None:  # paused past its lease while this driver runs
            stopped.send_signal(signal.SIGSTOP)
            row.stops += 1
        args = ["run", "--session", sid] if rng.random() < 0.6 else ["worker", "--once"]
        proc = _start(args, env, work)
        row.kills += kill_after(proc, rng.uniform(0.3, 2.0))
        proc.communicate()
        row.runs += 1
        if stopped is not None:
            time.sleep(max(0.0, LEASE_MS * 1.5 / 1000 - 1.0))
            stopped.send_signal(signal.SIGCONT)
        if row.runs % 4 == 3:
            workers.kill_one(rng.randrange(2))
            row.worker_kills += 1
        if not workers.alive():
            row.anomalies.append("a worker died during the run")
            return


def _check(row: Row, store: SqlStore, work: Path) -> None:
    """The invariants, read from the tables; each violation is an anomaly."""
    ledger = ledger_lines(work)
    row.ledger = sum(ledger.values())
    totals: Counter[str] = Counter()
    for sid in SESSIONS:
        try:
            totals.update(check_session(store, sid, ledger))
        except AssertionError as err:
            row.anomalies.append(f"{sid}: {str(err).splitlines()[0][:300]}")
        with store.backend.transaction(write=False) as tx:
            epochs = tx.all(
                "SELECT DISTINCT epoch FROM events WHERE session_id = ? AND epoch IS NOT NULL",
                (sid,),
            )
        row.drains += len(epochs)
        for e in store.events(sid, types=["tool.ended"]):
            if isinstance(e.event, ToolCallEnded) and e.event.partial:
                row.settled += 1
    row.turns = totals["turns"]


def run_backend(
    backend: str,
    db: str,
    hurt: Callable[[], int],
    pause: tuple[float, float],
    kills: int,
    seed: int,
    root: Path,
) -> Row:
    """One backend's torture run in `root` on the (empty) store `db`."""
    row = Row(backend, seed)
    rng = random.Random(seed)
    work = root / "work"
    (work / ".git").mkdir(parents=True)
    (work / "wakeful.toml").write_text(WORKSPACE_TOML)
    model = job_script(root / "script.json", [f"T{i}" for i in range(30 * kills + 30)])
    env = _env(db, root)
    store = open_store(db)
    started = time.monotonic()
    workers = Workers(env, work, root)
    try:
        with Torment(rng, pause, hurt).running() as torment:
            _drive(row, store, rng, kills, env, work, model, workers)
        row.faults = torment.faults
        if not _wait_settled(store, timeout=300):
            row.anomalies.append("inputs still pending or turns running 300 s after the last kill")
        if not workers.alive() and not row.anomalies:
            row.anomalies.append("a worker died")
        _check(row, store, work)
    finally:
        workers.stop(row)
        store.close()
    row.seconds = time.monotonic() - started
    return row


def _sqlite(kills: int, seed: int) -> Row:
    with tempfile.TemporaryDirectory(prefix="wakeful-torture-") as tmp:
        db = str(Path(tmp) / "sessions.db")
        open_store(db).close()
        return run_backend("sqlite", db, hold_sqlite_lock(db), (1.0, 6.0), kills, seed, Path(tmp))


def _postgres(kills: int, seed: int, admin_url: str) -> Row:
    name = f"wakeful_torture_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = f"{admin_url.rsplit('/', 1)[0]}/{name}"
        with tempfile.TemporaryDirectory(prefix="wakeful-torture-") as tmp:
            hurt = end_pg_connections(admin_url, name)
            return run_backend("postgres", url, hurt, (0.3, 3.0), kills, seed, Path(tmp))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


COLUMNS = [
    ("backend", "backend"),
    ("seed", "seed"),
    ("runs", "drivers"),
    ("kills", "drivers SIGKILLed"),
    ("worker_kills", "workers SIGKILLed"),
    ("stops", "SIGSTOPs"),
    ("faults", "store faults"),
    ("drains", "claims taken"),
    ("settled", "calls settled after a kill"),
    ("turns", "turns"),
    ("ledger", "side effects"),
    ("anomalies", "anomalies"),
    ("seconds", "seconds"),
]


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table (docs/reliability.md prints the same)."""
    cells = [[h for _k, h in COLUMNS]]
    for r in rows:
        values = {**vars(r), "anomalies": len(r.anomalies), "seconds": f"{r.seconds:.0f}"}
        cells.append([str(values[k]) for k, _h in COLUMNS])
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    lines = [
        "| " + " | ".join(c[i].ljust(widths[i]) for i in range(len(widths))) + " |" for c in cells
    ]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)


def main() -> int:
    """Run the backends asked for; print the table and any anomaly; 1 when there was one."""
    for noisy in ("psycopg.pool", "wakeful"):  # this process's own store hit by the faults
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=30, help="drivers SIGKILLed per backend")
    parser.add_argument("--seed", type=int, default=None, help="replay a run's choices")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--postgres", metavar="ADMIN_URL", default=DEFAULT_PG)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rows = []
    for i, backend in enumerate(b.strip() for b in args.backends.split(",")):
        print(f"{backend}: seed {seed + i}, {args.kills} kills ...", flush=True)
        if backend == "sqlite":
            rows.append(_sqlite(args.kills, seed + i))
        elif backend == "postgres":
            rows.append(_postgres(args.kills, seed + i, args.postgres))
        else:
            parser.error(f"unknown backend {backend!r} (sqlite, postgres)")
    print(table(rows))
    for r in rows:
        for anomaly in r.anomalies:
            print(f"anomaly ({r.backend}, seed {r.seed}): {anomaly}")
    return 1 if any(r.anomalies for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
