"""Reverse artifact lookup ("which sessions produced this pull request") over 100,000 sessions
with 20 artifacts each, next to the same query without its index, on the same database.

    python bench/bench_artifacts.py [--postgres ADMIN_URL | --no-postgres] [--dir DIR]
                                    [--sessions N] [--per-session K]

Builds N sessions with K artifacts each (half files, then commits, branches, links and two pull
requests; every pull request is produced by four sessions), bulk-loaded into the store's own
`sessions` and `artifacts` tables (the projections; the `artifact.recorded` events are not
written for the bulk, which the lookup never reads), plus one session whose artifacts are
recorded through `SqlStore.shaping.add_artifact`.

Measures, as the median of 30 lookups of different pull requests:
- `store.find_artifacts(uri, kind="pull_request")` (target from the issue: milliseconds, from
  the `artifacts_uri` index), next to the raw index query on its own connection;
- the same query with the index out of reach (SQLite `NOT INDEXED`; PostgreSQL with index and
  bitmap scans turned off): what answering without the index costs;
- `store.shaping.add_artifact` (an event, the upsert and the cap's eviction check), per call.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

from bench.bench_store import DEFAULT_PG, Row, pg_reachable, print_table, store_at, timed

SESSION_COLS = "id, root_id, title, created_ms, updated_ms, listed_ms, last_seq, model"
ARTIFACT_COLS = (
    "id, session_id, kind, uri, label, meta, turn_id, created_seq, created_ms, updated_ms"
)
LOOKUP_SQL = (
    "SELECT id, session_id, kind, uri, label, meta, turn_id, created_ms, updated_ms "
    "FROM artifacts{hint} WHERE uri = {p} AND kind = {p} ORDER BY updated_ms DESC, id LIMIT 100"
)


def pr_uri(n: int) -> str:
    return f"https://github.com/acme/app/pull/{n}"


def artifact_rows(sid: str, i: int, k: int, sessions: int, at: int) -> Iterator[tuple[Any, ...]]:
    """K artifacts of session i: files, commits, branches, a link, two pull requests."""
    kinds = ["file"] * (k // 2) + ["commit"] * (k // 5) + ["branch"] * (k // 6)
    kinds += ["link"] * (k - len(kinds) - 2) + ["pull_request", "pull_request"]
    for j, kind in enumerate(kinds[:k]):
        if kind == "pull_request":
            uri = pr_uri((i + j % 2) % (sessions // 2) + 1)
        elif kind == "file":
            uri = f"file:///work/s{i}/src/module_{j}.py"
        elif kind == "commit":
            uri = f"git:acme/app@{(i * 31 + j):040x}"
        elif kind == "branch":
            uri = f"git:acme/app#feature-{i}-{j}"
        else:
            uri = f"https://docs.example.com/{i}/{j}"
        yield (f"art_{i:012x}{j:012x}", sid, kind, uri, uri[-40:], None, None, j + 2, at, at)


class Sqlite:
    name = "sqlite"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def url(self) -> str:
        return str(self.folder / "artifacts.db")

    def load(self, url: str, sessions: int, k: int) -> None:
        conn = sqlite3.connect(url)
        base = 1_700_000_000_000
        with conn:
            for start in range(0, sessions, 10_000):
                rows, arts = [], []
                for i in range(start, min(sessions, start + 10_000)):
                    sid, at = f"ses_{i:024x}", base + i * 1000
                    rows.append((sid, sid, f"session {i}", at, at, at, k + 1, "scripted:bench"))
                    arts += artifact_rows(sid, i, k, sessions, at)
                conn.executemany(
                    f"INSERT INTO sessions ({SESSION_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
                )
                conn.executemany(
                    f"INSERT INTO artifacts ({ARTIFACT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    arts,
                )
        conn.execute("ANALYZE")
        conn.close()

    def raw(self, url: str) -> tuple[Callable[[str], object], Callable[[str], object]]:
        conn = sqlite3.connect(url)
        indexed = LOOKUP_SQL.format(hint="", p="?")
        scanned = LOOKUP_SQL.format(hint=" NOT INDEXED", p="?")

        def index(uri: str) -> object:
            return conn.execute(indexed, (uri, "pull_request")).fetchall()

        def scan(uri: str) -> object:
            return conn.execute(scanned, (uri, "pull_request")).fetchall()

        return index, scan

    def close(self) -> None:
        pass


class Postgres:
    name = "postgres"

    def __init__(self, admin_url: str) -> None:
        self.admin = admin_url
        self.made: list[str] = []
        self.conns: list[psycopg.Connection[Any]] = []

    def url(self) -> str:
        name = f"wakeful_bench_artifacts_{random.getrandbits(32):08x}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.made.append(name)
        return f"{self.admin.rsplit('/', 1)[0]}/{name}"

    def load(self, url: str, sessions: int, k: int) -> None:
        base = 1_700_000_000_000
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            with cur.copy(f"COPY sessions ({SESSION_COLS}) FROM STDIN") as copy:
                for i in range(sessions):
                    sid, at = f"ses_{i:024x}", base + i * 1000
                    copy.write_row((sid, sid, f"session {i}", at, at, at, k + 1, "scripted:bench"))
            with cur.copy(f"COPY artifacts ({ARTIFACT_COLS}) FROM STDIN") as copy:
                for i in range(sessions):
                    for row in artifact_rows(f"ses_{i:024x}", i, k, sessions, base + i * 1000):
                        copy.write_row(row)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")  # what autovacuum does after a bulk load

    def raw(self, url: str) -> tuple[Callable[[str], object], Callable[[str], object]]:
        fast = psycopg.connect(url, autocommit=True)
        slow = psycopg.connect(url, autocommit=True)
        slow.execute("SET enable_indexscan = off")
        slow.execute("SET enable_bitmapscan = off")
        slow.execute("SET enable_indexonlyscan = off")
        self.conns += [fast, slow]
        sql = LOOKUP_SQL.format(hint="", p="%s")

        def index(uri: str) -> object:
            return fast.execute(sql, (uri, "pull_request")).fetchall()

        def scan(uri: str) -> object:
            return slow.execute(sql, (uri, "pull_request")).fetchall()

        return index, scan

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        with psycopg.connect(self.admin, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


Backend = Sqlite | Postgres


def bench(b: Backend, sessions: int, k: int) -> list[Row]:
    url = b.url()
    out: list[Row] = []
    rng = random.Random(21)
    with store_at(url) as store:
        started = time.perf_counter()
        b.load(url, sessions, k)
        print(
            f"{b.name}: {sessions:,} sessions, {sessions * k:,} artifacts loaded in "
            f"{time.perf_counter() - started:.0f} s"
        )
        own = store.create_session(title="records its own").id
        target = pr_uri(7)
        adds = timed(
            lambda: store.shaping.add_artifact(own, "file", f"file:///x/{rng.random()}", "f"), 200
        )
        store.shaping.add_artifact(own, "pull_request", target, "PR 7")
        found = store.find_artifacts(target, kind="pull_request")
        assert len(found) == 5 and own in {a.session_id for a in found}, found
        index, scan = b.raw(url)
        uris = [pr_uri(rng.randrange(1, sessions // 2)) for _ in range(30)]
        it = iter(uris * 2)
        ours = (
            statistics.median(
                timed(lambda: store.find_artifacts(next(it), kind="pull_request"), 30)
            )
            * 1000
        )
        raw = statistics.median(timed(lambda: index(next(it)), 30)) * 1000
        bare = statistics.median(timed(lambda: scan(uris[0]), 5)) * 1000
        label = f"reverse lookup, {sessions:,} sessions x {k} artifacts"
        out.append(
            Row(
                f"{label}: find_artifacts (ms)",
                b.name,
                f"{ours:.3f}",
                f"{raw:.3f}",
                f"{ours / raw:.2f}x",
                "milliseconds",
                "yes" if ours < 10 else "NO",
            )
        )
        out.append(
            Row(
                f"{label}: same query without the index (ms)",
                b.name,
                f"{bare:.1f}",
                f"{ours:.3f}",
                f"{bare / ours:.0f}x slower",
            )
        )
        per_add = statistics.median(adds) * 1000
        out.append(
            Row("add_artifact: event + upsert + cap check (ms per call)", b.name, f"{per_add:.2f}")
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", metavar="ADMIN_URL", default=None)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite file goes")
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--per-session", type=int, default=20)
    args = parser.parse_args()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        backends: list[Backend] = [Sqlite(Path(tmp))]
        admin = args.postgres or DEFAULT_PG
        if not args.no_postgres and pg_reachable(admin):
            backends.append(Postgres(admin))
        elif not args.no_postgres:
            print(f"(PostgreSQL at {admin} does not answer: SQLite only)")
        for b in backends:
            try:
                rows += bench(b, args.sessions, args.per_session)
            finally:
                b.close()
    print_table(rows)


if __name__ == "__main__":
    main()
