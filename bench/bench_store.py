"""The store's costs, next to the raw driver doing the same durable work on the same disk.

    python bench/bench_store.py [--postgres ADMIN_URL | --no-postgres] [--dir DIR]

SQLite runs in a temporary directory (or DIR). PostgreSQL runs on a fresh database created on the
server at ADMIN_URL (default: the development server, when it answers) and dropped afterwards.

Measures (targets from the store issue):
- durable admissions per second, one input per transaction, against the raw driver committing one
  row per transaction with the same pragmas (SQLite: WAL, synchronous=FULL), in 40 alternating
  pairs of rounds (the ratio is the median of the pairs' ratios); target >= 0.5x raw;
- loading a 10,000-message transcript (`store.messages`), against a raw SELECT + json.loads;
- the first page of `list_sessions(limit=50)` over 100,000 sessions; target < 20 ms;
- bytes on disk per message against the message's own JSON; target < 2x.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from wakeful.events import MessageAdded, SessionCreated, dump_event
from wakeful.messages import Message, TextBlock, dump_message
from wakeful.store import SqlStore, new_session_id, open_store

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
PROMPT = (
    "Please look at the failing test in tests/store and tell me why the follower misses events. "
)


@dataclass
class Row:
    measure: str
    backend: str
    value: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    ok: str = ""


def fmt_ratio(value: float, target: float | None, higher_is_better: bool) -> tuple[str, str]:
    if target is None:
        return f"{value:.2f}x", ""
    met = value >= target if higher_is_better else value < target
    return f"{value:.2f}x", "yes" if met else "NO"


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    """Wall seconds of each of `runs` calls."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def text_of(i: int, size: int) -> str:
    return (f"[{i}] " + PROMPT * (size // len(PROMPT) + 1))[:size]


def transcript_messages(n: int) -> list[Message]:
    """Alternating user (~300 chars) and assistant (~900 chars) messages."""
    return [
        Message(
            role="user" if i % 2 == 0 else "assistant",
            blocks=(TextBlock(text=text_of(i, 300 if i % 2 == 0 else 900)),),
        )
        for i in range(n)
    ]


# -- the two backends: open, raw baseline, size on disk, bulk session insert --------------------


class Sqlite:
    name = "sqlite"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def url(self, label: str) -> str:
        return str(self.folder / f"{label}.db")

    def raw_writer(self, label: str) -> Callable[[str | None], None]:
        """Commit one row per call with the store's pragmas, on the same disk; None closes."""
        conn = sqlite3.connect(self.url(label), isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, session_id TEXT, data TEXT)")
        sid = new_session_id()

        def commit(data: str | None) -> None:
            if data is None:
                conn.close()
                return
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (session_id, data) VALUES (?, ?)", (sid, data))
            conn.execute("COMMIT")

        return commit

    def raw_load(self, url: str, sid: str) -> Callable[[], object]:
        conn = sqlite3.connect(url)

        def load() -> list[Any]:
            rows = conn.execute(
                "SELECT data FROM events WHERE session_id = ? AND type = 'message.added' "
                "ORDER BY seq",
                (sid,),
            ).fetchall()
            return [json.loads(r[0]) for r in rows]

        return load

    def used_bytes(self, url: str) -> int:
        conn = sqlite3.connect(url)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.close()
        return int((pages - free) * size)

    def bulk_sessions(self, url: str, rows: list[tuple[Any, ...]], events: list[tuple[Any, ...]]):
        conn = sqlite3.connect(url)
        with conn:
            conn.executemany(SESSION_INSERT.replace("%s", "?"), rows)
            conn.executemany(EVENT_INSERT.replace("%s", "?"), events)
        conn.close()

    def close(self) -> None:
        pass


class Postgres:
    name = "postgres"

    def __init__(self, admin_url: str) -> None:
        self.admin = admin_url
        self.base = admin_url.rsplit("/", 1)[0]
        self.made: list[str] = []

    def url(self, label: str) -> str:
        name = f"wakeful_bench_{label}_{secrets.token_hex(4)}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.made.append(name)
        return f"{self.base}/{name}"

    def raw_writer(self, label: str) -> Callable[[str | None], None]:
        """Commit one row per call (autocommit INSERT) on the same server; None closes."""
        conn = psycopg.connect(self.url(label), autocommit=True)
        conn.execute("CREATE TABLE t (id BIGSERIAL PRIMARY KEY, session_id TEXT, data TEXT)")
        sid = new_session_id()

        def commit(data: str | None) -> None:
            if data is None:
                conn.close()
                return
            conn.execute("INSERT INTO t (session_id, data) VALUES (%s, %s)", (sid, data))

        return commit

    def raw_load(self, url: str, sid: str) -> Callable[[], object]:
        conn = psycopg.connect(url, autocommit=True)
        self._raw = conn

        def load() -> list[Any]:
            rows = conn.execute(
                "SELECT data FROM events WHERE session_id = %s AND type = 'message.added' "
                "ORDER BY seq",
                (sid,),
            ).fetchall()
            return [json.loads(r[0]) for r in rows]

        return load

    def used_bytes(self, url: str) -> int:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM")
            row = conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind = 'r'"
            ).fetchone()
        return int(row[0]) if row else 0

    def bulk_sessions(self, url: str, rows: list[tuple[Any, ...]], events: list[tuple[Any, ...]]):
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            cols = SESSION_INSERT.split("(", 1)[1].split(")", 1)[0]
            with cur.copy(f"COPY sessions ({cols}) FROM STDIN") as copy:
                for r in rows:
                    copy.write_row(r)
            # (the events name their session by its key since migration 31: copied by text id
            # into a scratch table, then keyed in one statement)
            cur.execute(
                "CREATE TEMP TABLE bulk_events "
                "(session_id TEXT, seq BIGINT, type TEXT, at_ms BIGINT, data TEXT)"
            )
            with cur.copy("COPY bulk_events FROM STDIN") as copy:
                for e in events:
                    copy.write_row(e)
            cur.execute(
                "INSERT INTO event_log (sk, seq, type, at_ms, data) SELECT s.k, b.seq, b.type, "
                "b.at_ms, b.data FROM bulk_events b JOIN sessions s ON s.id = b.session_id"
            )
            cur.execute("ANALYZE sessions")  # what autovacuum does after a bulk load

    def close(self) -> None:
        raw = getattr(self, "_raw", None)
        if raw is not None:
            raw.close()
        with psycopg.connect(self.admin, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


SESSION_INSERT = (
    "INSERT INTO sessions (id, parent_id, root_id, title, archived_ms, created_ms, updated_ms, "
    "listed_ms, last_seq) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
EVENT_INSERT = (  # (the session's key from its text id: `store/_session_key.py`)
    "INSERT INTO event_log (sk, seq, type, at_ms, data) "
    "VALUES ((SELECT k FROM sessions WHERE id = %s), %s, %s, %s, %s)"
)

Backend = Sqlite | Postgres


@contextmanager
def store_at(url: str) -> Iterator[SqlStore]:
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()


# -- the measures -------------------------------------------------------------------------------


def bench_admissions(b: Backend, n: int, rounds: int = 40) -> list[Row]:
    """Durable admissions per second in short rounds, each next to a round of the raw driver's
    one-row commits (order alternating), so the shared disk's drift hits both sides of a pair;
    the ratio is the median of the rounds' own ratios. Then bytes per delivered input."""
    url = b.url("admit")
    payloads = [{"text": text_of(i, 300)} for i in range(n)]
    raw_commit = b.raw_writer("raw")
    sid = new_session_id()
    rates: list[float] = []
    raws: list[float] = []
    with store_at(url) as store:
        store.create_session(sid)
        before = b.used_bytes(url)
        step = n // rounds
        numbered = list(enumerate(payloads))
        batches = [numbered[start : start + step] for start in range(0, step * rounds, step)]

        def ours(batch: list[tuple[int, dict[str, str]]]) -> float:
            began = time.perf_counter()
            for i, payload in batch:
                store.admit(sid, f"in_{i}", "user", payload)  # type: ignore[arg-type]
            return len(batch) / (time.perf_counter() - began)

        def theirs(batch: list[tuple[int, dict[str, str]]]) -> float:
            began = time.perf_counter()
            for _i, payload in batch:
                raw_commit(json.dumps(payload))
            return len(batch) / (time.perf_counter() - began)

        for k, batch in enumerate(batches):  # who goes first alternates
            if k % 2:
                raws.append(theirs(batch))
                rates.append(ours(batch))
            else:
                rates.append(ours(batch))
                raws.append(theirs(batch))
        raw_commit(None)
        delivered = store.promote(sid, idle=True)
        used = b.used_bytes(url) - before
        json_size = statistics.mean(len(dump_message(d.message)) for d in delivered if d.message)
    rate, raw = statistics.median(rates), statistics.median(raws)
    paired = statistics.median(ours / theirs for ours, theirs in zip(rates, raws, strict=True))
    ratio, ok = fmt_ratio(paired, 0.5, higher_is_better=True)
    n = len(delivered)
    per = used / n
    bratio, bok = fmt_ratio(per / json_size, 2.0, higher_is_better=False)
    return [
        Row(
            "admissions/s (1 input per tx)",
            b.name,
            f"{rate:,.0f}",
            f"{raw:,.0f} raw",
            ratio,
            ">= 0.5x raw",
            ok,
        ),
        Row(
            "bytes per delivered input",
            b.name,
            f"{per:,.0f}",
            f"{json_size:,.0f} json",
            bratio,
            "< 2x json",
            bok,
        ),
    ]


def bench_transcript(b: Backend, n: int) -> list[Row]:
    """Load a transcript of n messages; bytes on disk per appended message."""
    url = b.url("transcript")
    messages = transcript_messages(n)
    sid = new_session_id()
    with store_at(url) as store:
        store.create_session(sid)
        before = b.used_bytes(url)
        for start in range(0, n, 500):
            store.append(sid, [MessageAdded(message=m) for m in messages[start : start + 500]])
        used = b.used_bytes(url) - before
        load = statistics.median(timed(lambda: store.messages(sid), 5))
        assert len(store.messages(sid)) == n
        raw = statistics.median(timed(b.raw_load(url, sid), 5))
    json_size = statistics.mean(len(dump_message(m)) for m in messages)
    per = used / n
    bratio, bok = fmt_ratio(per / json_size, 2.0, higher_is_better=False)
    return [
        Row(
            f"load {n:,}-message transcript (ms)",
            b.name,
            f"{load * 1000:,.0f}",
            f"{raw * 1000:,.0f} raw+json",
            f"{load / raw:.2f}x",
        ),
        Row(
            "bytes per appended message",
            b.name,
            f"{per:,.0f}",
            f"{json_size:,.0f} json",
            bratio,
            "< 2x json",
            bok,
        ),
    ]


def session_rows(n: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """n sessions: every 10th a child of the root before it, every 20th root archived."""
    base = 1_700_000_000_000
    rows: list[tuple[Any, ...]] = []
    events: list[tuple[Any, ...]] = []
    root = ""
    for i in range(n):
        sid = f"ses_{i:024x}"  # the shape of `new_session_id()`
        at = base + i * 1000
        if i % 10 == 9:
            rows.append((sid, root, root, f"child {i}", None, at, at, at, 1))
            created = SessionCreated(title=f"child {i}", parent_id=root, root_id=root)
        else:
            root = sid
            archived = at if i % 20 == 0 else None
            rows.append((sid, None, sid, f"session {i}", archived, at, at, at, 1))
            created = SessionCreated(title=f"session {i}", root_id=sid)
        events.append((sid, 1, created.type, at, dump_event(created)))
    return rows, events


def bench_listing(b: Backend, n: int) -> list[Row]:
    url = b.url("list")
    with store_at(url) as store:
        b.bulk_sessions(url, *session_rows(n))
        first = store.list_sessions(limit=50)
        assert len(first.sessions) == 50 and first.next_cursor
        cases = {
            "first page": lambda: store.list_sessions(limit=50),
            "second page": lambda: store.list_sessions(limit=50, cursor=first.next_cursor),
            "all, children too": lambda: store.list_sessions(roots_only=False, limit=50),
            "archived only": lambda: store.list_sessions(archived=True, limit=50),
        }
        out = []
        for label, fn in cases.items():
            ms = statistics.median(timed(fn, 30)) * 1000
            target = label == "first page"
            out.append(
                Row(
                    f"list {n:,} sessions: {label} (ms)",
                    b.name,
                    f"{ms:.2f}",
                    target="< 20 ms" if target else "",
                    ok=("yes" if ms < 20 else "NO") if target else "",
                )
            )
    return out


def print_table(rows: list[Row]) -> None:
    heads = Row("measure", "backend", "wakeful", "baseline", "ratio", "target", "met")
    cols = list(vars(heads))
    widths = {c: max(len(getattr(r, c)) for r in [heads, *rows]) for c in cols}
    for r in [heads, None, *rows]:
        if r is None:
            print("  ".join("-" * widths[c] for c in cols))
            continue
        cells = [
            getattr(r, c).ljust(widths[c])
            if c in ("measure", "backend", "target", "ok")
            else getattr(r, c).rjust(widths[c])
            for c in cols
        ]
        print("  ".join(cells).rstrip())


def pg_reachable(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", metavar="ADMIN_URL", default=None)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--dir", type=Path, default=None, help="where SQLite files go")
    parser.add_argument("--admissions", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=100_000)
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
                rows += bench_admissions(b, args.admissions)
                rows += bench_transcript(b, args.messages)
                rows += bench_listing(b, args.sessions)
            finally:
                b.close()
    print_table(rows)


if __name__ == "__main__":
    main()
