"""wakeful's store beside the OpenAI Agents SDK's `SQLiteSession` and a raw `sqlite3` floor.

    python bench/bench_peer_store.py [--messages N] [--chunk C] [--loads R] [--dir DIR]
        [--baseline-src TREE] [--no-search]

The same N messages (default 5,000, ~300 characters of text each, user and assistant in turn)
go into three SQLite files in DIR, each message committed before the next (WAL, synchronous
FULL for all three):

- the floor: one table `(id INTEGER PRIMARY KEY, session_id, data)`, one INSERT per commit of
  the message's JSON (`dump_message`);
- `SQLiteSession.add_items([item])` with the same message as its item;
- wakeful: `SqlStore.append(session, [MessageAdded(message)])`; beside it, on a fourth file,
  `SqlStore.admit` of the same texts as user inputs (issue 25, item 6).

Writes run interleaved in rounds of C commits per writer (order rotating) so the disk's drift
hits all alike; a writer's share is the median over rounds of its rate over the floor's rate in
the same round. Bytes per message are the pages in use after a checkpoint, less the empty
store's. Loads run in a new process each (R rounds, order rotating): the child imports (for wakeful,
the message and event models too, as `agents` is imported for SQLiteSession), then times
opening the file and reading the whole transcript (the floor: connect, SELECT + json.loads
of the same rows; SQLiteSession: `get_items()`; wakeful: `open_store` + `messages()`, and
beside it `plain_messages()`, the same transcript as JSON dicts, as `SQLiteSession` returns).
The children read compiled bytecode from a cache in DIR that an untimed load of each kind
fills first, as an installed package's is compiled at install. `--baseline-src TREE` adds the
typed and plain loads of another source tree (`TREE/src` first on `PYTHONPATH`, e.g. a `git
archive` of main) of the same file to the rounds, and prints them beside this tree's.
`--no-search` writes wakeful's two files with the full-text index turned off
(`SqlStore.set_search(False)` once the store exists; docs/search.md, "Without search").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_WORDS_SEED = 25


def _texts(n: int, size: int = 300) -> list[str]:
    """n texts of about `size` characters: words of a fixed vocabulary, Zipf-distributed."""
    rng = random.Random(_WORDS_SEED)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    out = []
    for _ in range(n):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < size:
            words += rng.choices(vocab, weights, k=10)
        out.append(" ".join(words)[:size])
    return out


def _used_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages, free, size = (
        conn.execute(f"PRAGMA {p}").fetchone()[0]
        for p in ("page_count", "freelist_count", "page_size")
    )
    conn.close()
    return int((pages - free) * size)


def _by_table(path: Path, empty: dict[str, int], n: int) -> list[tuple[str, float]]:
    """Bytes per message of each table and index (`dbstat`), the empty store's taken off."""
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    conn.close()
    grown = [(str(name), (size - empty.get(name, 0)) / n) for name, size in rows]
    return sorted([g for g in grown if g[1] >= 1], key=lambda g: -g[1])


def _table_sizes(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    out = {
        str(r[0]): int(r[1])
        for r in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")
    }
    conn.close()
    return out


SID = "ses_00000000000000000000bench"  # the shape of `new_session_id()`


@dataclass
class Work:
    """The same messages in each writer's form: texts, the message JSON, the SDK's items (that
    JSON as a dict) and wakeful's events, all built before any timing."""

    texts: list[str]
    dumped: list[str]
    items: list[Any]
    events: list[Any]


class Floor:
    name = "raw sqlite3 floor"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, session_id TEXT, data TEXT)")

    def write(self, work: Work, j: int) -> None:
        self.conn.execute("INSERT INTO t (session_id, data) VALUES (?, ?)", (SID, work.dumped[j]))

    def close(self) -> None:
        self.conn.close()


class Peer:
    name = "SQLiteSession (SDK)"

    def __init__(self, path: Path) -> None:
        from agents.memory import SQLiteSession

        self.path = path
        self.session = SQLiteSession(SID, str(path))
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self.session.get_items())  # the schema exists now

    def write(self, work: Work, j: int) -> None:
        self.loop.run_until_complete(self.session.add_items([work.items[j]]))

    def close(self) -> None:
        self.session.close()
        self.loop.close()


class Ours:
    name = "wakeful append"
    search = True  # `--no-search`: the store's full-text index turned off before any write

    def __init__(self, path: Path) -> None:
        from wakeful.store import open_store

        self.path = path
        self.store = open_store(str(path))
        if not self.search:
            self.store.set_search(False)
        self.store.create_session(SID)

    def write(self, work: Work, j: int) -> None:
        self.store.append(SID, [work.events[j]])

    def close(self) -> None:
        self.store.close()


class Admit(Ours):
    name = "wakeful admit"

    def write(self, work: Work, j: int) -> None:
        self.store.admit(SID, None, "user", {"text": work.texts[j]})


def _child(kind: str, path: str, n: int) -> None:
    """In a new process: time opening `path` and loading its whole transcript; print the wall
    and the CPU milliseconds."""
    kind = kind.removeprefix("base ")  # (the same load, run by the baseline tree)
    if kind == "floor":
        c0, t0 = time.process_time(), time.perf_counter()
        conn = sqlite3.connect(path)
        rows = conn.execute("SELECT data FROM t WHERE session_id = ? ORDER BY id", (SID,))
        got: list[Any] = [json.loads(r[0]) for r in rows.fetchall()]
        t1 = time.perf_counter()
    elif kind == "peer":
        from agents.memory import SQLiteSession

        c0, t0 = time.process_time(), time.perf_counter()
        session = SQLiteSession(SID, path)
        got = asyncio.run(session.get_items())  # type: ignore[arg-type]
        t1 = time.perf_counter()
    elif kind == "plain":
        from wakeful.store import open_store

        c0, t0 = time.process_time(), time.perf_counter()
        store = open_store(path)
        got = store.plain_messages(SID)
        t1 = time.perf_counter()
    else:
        import wakeful.events
        import wakeful.messages
        from wakeful.store import open_store

        # What the load returns is imported first, as `agents` (pydantic and all) is for
        # SQLiteSession: the store itself imports no model (cold start), so without this the
        # import of pydantic and the model modules would fall inside the timed load.
        wakeful.messages.Message, wakeful.events.MessageAdded  # noqa: B018
        if kind == "built":  # the validators built too, as `agents` builds its models at import
            from wakeful.events import MessageAdded, dump_event
            from wakeful.messages import user

            MessageAdded.model_validate_json(dump_event(MessageAdded(message=user("x"))))
        c0, t0 = time.process_time(), time.perf_counter()
        store = open_store(path)
        got = store.messages(SID)  # type: ignore[assignment]
        t1 = time.perf_counter()
    c1 = time.process_time()
    assert len(got) == n, (kind, len(got))
    print(f"{(t1 - t0) * 1000:.3f} {(c1 - c0) * 1000:.3f}")


def _load_ms(kind: str, path: Path, n: int, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU ms of one load in a new process (`env["BASELINE_SRC"]`, when set, first
    on the `PYTHONPATH` of the `base` kinds)."""
    if kind.startswith("base "):
        env = {
            **env,
            "PYTHONPATH": os.pathsep.join([env["BASELINE_SRC"], env.get("PYTHONPATH", "")]),
        }
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(path), str(n)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def main() -> None:
    """Write, measure the bytes, load in new processes; print the table of issue 25."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--chunk", type=int, default=250)
    parser.add_argument("--loads", type=int, default=9)
    parser.add_argument("--dir")
    parser.add_argument("--baseline-src", help="another source tree whose loads run beside")
    parser.add_argument("--no-search", action="store_true", help="wakeful without its index")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]))
        return
    Ours.search = not args.no_search
    from wakeful.events import MessageAdded
    from wakeful.messages import Message, TextBlock, dump_message

    n = args.messages
    texts = _texts(n)
    messages = [
        Message(role="user" if i % 2 == 0 else "assistant", blocks=(TextBlock(text=t),))
        for i, t in enumerate(texts)
    ]
    dumped = [dump_message(m) for m in messages]
    work = Work(
        texts, dumped, [json.loads(d) for d in dumped], [MessageAdded(message=m) for m in messages]
    )
    json_size = statistics.mean(len(d.encode()) for d in dumped)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        writers: list[Any] = [
            cls(Path(tmp) / f"{key}.db")
            for key, cls in (("floor", Floor), ("peer", Peer), ("ours", Ours), ("admit", Admit))
        ]
        empty = [_used_bytes(w.path) for w in writers]
        empty_tables = _table_sizes(writers[2].path)
        shares: list[list[float]] = [[] for _ in writers]
        for r, start in enumerate(range(0, n, args.chunk)):
            batch = range(start, min(n, start + args.chunk))
            rates = [0.0] * len(writers)
            for k in range(len(writers)):
                i = (k + r) % len(writers)
                write = writers[i].write
                t0 = time.perf_counter()
                for j in batch:
                    write(work, j)
                rates[i] = len(batch) / (time.perf_counter() - t0)
            for i, rate in enumerate(rates):
                shares[i].append(rate / rates[0])
        for w in writers:
            w.close()
        per_msg = [(_used_bytes(w.path) - e) / n for w, e in zip(writers, empty, strict=True)]
        tables = _by_table(writers[2].path, empty_tables, n)
        loads: dict[str, list[tuple[float, float]]] = {
            "floor": [],
            "peer": [],
            "ours": [],
            "plain": [],
            "built": [],
        }
        files = {"floor": "floor", "peer": "peer", "ours": "ours", "plain": "ours", "built": "ours"}
        if args.baseline_src:
            for kind in ("ours", "plain"):
                loads[f"base {kind}"], files[f"base {kind}"] = [], "ours"
        kinds = list(loads)
        # The children read compiled bytecode, as an installed package does (pip compiles it):
        # with PYTHONDONTWRITEBYTECODE set (or a source tree it cannot write to), every module
        # imported inside a timed load would be compiled from source again in each child. One
        # untimed load of each kind fills this cache first.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        if args.baseline_src:
            env["BASELINE_SRC"] = str(Path(args.baseline_src).resolve() / "src")
        for kind in kinds:
            _load_ms(kind, Path(tmp) / f"{files[kind]}.db", n, env)
        for r in range(args.loads):
            for k in range(len(kinds)):
                kind = kinds[(k + r) % len(kinds)]
                loads[kind].append(_load_ms(kind, Path(tmp) / f"{files[kind]}.db", n, env))
    wall = {k: statistics.median(w for w, _c in v) for k, v in loads.items()}
    cpu = {k: statistics.median(c for _w, c in v) for k, v in loads.items()}
    print(
        f"{n:,} messages, {json_size:.0f} bytes of JSON each on average; writes in rounds of "
        f"{args.chunk}; loads: median of {args.loads} new processes (wall, and CPU time)"
        + ("; wakeful's full-text index off" if args.no_search else "")
    )
    print(
        f"{'':<22}{'load ms':>9}{'x floor':>9}{'CPU ms':>9}{'x floor':>9}"
        f"{'bytes/msg':>11}{'x json':>8}{'commits/s x floor':>19}"
    )
    for i, (w, key) in enumerate(zip(writers, ("floor", "peer", "ours", "admit"), strict=True)):
        load = (
            f"{wall[key]:9.1f}{wall[key] / wall['floor']:8.2f}x"
            f"{cpu[key]:9.1f}{cpu[key] / cpu['floor']:8.2f}x"
            if key in loads
            else " " * 36
        )
        print(
            f"{w.name:<22}{load}{per_msg[i]:>11.0f}{per_msg[i] / json_size:7.2f}x"
            f"{statistics.median(shares[i]):18.2f}x"
        )
    print(
        f"{'wakeful, plain dicts':<22}{wall['plain']:9.1f}{wall['plain'] / wall['floor']:8.2f}x"
        f"{cpu['plain']:9.1f}{cpu['plain'] / cpu['floor']:8.2f}x   (the same file: "
        "plain_messages, JSON dicts as SQLiteSession returns, not Message models)"
    )
    print(
        f"{'wakeful, models built':<22}{wall['built']:9.1f}{wall['built'] / wall['floor']:8.2f}x"
        f"{cpu['built']:9.1f}{cpu['built'] / cpu['floor']:8.2f}x   (the same load, the message "
        "models' validators built before the clock starts, as agents' are at its import)"
    )
    for key in ("ours", "plain") if args.baseline_src else ():
        base = f"base {key}"
        print(
            f"{'baseline, ' + ('typed' if key == 'ours' else 'plain'):<22}"
            f"{wall[base]:9.1f}{wall[base] / wall['floor']:8.2f}x"
            f"{cpu[base]:9.1f}{cpu[base] / cpu['floor']:8.2f}x   (the same file, loaded by "
            f"{args.baseline_src}; this tree: {cpu[key] / cpu['floor']:.2f}x)"
        )
    print(
        "wakeful append, bytes per message by table and index: "
        + ", ".join(f"{name} {size:.0f}" for name, size in tables)
    )
    print(
        f"targets: load <= 1.3x floor: {wall['ours'] / wall['floor']:.2f}x wall, "
        f"{cpu['ours'] / cpu['floor']:.2f}x CPU; load <= SQLiteSession: "
        f"{wall['ours'] / wall['peer']:.2f}x wall, {cpu['ours'] / cpu['peer']:.2f}x CPU; "
        f"plain load: {wall['plain'] / wall['floor']:.2f}x wall, "
        f"{cpu['plain'] / cpu['floor']:.2f}x CPU of the floor; "
        f"bytes <= 1.5x json: {per_msg[2] / json_size:.2f}x; bytes < SQLiteSession: "
        f"{per_msg[2]:.0f} vs {per_msg[1]:.0f}; append, admit >= 0.5x floor: "
        f"{statistics.median(shares[2]):.2f}x, {statistics.median(shares[3]):.2f}x"
    )
    search = sum(size for name, size in tables if name.startswith("search_"))
    print(
        f"issue 36: bytes <= 1.8x json: {per_msg[2] / json_size:.2f}x, of which the search "
        f"index <= 0.5x: {search / json_size:.2f}x and the log and projections <= 1.3x: "
        f"{(per_msg[2] - search) / json_size:.2f}x; typed load <= 1.5x floor: "
        f"{cpu['ours'] / cpu['floor']:.2f}x CPU; append, admit >= 0.6x floor: "
        f"{statistics.median(shares[2]):.2f}x, {statistics.median(shares[3]):.2f}x"
    )


if __name__ == "__main__":
    main()
