"""Cold start of the cheap commands (`wakeful --version`, `session list`, `session show`, `log`)
next to a baseline process that only imports click, sqlite3, json and pydantic, measured in the
same run: every run is a new process, runs are interleaved in rounds (so the machine's drift hits
all alike), and each figure is the median, of the wall time and of the CPU time. Target (issue
25): each command at most 1.5x the baseline. The processes may write .pyc files, as an installed
package has them.

    python bench/bench_cold_start.py [--runs 15] [--before SRC]

`--before SRC` also runs the commands from another source tree (say an export of main's `src`,
put first on PYTHONPATH) in the same rounds, for a before/after comparison. `--db URL --session
ID` times `show` and `log` of an existing session instead of the 20-message one made here (say
one a `wakeful run` with tool calls wrote: it has a location, deliveries, receipts and usage).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wakeful.events import MessageAdded
from wakeful.messages import assistant, user
from wakeful.store import open_store

BASELINE = "import click, sqlite3, json, pydantic"


def fill(path: Path) -> str:
    """A store with one session of 20 messages; its id."""
    store = open_store(str(path))
    try:
        row = store.create_session(title="cold start")
        msgs = [
            user(f"question {i}") if i % 2 == 0 else assistant(f"answer {i}") for i in range(20)
        ]
        store.append(row.id, [MessageAdded(message=m) for m in msgs])
        return row.id
    finally:
        store.close()


def wall(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds one new process takes to run `cmd` to the end, and the CPU seconds (user plus
    system) it used: on a busy shared machine the CPU time drifts less than the wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return elapsed, cpu


def main() -> None:
    """Print each command's median wall time, the baseline's, and their ratio."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--before", metavar="SRC", help="another tree's src/ to compare against")
    parser.add_argument("--db", metavar="URL", help="an existing store (with --session)")
    parser.add_argument("--session", metavar="ID", help="a session of --db to show and log")
    args = parser.parse_args()
    if bool(args.db) != bool(args.session):
        parser.error("--db and --session go together")
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "cold.db")
        sid = args.session or fill(Path(db))
        # An installed package has its .pyc files (pip compiles them), so every tree here may
        # write them: without that a run would time the compiler, not the start.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"WAKEFUL_DB": str(db)}
        cases = {
            f"baseline: python -c '{BASELINE}'": [py, "-c", BASELINE],
            "wakeful --version": [py, "-m", "wakeful", "--version"],
            "wakeful session list": [py, "-m", "wakeful", "session", "list"],
            "wakeful session show ID": [py, "-m", "wakeful", "session", "show", sid],
            "wakeful log --session ID": [py, "-m", "wakeful", "log", "--session", sid],
        }
        envs = dict.fromkeys(cases, env)
        if args.before:
            before_env = env | {"PYTHONPATH": str(Path(args.before).resolve())}
            for name, cmd in list(cases.items())[1:]:
                cases[f"{name} (before)"] = cmd
                envs[f"{name} (before)"] = before_env
        times: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        for name, cmd in cases.items():  # warm the file cache and .pyc files once
            wall(cmd, envs[name])
        for _ in range(args.runs):
            for name, cmd in cases.items():
                elapsed, cpu = wall(cmd, envs[name])
                times[name].append(elapsed)
                cpus[name].append(cpu)
    medians = {name: statistics.median(t) for name, t in times.items()}
    cpu_medians = {name: statistics.median(t) for name, t in cpus.items()}
    first = next(iter(cases))
    base, cpu_base = medians[first], cpu_medians[first]
    head = f"command (median of {args.runs} new processes)"
    print(f"{head:<52}{'ms':>8}{'x base':>8}{'CPU ms':>8}{'x base':>8}")
    for name, m in medians.items():
        c = cpu_medians[name]
        print(f"{name:<52}{m * 1000:>8.0f}{m / base:>8.2f}{c * 1000:>8.0f}{c / cpu_base:>8.2f}")


if __name__ == "__main__":
    main()
