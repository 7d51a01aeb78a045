"""Issue 16's torture run, published by issue 43 (docs/reliability.md): random SIGKILLs of
drivers and workers, a worker SIGSTOPped past its lease, while the store itself misbehaves.

The run is `bench/bench_torture.py`'s, the one `make torture` prints the figures of: two
long-lived `wakeful worker` processes share the store with drivers (`run --session`, `worker
--once`) that are SIGKILLed at random moments, 60 times per backend; every fifth driver a worker
is SIGSTOPped past its lease, after every fourth one is SIGKILLed and replaced. Meanwhile, at
random moments, another process holds SQLite's write lock for 6 s (past the 5 s busy timeout),
or the PostgreSQL server ends every connection of the store (`pg_terminate_backend`). The jobs'
tool calls append to a ledger. At the end every call is settled, every turn terminal, the
workers alive (and they exit 0 on SIGTERM, without a traceback), nothing lost or duplicated:
`check_session` of the crash tests, ledger included. Any violation is an anomaly, and the test
asserts there are none. `WAKEFUL_TORTURE_KILLS` sets the kills per backend,
`WAKEFUL_TORTURE_SEED` replays a run's choices.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from bench.bench_torture import Row, end_pg_connections, hold_sqlite_lock, run_backend, table

from tests.pg import ADMIN_URL, fresh_database
from wakeful.store import open_store

pytestmark = pytest.mark.slow


def _knobs() -> tuple[int, int]:
    kills = int(os.environ.get("WAKEFUL_TORTURE_KILLS", "60"))
    seed = int(os.environ.get("WAKEFUL_TORTURE_SEED", random.randrange(1 << 30)))
    print(f"torture seed {seed}", flush=True)  # shown with a failure: WAKEFUL_TORTURE_SEED
    return kills, seed


def _no_anomalies(row: Row) -> None:
    print("\n" + table([row]))
    assert row.anomalies == [], f"seed {row.seed}: " + "; ".join(row.anomalies)
    assert row.kills > 0 and row.turns > 0 and row.ledger > 0


def test_torture_sqlite(tmp_path: Path):
    kills, seed = _knobs()
    db = str(tmp_path / "sessions.db")
    open_store(db).close()
    _no_anomalies(
        run_backend("sqlite", db, hold_sqlite_lock(db), (1.0, 6.0), kills, seed, tmp_path)
    )


@pytest.mark.postgres
def test_torture_postgres(tmp_path: Path):
    kills, seed = _knobs()
    with fresh_database() as url:
        hurt = end_pg_connections(ADMIN_URL, url.rsplit("/", 1)[1])
        _no_anomalies(run_backend("postgres", url, hurt, (0.3, 3.0), kills, seed, tmp_path))
