"""Execution benchmarks: crash recovery by one worker, and many sessions driven by one process.

1. Recovery: N sessions are left as a crashed driver leaves them (an open turn whose newest
   reply has a tool call still `running`, and a claim held by a dead process on this host).
   One `wakeful worker --once` process recovers them all: it takes each claim over, fails the
   running call, appends the continuation, runs one more step and releases. Reported: wall
   time of the worker process (start-up included) and sessions recovered per second.
2. Concurrency: M sessions, each with one input answered in three steps (two work-state tool
   calls and a final text), driven by one process. Reported for one session at a time and for
   all at once, without and with a simulated provider latency (`chunk_delay_ms` per chunk),
   with the driving process's CPU per step. On PostgreSQL each timed phase starts after a
   `VACUUM ANALYZE` (see `vacuum`).

    python bench/bench_execution.py [--orphans 1000] [--sessions 200] [--db URL]
        [--baseline-src DIR [--baseline-db URL]] [--rounds N]

Without `--db` a fresh SQLite file in a temporary directory is used; a `postgresql://` URL
should name an empty database. `--baseline-src DIR` runs the recovery a second time, right
after, with the worker of another source tree (`DIR/src` first on `PYTHONPATH`, e.g. a
`git worktree` of the commit before a change) over the same kind of orphans in a fresh store
(`--baseline-db`, another empty database, for PostgreSQL), and prints both figures;
`--rounds N` alternates the two N times and prints the medians. With `--rounds` above 1 the
PostgreSQL databases are dropped and created again between rounds: name ones made for it.

Each side's orphans are made by its own tree's code (the baseline's in a subprocess): a tree
that adds a migration can be compared with one whose worker would refuse the newer schema.
Each worker imports wakeful from a copy of its tree's package in the temporary directory with
the bytecode compiled before the first timed run, as installing a package does (the trees are
not written to): with `PYTHONDONTWRITEBYTECODE=1` in the environment, as on the machine these
figures come from, every worker started from a source tree compiled wakeful (~0.1-0.2 s). On PostgreSQL the figures also give the
CPU per session of the server processes serving the bench's database (read from `/proc`
while the worker runs, when the server runs on this machine) and its commits per session
(`pg_stat_database.xact_commit`, with the worker's polls).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# Run as `python bench/bench_execution.py` from a clean clone: its own directory's parent holds
# the `bench` package (the statement counter); wakeful comes from the project's environment.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._count import UNITS, figures, install  # noqa: E402
from bench._counting import counting_env, per, total  # noqa: E402
from bench._trees import compiled_copy, tree_env  # noqa: E402
from wakeful.config import Config, ExecutionConfig  # noqa: E402
from wakeful.events import MessageAdded, SessionCreated, ToolCallStarted  # noqa: E402
from wakeful.execution import Runtime  # noqa: E402
from wakeful.execution._owner import host_id  # noqa: E402
from wakeful.execution._writes import promote_idle  # noqa: E402
from wakeful.messages import Message, ToolCallBlock  # noqa: E402
from wakeful.store import fence, open_store  # noqa: E402

WAKEFUL = str(Path(sys.executable).with_name("wakeful"))


def write_script(path: Path, *, delay_ms: int) -> str:
    """Three steps per input: two goal_set calls, then a short answer."""
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "bench"}}]}
    rules = [{"match": ".", "replies": [call, call, {"text": "done and recovered"}]}]
    path.write_text(json.dumps({"rules": rules, "chunk_delay_ms": delay_ms, "chunk_chars": 8}))
    return f"scripted:{path}"


def orphan(db: str, model: str, workspace: Path, count: int) -> list[str]:
    """Leave `count` sessions as a SIGKILLed driver would; return their ids."""
    store = open_store(db)
    dead = f"{host_id()}/{os.getpid()}/not-this-process"
    sids = [f"ses_orphan_{n:05d}" for n in range(count)]
    created = SessionCreated(agent="build", model=model, metadata={"workspace": str(workspace)})
    for sid in sids:
        store.admit(sid, None, "user", {"text": "work"}, create=created)
        claim = store.claims.acquire(sid, dead, lease_ms=3_600_000)
        assert claim is not None
        token = fence(claim)
        promote_idle(store, sid, token, start_turn=f"turn_{sid}")
        call = ToolCallBlock(id="call_0", name="goal_set", input={"goal": "bench"})
        reply = Message(id=f"msg_{sid}", role="assistant", blocks=(call,))
        store.append(
            sid,
            [
                MessageAdded(message=reply, turn_id=f"turn_{sid}"),
                ToolCallStarted(call_id="call_0", message_id=reply.id, name="goal_set", input={}),
            ],
            token,
        )
    store.close()
    return sids


def orphan_with(path: str | None, db: str, model: str, work: Path, count: int) -> list[str]:
    """`orphan`, by the code at `path` (in a subprocess, see `tree_env`) when given: its store,
    its schema (a baseline's worker refuses a newer one)."""
    if path is None:
        return orphan(db, model, work, count)
    code = (
        "import json, sys; from pathlib import Path; from bench.bench_execution import orphan; "
        "print(json.dumps(orphan(sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))))"
    )
    env = tree_env(path)
    env["PYTHONPATH"] += os.pathsep + str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", code, db, model, str(work), str(count)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    sids: list[str] = json.loads(done.stdout)
    return sids


class ServerCpu:
    """The CPU time of the PostgreSQL server processes serving database `db` while it runs,
    sampled from `/proc` (so only when the server runs on this machine; 0 otherwise): a backend
    that exits between two samples loses its last few milliseconds."""

    def __init__(self, db: str) -> None:
        self._name = f" {db.rsplit('/', 1)[1]} " if db.startswith("postgresql://") else None
        self._seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> ServerCpu:
        if self._name is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def seconds(self) -> float:
        return sum(self._seen.values())

    def _sample(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self._stop.is_set():
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().decode(errors="replace")
                    if not cmd.startswith("postgres:") or self._name not in cmd:
                        continue
                    with open(f"/proc/{pid}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    self._seen[pid] = (int(fields[11]) + int(fields[12])) / tick
                except (OSError, IndexError):
                    pass
            self._stop.wait(0.05)


def commits(db: str) -> int:
    """PostgreSQL's count of committed transactions in `db` (0 for SQLite)."""
    if not db.startswith("postgresql://"):
        return 0
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return 0 if row is None else int(row[0])


def recovery(db: str, folder: Path, count: int, path: str, *, own: bool) -> dict[str, float]:
    """Time one `wakeful worker --once` recovering `count` orphaned sessions, the worker
    importing wakeful from `path` (a `compiled_copy`): this process's code when `own`, else
    another tree's, whose own code then makes the orphans."""
    work = folder / "work"
    work.mkdir(parents=True)
    (work / ".git").mkdir()
    model = write_script(folder / "recovery.json", delay_ms=0)
    start = time.perf_counter()
    sids = orphan_with(None if own else path, db, model, work, count)
    setup = time.perf_counter() - start
    env = tree_env(path) | {"WAKEFUL_DB": db, "HOME": str(folder), "XDG_CONFIG_HOME": str(folder)}
    env = counting_env(env, folder / "counts")
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    committed = commits(db)
    start = time.perf_counter()
    with ServerCpu(db) as server:
        done = subprocess.run(
            [WAKEFUL, "worker", "--once", "--concurrency", "32", "--format", "json"],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    committed = commits(db) - committed
    counted = total(folder / "counts")
    cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
    stats = json.loads(done.stdout)
    store = open_store(db)
    ended = sum(store.turns(s)[0].status == "completed" for s in sids)
    held = len(store.claims.held())
    store.close()
    assert ended == count and held == 0, (ended, held, stats)
    return {
        "sessions": count,
        "setup_s": setup,
        "worker_s": elapsed,
        "per_s": count / elapsed,
        "cpu_ms": 1000 * cpu / count,
        "server_ms": 1000 * server.seconds / count,
        "commits": committed / count,
        "statements": counted["statements"] / count,
        "client_commits": counted["commits"] / count,
        "write_commits": counted["write_commits"] / count,
        "round_trips": counted["round_trips"] / count,
    }


async def drive(
    db: str, folder: Path, count: int, delay_ms: int, together: bool
) -> tuple[float, float, dict[str, int]]:
    """Drive `count` fresh sessions (one input each); return the wall and CPU time and what
    the driving sent to the store, counted in this process (`bench/_count.py`)."""
    model = write_script(folder / f"drive_{delay_ms}.json", delay_ms=delay_ms)
    config = Config(execution=ExecutionConfig(poll_interval_ms=250))
    rt = Runtime(db, model=model, workspace=folder, config=config)
    sids = [rt.send("work", resume=False).session_id for _ in range(count)]
    vacuum(db)
    sent = figures()
    start, cpu = time.perf_counter(), time.process_time()
    if together:
        results = await asyncio.gather(*(rt.resume(s) for s in sids))
    else:
        results = [await rt.resume(s) for s in sids]
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    sent = {k: n - sent[k] for k, n in figures().items()}
    assert all(len(r) == 1 and r[0].outcome == "completed" for r in results)
    await rt.aclose()
    return elapsed, cpu, sent


def per_step(sent: dict[str, int], steps: int) -> str:
    """What a drive phase sent, per model step (`drive`)."""
    return (
        f"{per(sent, steps)}; units {sent['write_units'] / steps:.2f} write + "
        f"{sent['read_units'] / steps:.2f} read"
    )


def vacuum(db: str) -> None:
    """On PostgreSQL, `VACUUM ANALYZE` before a timed phase: what autovacuum does on a server
    that has it on (PostgreSQL's default). Without it, on a server with autovacuum off (this
    machine's CI server), every earlier phase's dead row versions stay in the tables and their
    indexes, and each phase runs slower than the one before it for that reason alone (the last,
    all at once with latency, 4.3 s in a fresh database and 6.1 s after four phases)."""
    if not db.startswith("postgresql://"):
        return
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def recoveries(args: argparse.Namespace, folder: Path) -> None:
    """The recovery figure, `--rounds` times, alternating with the baseline's when given (the
    machine's speed drifts: alternating puts both under the same drift); medians at the end."""
    now: list[dict[str, float]] = []
    base: list[dict[str, float]] = []
    here = compiled_copy(folder / "code_now", None)
    there = compiled_copy(folder / "code_baseline", args.baseline_src) if args.baseline_src else ""
    for n in range(args.rounds):
        sides = [("now", args.db or "", None, now)]
        if args.baseline_src:
            sides.append(("baseline", args.baseline_db or "", args.baseline_src, base))
        for name, url, src, out in sides:
            url = fresh(url, folder / f"{name}_{n}.db", again=n > 0)
            path = here if src is None else there
            out.append(r := recovery(url, folder / f"{name}_{n}", args.orphans, path, own=not src))
            print(
                f"recovery ({name}{'' if src is None else ' ' + src}): {r['sessions']} orphaned "
                f"sessions by one `wakeful worker --once`: {r['worker_s']:.2f} s "
                f"({r['per_s']:.0f} sessions/s, worker CPU {r['cpu_ms']:.1f} ms per session"
                f"{server_figures(r)}; counted in the worker per session: {client_figures(r)}; "
                f"setup {r['setup_s']:.1f} s; load average "
                f"{os.getloadavg()[0]:.1f})",
                flush=True,
            )
    if base:
        keys = ("worker_s", "cpu_ms", "server_ms", "commits", "statements", "client_commits")
        mid = {k: statistics.median(r[k] for r in now) for k in keys}
        was = {k: statistics.median(r[k] for r in base) for k in keys}
        print(
            f"recovery, medians of {args.rounds}: now {mid['worker_s']:.2f} s, baseline "
            f"{was['worker_s']:.2f} s (x{was['worker_s'] / mid['worker_s']:.2f}); worker CPU "
            f"{mid['cpu_ms']:.1f} vs {was['cpu_ms']:.1f} ms per session; counted in the worker "
            f"{mid['statements']:.1f} vs {was['statements']:.1f} statements, "
            f"{mid['client_commits']:.2f} vs {was['client_commits']:.2f} commits per session"
            + (
                f"; server CPU {mid['server_ms']:.1f} vs {was['server_ms']:.1f} ms, commits "
                f"{mid['commits']:.1f} vs {was['commits']:.1f} per session"
                if mid["commits"]
                else ""
            )
        )


def server_figures(r: dict[str, float]) -> str:
    """The PostgreSQL server's share of a recovery figure (nothing for SQLite)."""
    if not r["commits"]:
        return ""
    return f", server CPU {r['server_ms']:.1f} ms, {r['commits']:.1f} commits per session"


def client_figures(r: dict[str, float]) -> str:
    """What the worker's own client sent, per session (`bench/_counting`)."""
    return (
        f"{r['statements']:.1f} statements, {r['client_commits']:.2f} commits "
        f"({r['write_commits']:.2f} writing), {r['round_trips']:.1f} round trips"
    )


def fresh(url: str, path: Path, *, again: bool) -> str:
    """An empty store: a new SQLite file at `path` (whatever `url` names), or the PostgreSQL
    database `url`, emptied when used `again` (dropped and created: one made for the bench)."""
    if not url.startswith("postgresql://"):
        return str(path)
    if not again:
        return url
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return url


def main() -> None:
    """Run both benchmarks and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orphans", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--db", default=None)
    parser.add_argument("--baseline-src", default=None)
    parser.add_argument("--baseline-db", default=None)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--where", action="store_true", help="the drive phases' store units by opener"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = args.db or str(folder / "bench.db")
        if args.orphans > 0:  # `--orphans 0`: the concurrency figures only
            recoveries(args, folder)
        n = args.sessions
        if n <= 0:  # `--sessions 0`: the recovery figures only
            return
        install(folder / "drive_counts")  # this process's own counts, units by opener
        for delay in (0, 20):
            one, one_cpu, one_sent = asyncio.run(drive(db, folder, n, delay, together=False))
            all_, all_cpu, all_sent = asyncio.run(drive(db, folder, n, delay, together=True))
            print(
                f"drive {n} sessions x 3 steps, chunk delay {delay} ms: one at a time "
                f"{one:.2f} s ({3 * n / one:.0f} steps/s, CPU {1000 * one_cpu / (3 * n):.1f} ms "
                f"per step); all at once {all_:.2f} s ({3 * n / all_:.0f} steps/s, CPU "
                f"{1000 * all_cpu / (3 * n):.1f} ms per step, x{one / all_:.1f})\n"
                f"  counted per step, one at a time: {per_step(one_sent, 3 * n)}\n"
                f"  counted per step, all at once: {per_step(all_sent, 3 * n)}",
                flush=True,
            )
        if args.where:  # every phase's units (setup included) by opener, per step
            for name, count in UNITS.most_common(30):
                print(f"  {count / (12 * n):6.2f}  {name}")


if __name__ == "__main__":
    main()
