"""Fleet benchmark: several hosts of `wakeful worker` processes sharing one PostgreSQL.

Each host is a set of worker processes with a host id of its own, in a network namespace
reaching PostgreSQL over a veth pair where the machine allows it (bench/_fleet.py), plain
processes otherwise. They drive N sessions of one input each, answered in `--steps` steps
(tool calls, then a final text) by a scripted provider that waits `--latency-ms` per step.
For each host count it reports: steps/s beside the ideal (sessions in flight / latency),
PostgreSQL commits/s (the `xact_commit` delta of the database, the harness's own statements
left out), lock waits seen in `pg_locks` (sampled every 100 ms; any lock not granted to a
backend of the database), and CPU per step (workers, with their tool processes, plus the
database's backends, read from /proc), beside how busy the whole machine's cores were.

Then the kill run: the largest fleet again, with every step a `shell` call appending to a
ledger and workers sized so that the surviving hosts can hold every session; once a third of
the steps are done every process of host 0 is SIGKILLed. Its claims
are taken over by the other hosts (by lease when hosts have their own ids): reported is the
longest time from the kill to the first write of a new owner in an orphaned session, beside
the lease; every session is then checked as the crash tests check (`check_session` with the
ledger: inputs delivered once, transcripts wire-valid, no call left running, fencing epochs
in order, no side effect twice).

    python bench/bench_fleet.py [--sessions 1000] [--hosts 1,2,4] [--workers 1] [--steps 3]
        [--latency-ms 200] [--lease-ms 10000] [--concurrency N] [--no-kill] [--plain] [--pg URL]
        [--baseline-src DIR] [--profile DIR]

`--pg` is an administrative URL (default: $WAKEFUL_TEST_PG or postgres@127.0.0.1); every run
uses a fresh database made and dropped by the bench. Run it as root for namespaces.

Every worker's statements, commits and round trips are counted on its client
(`bench/_counting`) and printed per step beside the server's commits. `--baseline-src DIR` runs
each fleet a second time, right after, with the workers of another source tree (`DIR/src`, e.g.
a `git worktree` of main before a change; its own code creates the sessions, so a tree with an
older schema works), and prints both. `--profile DIR` profiles every worker, each thread
(`bench/_counting/_profile.py`), and prints its Python calls per step by thread and module.
Each side's workers import wakeful from a copy of its
tree's package compiled beforehand (as in bench_execution.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

# Run as `python bench/bench_fleet.py` from a clean clone: its own directory's parent holds the
# `bench` package; wakeful comes from the project's environment; nothing from tests/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._counting import counting_env, per  # noqa: E402
from bench._counting import total as counted  # noqa: E402
from bench._counting._profile import report as profile_report  # noqa: E402
from bench._fleet import Fleet, cpu_seconds, machine_busy_seconds, netns_usable  # noqa: E402
from bench._trees import compiled_copy  # noqa: E402
from wakeful._checks import LEDGER, check_session, create_session, ledger_lines  # noqa: E402
from wakeful.store import open_store  # noqa: E402

DEFAULT_PG = os.environ.get("WAKEFUL_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


@dataclass
class Workload:
    """What the fleet drives: how many sessions, steps and latency; ledger calls or not."""

    sessions: int
    steps: int
    latency_ms: int
    lease_ms: int
    ledger: bool = False

    def tag(self, n: int) -> str:
        return f"s{n:05d}"


def write_script(path: Path, load: Workload) -> str:
    """A script of `steps` replies per input, each waiting `latency_ms` once (two chunks of
    4,096 characters at most, one delay between them): tool calls, then a final text. With a
    ledger every tool call is a `shell` echo of a line unique to its session and step (one rule
    per session, since a reply is a pure function of the request); else `goal_set`."""

    def replies(tag: str | None) -> list[dict[str, object]]:
        def call(k: int) -> dict[str, object]:
            if tag is None:
                return {"name": "goal_set", "input": {"goal": f"step {k}"}}
            return {"name": "shell", "input": {"command": f"echo {tag}.{k} >> {LEDGER}"}}

        steps: list[dict[str, object]] = [
            {"reasoning": "next", "tool_calls": [call(k)]} for k in range(1, load.steps)
        ]
        return [*steps, {"reasoning": "next", "text": "done"}]

    if load.ledger:
        rules = [
            {"match": f"^job {load.tag(n)}$", "replies": replies(load.tag(n))}
            for n in range(load.sessions)
        ]
    else:
        rules = [{"match": "^job ", "replies": replies(None)}]
    script = {"rules": rules, "chunk_chars": 4096, "chunk_delay_ms": load.latency_ms}
    path.write_text(json.dumps(script))
    return f"scripted:{path}"


def make_workspace(root: Path, load: Workload) -> Path:
    """The workspace every session lives in; its `wakeful.toml` sets the lease and allows
    `shell` (which asks by default)."""
    work = root / "work"
    work.mkdir(parents=True)
    (work / ".git").mkdir()
    (work / "wakeful.toml").write_text(
        f'[execution]\nlease_ms = {load.lease_ms}\n[permissions]\nshell = "allow"\n'
    )
    return work


@contextmanager
def fresh_database(admin: str) -> Iterator[str]:
    """An empty database for one run, dropped afterwards."""
    name = f"wakeful_fleet_{secrets.token_hex(5)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Probe:
    """The harness's own connection: counts its statements so they leave the commit figure."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.statements = 0
        self.pid = int(self.one("SELECT pg_backend_pid()"))

    def rows(self, sql: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        self.statements += 1
        return self.conn.execute(sql, args).fetchall()  # type: ignore[arg-type]

    def one(self, sql: str, args: tuple[object, ...] = ()) -> object:
        return self.rows(sql, args)[0][0]

    def commits(self) -> int:
        self.rows("SELECT pg_stat_clear_snapshot()")
        return int(
            str(
                self.one(
                    "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                )
            )
        )


@dataclass
class Sampler:
    """Every 100 ms: locks not granted to the database's backends, and the backends' CPU."""

    probe: Probe
    exclude: set[int]
    samples: int = 0
    waited: int = 0
    most: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    backend_cpu: dict[int, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            waits = self.probe.rows(
                "SELECT concat_ws(' ', l.locktype, l.mode, l.classid::regclass) FROM pg_locks l "
                "JOIN pg_stat_activity a "
                "ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database()"
            )
            self.samples += 1
            self.waited += bool(waits)
            self.most = max(self.most, len(waits))
            self.by_type.update(str(w[0]) for w in waits)
            self.sample_backends()

    def sample_backends(self) -> None:
        pids = self.probe.rows(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend'"
        )
        for (pid,) in pids:
            if int(str(pid)) not in self.exclude:
                cpu = cpu_seconds(int(str(pid)))
                self.backend_cpu[int(str(pid))] = max(cpu, self.backend_cpu.get(int(str(pid)), 0))

    def locks(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in self.by_type.most_common()) or "none"
        advisory = sum(n for k, n in self.by_type.items() if k.startswith("advisory"))
        return (
            f"{self.waited} of {self.samples} samples saw a waiter (at most {self.most} at "
            f"once; {kinds}); advisory: {advisory}"
        )


@dataclass
class Run:
    """One fleet's figures."""

    hosts: int
    workers: int
    in_flight: int
    steps: int
    window_s: float
    wall_s: float
    commits: int
    worker_cpu: float
    backend_cpu: float
    forwarder_cpu: float
    machine_cpu: float
    locks: str
    stats: dict[str, int] = field(default_factory=dict)  # the workers' counts (`Fleet.stats`)
    counted: dict[str, int] = field(default_factory=dict)  # their clients' (`bench/_counting`)
    resume_s: float | None = None  # kill to the last orphaned session's first write of a new owner
    takeover_s: float | None = None  # kill to the last orphaned claim taken over
    lease_left_s: float | None = None  # kill to the end of the longest orphaned lease
    orphaned: int = 0
    unfinished: int = 0  # of the orphaned, those whose turn had not ended at the kill
    checked: int = 0

    def ideal(self, latency_ms: int) -> float:
        return self.in_flight / (latency_ms / 1000)

    def per_s(self) -> float:
        return self.steps / self.window_s


def run_fleet(
    admin: str,
    load: Workload,
    *,
    hosts: int,
    workers: int,
    concurrency: int,
    netns: bool,
    kill_at: float | None = None,
    timeout: float = 900,
    code: str | None = None,
    own: bool = True,
    profile: Path | None = None,
) -> Run:
    """Drive `load` with a fleet of `hosts` x `workers`; kill host 0 at `kill_at` of the steps,
    or later once it holds a session (a host whose workers started late may hold none). The workers import wakeful from `code` first (a `compiled_copy`) when given; unless `own`
    (it is this tree's), that code also creates the sessions. With `profile`, a folder, every
    worker is profiled into it (`bench/_counting/_profile.py`)."""
    with tempfile.TemporaryDirectory() as tmp, fresh_database(admin) as db, ExitStack() as cleanup:
        root = Path(tmp)
        work = make_workspace(root, load)
        model = write_script(root / "script.json", load)
        sids = [f"ses_fleet_{load.tag(n)}" for n in range(load.sessions)]
        create_sessions(db, sids, model, work, load, None if own else code)
        env = counting_env({"PYTHONPATH": _path(code)}, root / "counts")
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            env["WAKEFUL_PROFILE_DIR"] = str(profile)
        probe, watch = Probe(db), Probe(db)
        cleanup.callback(probe.conn.close)  # (also when the run fails: no connection is left to
        cleanup.callback(watch.conn.close)  # the garbage collector, which warns in a later test)
        sampler = Sampler(watch, {probe.pid, watch.pid})
        total = load.sessions * load.steps
        per_worker = concurrency or math.ceil(load.sessions / (hosts * workers))
        commits0 = probe.commits()
        sampler.start()
        started, busy = time.monotonic(), machine_busy_seconds()
        fleet = Fleet(
            db,
            work,
            root,
            hosts=hosts,
            workers=workers,
            concurrency=per_worker,
            netns=netns,
            env=env,
        )
        orphaned: dict[str, tuple[int, int]] = {}
        waiting: dict[str, int] = {}  # orphaned claims not yet taken over: their epochs
        unfinished: dict[str, int] = {}  # orphaned sessions whose turn had not ended: epochs
        kill_ms = taken_ms = 0.0
        try:
            deadline = time.monotonic() + timeout
            while (done := _ended(probe)) < load.sessions:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{done} of {load.sessions} sessions done")
                if (
                    kill_at is not None
                    and not kill_ms
                    and _steps(probe) >= kill_at * total
                    and _held_by(probe, fleet.hosts[0].owners())  # (not while it holds none)
                ):
                    kill_ms = time.time() * 1000
                    fleet.hosts[0].kill()
                    orphaned = _held_by(probe, fleet.hosts[0].owners())
                    waiting = {sid: epoch for sid, (epoch, _) in orphaned.items()}
                    # A drain releases its claim after its turn ended: a kill in between leaves
                    # a claim on a finished session, which the new owner takes and releases
                    # without a write. Only the others must be written to by a new owner.
                    unfinished = _unfinished(probe, waiting)
                if waiting and not (waiting := _not_taken(probe, waiting)):
                    taken_ms = time.time() * 1000
                time.sleep(0.2)
            if waiting and not _not_taken(probe, waiting):  # ended before the loop looked
                taken_ms = time.time() * 1000
            _settled(probe, deadline)
            sampler.stop()
            sampler.sample_backends()
            forwarders = fleet.forwarder_cpu()
            fleet.stop()
            stats = fleet.stats()
            wall = time.monotonic() - started
            busy = machine_busy_seconds() - busy
        finally:
            sampler.stop()
            fleet.close()
        time.sleep(0.5)  # the exiting backends' statistics reach the collector
        commits = probe.commits() - commits0 - probe.statements - watch.statements
        first, last = (
            float(str(v))
            for v in probe.rows(
                "SELECT min(at_ms) FILTER (WHERE type = 'turn.started'), "
                "max(at_ms) FILTER (WHERE type = 'turn.ended') FROM events"
            )[0]
        )
        steps = _steps(probe)
        run = Run(
            hosts,
            workers,
            min(load.sessions, hosts * workers * per_worker),
            steps,
            (last - first) / 1000,
            wall,
            commits,
            fleet.cpu(),
            sum(sampler.backend_cpu.values()),
            forwarders,
            busy,
            sampler.locks(),
            stats,
            counted(root / "counts", "worker"),
        )
        if kill_at is not None:
            run.orphaned = len(orphaned)
            run.resume_s = _resume_s(probe, unfinished, kill_ms)
            run.unfinished = len(unfinished)
            run.takeover_s = (taken_ms - kill_ms) / 1000 if orphaned else 0.0
            run.lease_left_s = max((u for _, u in orphaned.values()), default=kill_ms)
            run.lease_left_s = (run.lease_left_s - kill_ms) / 1000
        store = cleanup.enter_context(closing(open_store(db)))
        ledger = ledger_lines(work) if load.ledger else None
        for sid in sids:
            check_session(store, sid, ledger)
        run.checked = len(sids)
        assert steps == total, f"{steps} steps stored, {total} expected"
        return run


def _path(code: str | None) -> str:
    """`PYTHONPATH` with `code` first (when given)."""
    return os.pathsep.join(p for p in (code, os.environ.get("PYTHONPATH", "")) if p)


def create_sessions(
    db: str, sids: list[str], model: str, work: Path, load: Workload, code: str | None
) -> None:
    """Create the sessions, each with its job (by the code at `code`, in a subprocess, when
    given: its schema, which its workers accept)."""
    jobs = [[f"job {load.tag(n)}"] for n in range(len(sids))]
    if code is None:
        store = open_store(db)
        for sid, inputs in zip(sids, jobs, strict=True):
            create_session(store, sid, model, inputs, workspace=work)
        store.close()
        return
    script = (
        "import json, sys; from pathlib import Path; from wakeful.store import open_store; "
        "from wakeful._checks import create_session; a = json.loads(sys.argv[1]); "
        "s = open_store(a['db']); "
        "[create_session(s, i, a['model'], j, workspace=Path(a['work'])) "
        "for i, j in zip(a['sids'], a['jobs'])]; s.close()"
    )
    args = {"db": db, "sids": sids, "model": model, "work": str(work), "jobs": jobs}
    env = os.environ | {"PYTHONPATH": _path(code)}
    subprocess.run([sys.executable, "-c", script, json.dumps(args)], env=env, check=True)


def _ended(probe: Probe) -> int:
    return int(str(probe.one("SELECT count(*) FROM events WHERE type = 'turn.ended'")))


def _steps(probe: Probe) -> int:
    return int(
        str(
            probe.one(
                "SELECT count(*) FROM events WHERE type = 'message.added' "
                "AND data::jsonb #>> '{message,role}' = 'assistant'"
            )
        )
    )


def _settled(probe: Probe, deadline: float) -> None:
    """Wait until every claim is released (the drains' last writes are in)."""
    while probe.one("SELECT count(*) FROM claims WHERE released = 0") != 0:
        if time.monotonic() > deadline:
            raise TimeoutError("claims still held")
        time.sleep(0.1)


def _held_by(probe: Probe, owners: list[str]) -> dict[str, tuple[int, int]]:
    """The claims held by `owners` (`LIKE` patterns): session id to (epoch, lease end in ms)."""
    rows = probe.rows(
        "SELECT session_id, epoch, lease_until_ms FROM claims "
        "WHERE released = 0 AND owner LIKE ANY(%s)",
        (owners,),
    )
    return {str(s): (int(str(e)), int(str(u))) for s, e, u in rows}


def _unfinished(probe: Probe, epochs: dict[str, int]) -> dict[str, int]:
    """Those of `epochs` whose session's turn has not ended (each session runs one turn)."""
    rows = probe.rows(
        "SELECT DISTINCT session_id FROM events WHERE session_id = ANY(%s) AND type = 'turn.ended'",
        (list(epochs),),
    )
    ended = {str(r[0]) for r in rows}
    return {sid: epoch for sid, epoch in epochs.items() if sid not in ended}


def _not_taken(probe: Probe, epochs: dict[str, int]) -> dict[str, int]:
    """Those of `epochs` whose claim still has that epoch and is not released."""
    rows = probe.rows(
        "SELECT session_id, epoch, released FROM claims WHERE session_id = ANY(%s)",
        (list(epochs),),
    )
    return {str(s): int(str(e)) for s, e, r in rows if int(str(e)) == epochs[str(s)] and not r}


def _resume_s(probe: Probe, orphaned: dict[str, int], kill_ms: float) -> float:
    """The longest time from the kill to the first write under a newer epoch, over the
    sessions the killed host held with work left."""
    worst = 0.0
    for sid, epoch in orphaned.items():
        at = probe.one(
            "SELECT min(at_ms) FROM events WHERE session_id = %s AND epoch > %s", (sid, epoch)
        )
        assert at is not None, f"{sid} was never resumed"
        worst = max(worst, (float(str(at)) - kill_ms) / 1000)
    return worst


def wasted(stats: dict[str, int]) -> str:
    """The claims taken in vain, from the workers' counts: starts that found another live
    driver holding the session (`busy`) and reservations released without a drive."""
    busy, unused = stats.get("busy", 0), stats.get("unused", 0)
    return (
        f"claims in vain: {busy + unused} (busy starts {busy}, reservations released unused "
        f"{unused}) of {stats.get('drains', 0)} drains, {stats.get('reserved', 0)} reserved"
    )


def main() -> None:
    """Run the fleets and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--hosts", default="1,2,4")
    parser.add_argument("--workers", type=int, default=1, help="worker processes per host")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=0,
        help="drains per worker (default: every session in flight)",
    )
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--lease-ms", type=int, default=10_000)
    parser.add_argument("--no-kill", action="store_true")
    parser.add_argument("--plain", action="store_true", help="no namespaces even when possible")
    parser.add_argument("--pg", default=DEFAULT_PG)
    parser.add_argument("--baseline-src", default=None, help="another source tree to compare")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="profile every worker (each thread, exact call counts) into this folder",
    )
    args = parser.parse_args()
    netns = not args.plain and netns_usable()
    counts = [int(h) for h in args.hosts.split(",")]
    load = Workload(args.sessions, args.steps, args.latency_ms, args.lease_ms)
    mode = "network namespaces over veth pairs" if netns else "plain processes, one host id"
    print(
        f"{load.sessions} sessions x {load.steps} steps, {load.latency_ms} ms per step; "
        f"hosts: {mode}; {args.workers} worker(s) per host; {os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory() as tmp:
        here = compiled_copy(Path(tmp, "now"), None)
        sides = [("now", here, True)]
        if args.baseline_src:
            there = compiled_copy(Path(tmp, "baseline"), args.baseline_src)
            sides.append((f"baseline {args.baseline_src}", there, False))
        base: dict[str, float] = {}
        for hosts in counts:
            for side, (name, code, own) in enumerate(sides):
                folder = None if args.profile is None else args.profile / f"{hosts}h-{side}"
                r = run_fleet(
                    args.pg,
                    load,
                    hosts=hosts,
                    workers=args.workers,
                    concurrency=args.concurrency,
                    netns=netns,
                    code=code,
                    own=own,
                    profile=folder,
                )
                base.setdefault(name, r.per_s())
                print(f"{name}: {hosts} host(s): {figures(r, load, base[name], counts[0])}")
                if folder is not None:
                    print(f"profile of the workers ({folder}):\n{profile_report(folder, r.steps)}")
        if not args.no_kill and max(counts) > 1:
            kill_run(args, load, netns, counts, here)


def figures(r: Run, load: Workload, base: float, first: int) -> str:
    """One fleet's figures as a line of text (`base`: the steps/s of `first` hosts)."""
    cpu = r.worker_cpu + r.backend_cpu
    return (
        f"{r.per_s():.0f} steps/s = {r.per_s() / r.ideal(load.latency_ms):.3f}"
        f" of the ideal {r.ideal(load.latency_ms):.0f} ({r.in_flight} in flight), "
        f"x{r.per_s() / base:.2f} of {first} host(s); {r.commits / r.wall_s:.0f} commits/s "
        f"({r.commits / r.steps:.1f} per step); counted in the workers per step: "
        f"{per(r.counted, r.steps)}; CPU {1000 * cpu / r.steps:.1f} ms/step "
        f"(workers {1000 * r.worker_cpu / r.steps:.1f}, postgres backends "
        f"{1000 * r.backend_cpu / r.steps:.1f}; {cpu / r.wall_s:.2f} cores busy with them, "
        f"{r.machine_cpu / r.wall_s:.2f} with everything on the machine; veth "
        f"forwarders {r.forwarder_cpu:.1f} s); lock waits: {r.locks}; {wasted(r.stats)}"
    )


def kill_run(
    args: argparse.Namespace, load: Workload, netns: bool, counts: list[int], code: str
) -> None:
    """The kill run (see the module docstring), with this tree's workers."""
    load.ledger = True
    hosts = max(counts)
    spare = args.concurrency or math.ceil(load.sessions / ((hosts - 1) * args.workers))
    r = run_fleet(
        args.pg,
        load,
        hosts=hosts,
        workers=args.workers,
        concurrency=spare,
        netns=netns,
        kill_at=1 / 3,
        code=code,
    )
    print(
        f"kill: host 0 of {hosts} SIGKILLed at a third of the steps holding {r.orphaned} "
        f"sessions ({r.unfinished} with work left), whose leases ran out at most {r.lease_left_s:.1f} s later (lease "
        f"{load.lease_ms / 1000:.0f} s); all taken over {r.takeover_s:.1f} s after the kill, "
        f"each with work left written to by its new owner within {r.resume_s:.1f} s; "
        f"{r.checked} sessions checked as the crash tests "
        f"check, ledger included: nothing lost or run twice; {r.per_s():.0f} steps/s "
        f"({spare} drains per worker: the survivors have room for every session)"
    )


if __name__ == "__main__":
    main()
