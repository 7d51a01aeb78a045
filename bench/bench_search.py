"""Full-text search over 100,000 sessions, next to the raw index query on the same database.

    python bench/bench_search.py [--postgres ADMIN_URL | --no-postgres] [--dir DIR]
                                 [--sessions N] [--messages M] [--words W]

Builds N sessions of M messages of about W words each (a vocabulary of pseudo-words with a Zipf
distribution, so postings look like a real corpus), bulk-loaded into the store's own tables
(the index triggers and the generated `tsvector` do their usual work), plus one deep session of
300 messages written through `SqlStore.append` (a `message.added` each), with a word nobody else uses in message 250.

Measures, as the median of 30 runs, each next to its baseline in the same database:
- `store.search(word)` for that rare word (target from the issue: found first, in milliseconds),
  against the raw index query (SQLite: FTS5 MATCH ordered by bm25; PostgreSQL: `tsv @@ query`
  ordered by `ts_rank`), both limited to 20;
- the same for two words, for a prefix, and for the corpus's most common word (every session
  matches; ranking reads every posting);
- once: `LIKE '%word%'` over the same text, what finding the word costs without the index.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from bench.bench_store import DEFAULT_PG, Row, pg_reachable, print_table, store_at, timed
from wakeful.events import MessageAdded
from wakeful.messages import assistant, user
from wakeful.store import SqlStore

NEEDLE = "quixotrain"
DEEP_MESSAGES = 300
NEEDLE_AT = 250
SESSION_COLS = "id, root_id, title, created_ms, updated_ms, listed_ms, last_seq, model"


def vocabulary(n: int, rng: random.Random) -> list[str]:
    """n distinct pseudo-words of two to four syllables."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    words.discard(NEEDLE)
    return sorted(words)


class Corpus:
    """Messages drawn from the vocabulary with Zipf weights (word k has weight 1/k)."""

    def __init__(self, seed: int = 7, size: int = 20_000) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary(size, self.rng)
        self.weights = [1 / (k + 1) for k in range(size)]

    def text(self, n: int) -> str:
        return " ".join(self.rng.choices(self.words, self.weights, k=n)) + "."


def bulk_rows(
    corpus: Corpus, sessions: int, messages: int, words: int
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Session rows and their index rows (title at seq 0, messages at 1..M)."""
    base = 1_700_000_000_000
    rows: list[tuple[Any, ...]] = []
    docs: list[tuple[Any, ...]] = []
    for i in range(sessions):
        sid = f"ses_{i:024x}"
        at = base + i * 1000
        title = corpus.text(5)
        rows.append((sid, sid, title, at, at, at, messages, "scripted:bench"))
        docs.append((sid, 0, title))
        docs += [(sid, seq, corpus.text(words)) for seq in range(1, messages + 1)]
    return rows, docs


class Sqlite:
    name = "sqlite"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def url(self) -> str:
        return str(self.folder / "search.db")

    def load(self, url: str, rows: list[tuple[Any, ...]], docs: list[tuple[Any, ...]]) -> None:
        import sqlite3

        conn = sqlite3.connect(url)
        with conn:
            conn.executemany(
                f"INSERT INTO sessions ({SESSION_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            conn.executemany(
                "INSERT INTO search_docs (session_id, seq, body) VALUES (?, ?, ?)", docs
            )
        conn.execute("INSERT INTO search_fts (search_fts) VALUES ('optimize')")  # as after merges
        conn.execute("ANALYZE")
        conn.close()

    def raw(self, url: str) -> tuple[Callable[[str], object], Callable[[str], object]]:
        """The raw index query and a LIKE scan, on a connection of their own."""
        import sqlite3

        conn = sqlite3.connect(url)

        def index(match: str) -> object:
            return conn.execute(
                "SELECT rowid FROM search_fts WHERE search_fts MATCH ? ORDER BY rank LIMIT 20",
                (match,),
            ).fetchall()

        def scan(word: str) -> object:
            return conn.execute(
                "SELECT DISTINCT session_id FROM search_docs WHERE body LIKE ? LIMIT 20",
                (f"%{word}%",),
            ).fetchall()

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
        name = f"wakeful_bench_search_{random.getrandbits(32):08x}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.made.append(name)
        return f"{self.admin.rsplit('/', 1)[0]}/{name}"

    def load(self, url: str, rows: list[tuple[Any, ...]], docs: list[tuple[Any, ...]]) -> None:
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            with cur.copy(f"COPY sessions ({SESSION_COLS}) FROM STDIN") as copy:
                for r in rows:
                    copy.write_row(r)
            # The texts in a table of the bench's own: the store's rows keep no text
            # (migration 21), and the LIKE scan it is compared with reads this one.
            cur.execute("CREATE TABLE bench_docs (session_id TEXT, seq BIGINT, body TEXT)")
            with cur.copy("COPY bench_docs (session_id, seq, body) FROM STDIN") as copy:
                for d in docs:
                    copy.write_row(d)
            cur.execute(
                "INSERT INTO search_docs (session_id, seq, tsv) "
                "SELECT session_id, seq, wakeful_search_tsv(body) FROM bench_docs"
            )
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")  # what autovacuum does after a bulk load

    def raw(self, url: str) -> tuple[Callable[[str], object], Callable[[str], object]]:
        conn = psycopg.connect(url, autocommit=True)
        self.conns.append(conn)

        def index(query: str) -> object:
            return conn.execute(
                "SELECT id FROM search_docs, to_tsquery('simple', %s) AS q(q) WHERE tsv @@ q.q "
                "ORDER BY ts_rank(tsv, q.q) DESC LIMIT 20",
                (query,),
            ).fetchall()

        def scan(word: str) -> object:
            return conn.execute(
                "SELECT DISTINCT session_id FROM bench_docs WHERE body LIKE %s LIMIT 20",
                (f"%{word}%",),
            ).fetchall()

        return index, scan

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        with psycopg.connect(self.admin, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


Backend = Sqlite | Postgres


def deep_session(store: SqlStore, corpus: Corpus, words: int) -> str:
    """A session of 300 messages, through the store; message 250 holds the needle."""
    sid = store.create_session(title="the deep one", model="scripted:bench").id
    for i in range(DEEP_MESSAGES):
        text = corpus.text(words)
        if i == NEEDLE_AT:
            text = f"{text} the {NEEDLE} finally turned up here"
        store.append(sid, [MessageAdded(message=(user if i % 2 == 0 else assistant)(text))])
    return sid


def bench(b: Backend, sessions: int, messages: int, words: int) -> list[Row]:
    corpus = Corpus()
    url = b.url()
    out: list[Row] = []
    with store_at(url) as store:
        started = time.perf_counter()
        b.load(url, *bulk_rows(corpus, sessions, messages, words))
        deep = deep_session(store, corpus, words)
        loaded = time.perf_counter() - started
        print(
            f"{b.name}: {sessions:,} sessions, {sessions * (messages + 1):,} index rows "
            f"loaded in {loaded:.0f} s"
        )
        [hit, *_] = store.search(NEEDLE).hits
        found_first = hit.session.id == deep and NEEDLE in hit.snippet
        index, scan = b.raw(url)
        common = corpus.words[0]
        pair = f"{NEEDLE} finally"
        prefix = NEEDLE[:6] + "*"
        cases = [
            ("a rare word, deep in one session", NEEDLE, NEEDLE),
            ("two words", pair, f"{NEEDLE} & finally" if b.name == "postgres" else pair),
            (
                "a prefix",
                prefix,
                f"{prefix[:-1]}:*" if b.name == "postgres" else f'"{prefix[:-1]}"*',
            ),
            (f"the most common word ({common})", common, common),
        ]
        for label, text, raw in cases:
            ours = statistics.median(timed(lambda text=text: store.search(text), 30)) * 1000
            base = statistics.median(timed(lambda raw=raw: index(raw), 30)) * 1000
            rare = text == NEEDLE
            out.append(
                Row(
                    f"search {sessions:,} sessions: {label} (ms)",
                    b.name,
                    f"{ours:.2f}",
                    f"{base:.2f}",
                    f"{ours / base:.2f}x" if base else "",
                    "found first, ms" if rare else "",
                    ("yes" if found_first else "NO") if rare else "",
                )
            )
        like = timed(lambda: scan(NEEDLE), 1)[0] * 1000
        out.append(
            Row(f"LIKE '%{NEEDLE}%' over the same text, no index (ms)", b.name, f"{like:.0f}")
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", metavar="ADMIN_URL", default=None)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite file goes")
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=6, help="messages per bulk session")
    parser.add_argument("--words", type=int, default=30, help="words per message")
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
                rows += bench(b, args.sessions, args.messages, args.words)
            finally:
                b.close()
    print_table(rows)


if __name__ == "__main__":
    main()
