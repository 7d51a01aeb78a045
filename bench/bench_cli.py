"""Wall time of `wakeful --help` (start-up cost) and of `wakeful session list --format json` on a
store of 100,000 sessions, next to `python -c pass` (interpreter start-up) in the same run.

    python bench/bench_cli.py [--sessions 100000]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wakeful.store import open_store


def fill(path: Path, n: int) -> None:
    open_store(str(path)).close()  # create the schema
    conn = sqlite3.connect(path)
    now = int(time.time() * 1000)
    rows = [(f"ses_{i:024x}", f"ses_{i:024x}", f"session {i}", now - i) for i in range(n)]
    conn.executemany(
        "INSERT INTO sessions (id, root_id, title, created_ms, updated_ms, listed_ms) "
        "VALUES (?, ?, ?, ?4, ?4, ?4)",
        rows,
    )
    conn.commit()
    conn.close()


def best_of(cmd: list[str], env: dict[str, str], runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.db"
        fill(db, args.sessions)
        env = os.environ | {"WAKEFUL_DB": str(db)}
        py = best_of([sys.executable, "-c", "pass"], env)
        help_ = best_of([sys.executable, "-m", "wakeful", "--help"], env)
        listing = best_of(
            [sys.executable, "-m", "wakeful", "session", "list", "--format", "json"], env
        )
    print(f"{'command':<52}{'best of 5 (ms)':>16}")
    print(f"{'python -c pass (baseline)':<52}{py * 1000:>16.0f}")
    print(f"{'wakeful --help':<52}{help_ * 1000:>16.0f}")
    print(
        f"{f'wakeful session list --format json ({args.sessions:,} sessions)':<52}{listing * 1000:>16.0f}"
    )


if __name__ == "__main__":
    main()
