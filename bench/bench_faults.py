"""What bounding a paused peer costs: a PostgreSQL append with a Sync at its read, against the
same append reading after a mere flush (the code before issue 16).

    python bench/bench_faults.py [--postgres ADMIN_URL] [--appends N] [--rounds N]

A read inside a write transaction ends what was sent with a Sync, so that the server sees a
client paused between round trips as idle in transaction and ends it after
`idle_in_transaction_timeout_ms` (docs/store.md, "Faults"). The baseline is the same store with
that Sync taken out (`_Sent._arrive` a no-op), measured in alternating rounds in the same run;
the ratio is the median of the rounds' ratios. Runs on a fresh database, dropped afterwards.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import time
from collections.abc import Callable

import psycopg

from wakeful.events import MessageAdded
from wakeful.messages import Message, TextBlock
from wakeful.store import SqlStore, _pgtx, open_store

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def per_append_ms(store: SqlStore, sid: str, n: int) -> float:
    message = Message(role="user", blocks=(TextBlock(text="x" * 200),))
    started = time.perf_counter()
    for _ in range(n):
        store.append(sid, [MessageAdded(message=message)])
    return (time.perf_counter() - started) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", metavar="ADMIN_URL", default=DEFAULT_PG)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    name = f"wakeful_bench_{secrets.token_hex(4)}"
    base = args.postgres.rsplit("/", 1)[0]
    with psycopg.connect(args.postgres, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    synced: Callable[[_pgtx._Sent], None] = _pgtx._Sent._arrive
    try:
        store = open_store(f"{base}/{name}")
        store.create_session("ses_bench")
        with_sync, flush_only, ratios = [], [], []
        for _ in range(args.rounds):
            _pgtx._Sent._arrive = synced  # type: ignore[method-assign]
            a = per_append_ms(store, "ses_bench", args.appends)
            _pgtx._Sent._arrive = lambda self: None  # type: ignore[method-assign]
            b = per_append_ms(store, "ses_bench", args.appends)
            with_sync.append(a)
            flush_only.append(b)
            ratios.append(a / b)
        _pgtx._Sent._arrive = synced  # type: ignore[method-assign]
        store.close()
    finally:
        with psycopg.connect(args.postgres, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"{'measure':<40} {'value':>10} {'baseline':>10} {'ratio':>7}")
    print(
        f"{'append, ms (Sync at read vs flush)':<40} {statistics.median(with_sync):>10.2f} "
        f"{statistics.median(flush_only):>10.2f} {statistics.median(ratios):>6.2f}x"
    )
    print(f"round ratios: {', '.join(f'{r:.2f}' for r in sorted(ratios))}")


if __name__ == "__main__":
    main()
