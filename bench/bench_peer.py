"""wakeful's OpenAI Agents SDK session beside the SDK's own `SQLiteSession`, same work, same run.

    python bench/bench_peer.py [--turns N] [--postgres ADMIN_URL | --no-postgres] [--dir DIR]

Each turn appends one user and one assistant item (`add_items`, one call) and loads the whole
history (`get_items`), as `Runner.run` does; the figures are microseconds per call (median of the
turns) for the adapter (`WakefulSession`, SQLite in DIR and, when the server answers,
PostgreSQL on a fresh database) and for `SQLiteSession` on a file in the same DIR. The ratio is
the adapter's time over SQLiteSession's. Then, on the full sessions, `get_items(limit=10)` (the
newest ten items, as `SessionSettings(limit=10)` asks), beside reading the whole history and
slicing it (what the adapter did before it read only the newest messages).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from agents.memory import SQLiteSession

from wakeful.integrations.openai_agents import WakefulSession

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def _turn(k: int) -> list[Any]:
    return [
        {"role": "user", "content": f"Question {k}: what changed in the store since yesterday?"},
        {
            "id": f"msg_{k}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": f"Answer {k}: " + "details " * 20,
                    "annotations": [],
                }
            ],
        },
    ]


async def _run(session: Any, turns: int) -> tuple[float, float]:
    """Median µs per `add_items` and per `get_items` over `turns` turns."""
    adds, loads = [], []
    for k in range(turns):
        t0 = time.perf_counter()
        await session.add_items(_turn(k))
        t1 = time.perf_counter()
        items = await session.get_items()
        t2 = time.perf_counter()
        assert len(items) == 2 * (k + 1)
        adds.append(t1 - t0)
        loads.append(t2 - t1)
    return statistics.median(adds) * 1e6, statistics.median(loads) * 1e6


LIMIT = 10
REPS = 50


async def _limited(session: Any) -> tuple[float, float]:
    """Median µs of `get_items(limit=LIMIT)` and of `get_items()[-LIMIT:]` over REPS calls."""
    newest, whole = [], []
    for _ in range(REPS):
        t0 = time.perf_counter()
        a = await session.get_items(limit=LIMIT)
        t1 = time.perf_counter()
        b = (await session.get_items())[-LIMIT:]
        t2 = time.perf_counter()
        assert a == b
        newest.append(t1 - t0)
        whole.append(t2 - t1)
    return statistics.median(newest) * 1e6, statistics.median(whole) * 1e6


@contextmanager
def _pg(admin: str | None) -> Iterator[str | None]:
    if admin is None:
        yield None
        return
    try:
        psycopg.connect(admin, connect_timeout=3).close()
    except psycopg.Error:
        yield None
        return
    name = f"wakeful_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


async def main() -> None:
    """Run the comparison and print one row per backend."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--postgres", default=DEFAULT_PG)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--dir")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        peer = SQLiteSession("bench", str(Path(tmp) / "agents.db"))
        base_add, base_load = await _run(peer, args.turns)
        limited = [("SQLiteSession (SDK)", *await _limited(peer))]
        peer.close()
        rows = [("SQLiteSession (SDK)", base_add, base_load)]
        ours = WakefulSession("bench", str(Path(tmp) / "wakeful.db"))
        rows.append(("WakefulSession sqlite", *await _run(ours, args.turns)))
        limited.append(("WakefulSession sqlite", *await _limited(ours)))
        ours.close()
        with _pg(None if args.no_postgres else args.postgres) as url:
            if url is not None:
                ours = WakefulSession("bench", url)
                rows.append(("WakefulSession postgres", *await _run(ours, args.turns)))
                limited.append(("WakefulSession postgres", *await _limited(ours)))
                ours.close()
    print(f"{args.turns} turns: add_items(2 items) + get_items(all); median µs per call")
    print(f"{'session':<26}{'add µs':>10}{'ratio':>8}{'load µs':>10}{'ratio':>8}")
    for name, add, load in rows:
        print(
            f"{name:<26}{add:>10.0f}{add / base_add:>7.1f}x{load:>10.0f}{load / base_load:>7.1f}x"
        )
    print(f"\nget_items(limit={LIMIT}) on {2 * args.turns} items; median µs of {REPS} calls")
    print(f"{'session':<26}{'limit µs':>10}{'whole+slice µs':>16}")
    for name, newest, whole in limited:
        print(f"{name:<26}{newest:>10.0f}{whole:>16.0f}")


if __name__ == "__main__":
    asyncio.run(main())
