"""What one commit costs: the raw floor, `SqlStore.append` and `SqlStore.admit` on SQLite.

    python bench/bench_commit.py [--commits N] [--warm W] [--dir DIR]

The commits of `bench_peer_store.py` (the floor: one INSERT of a message's JSON per commit; an
append of one `message.added`; an admission of the same text), each kind on its own file, W
commits first, then N measured. Printed per commit, counted (not timed) where it can be:

- statements sent on the write connection (`set_trace_callback`; those of triggers and FTS5's
  own, traced as `--` comments, apart);
- WAL pages written, by table and index: N commits with `wal_autocheckpoint` off, the frame
  headers of the WAL read back and each page mapped to its b-tree by `dbstat`;
- CPU (`time.process_time`, user and system) with `synchronous = OFF` (the process's own work)
  and `FULL` (plus the kernel's work at the sync), and wall time with FULL.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sqlite3
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.bench_peer_store import SID, _texts

Write = Callable[[int], object]


def _writer(kind: str, path: Path, texts: list[str]) -> tuple[sqlite3.Connection, Write]:
    """The write connection of `kind` on a new file at `path`, and its one-commit write."""
    from wakeful.events import MessageAdded
    from wakeful.messages import Message, TextBlock, dump_message
    from wakeful.store import open_store

    messages = [
        Message(role="user" if i % 2 == 0 else "assistant", blocks=(TextBlock(text=t),))
        for i, t in enumerate(texts)
    ]
    if kind == "floor":
        dumped = [dump_message(m) for m in messages]
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, session_id TEXT, data TEXT)")
        insert = "INSERT INTO t (session_id, data) VALUES (?, ?)"
        return conn, lambda j: conn.execute(insert, (SID, dumped[j]))
    store = open_store(str(path))
    store.create_session(SID)
    wconn: sqlite3.Connection = store.backend._conn  # type: ignore[attr-defined]
    if kind == "append":
        events = [MessageAdded(message=m) for m in messages]
        return wconn, lambda j: store.append(SID, [events[j]])
    return wconn, lambda j: store.admit(SID, None, "user", {"text": texts[j]})


def _pages(path: Path, conn: sqlite3.Connection) -> list[int]:
    """The page number of each frame in the WAL of `path` (read while `conn` keeps it)."""
    data = Path(f"{path}-wal").read_bytes()
    size = struct.unpack(">I", data[8:12])[0]
    return [
        struct.unpack(">I", data[off : off + 4])[0] for off in range(32, len(data) - 23, 24 + size)
    ]


def measure(kind: str, folder: Path, n: int, warm: int) -> None:
    """Print the per-commit figures of `kind`."""
    texts = _texts(warm + n)
    runs: dict[str, float] = {}
    for sync in ("OFF", "FULL"):
        conn, write = _writer(kind, folder / f"{kind}-{sync}.db", texts)
        conn.execute(f"PRAGMA synchronous = {sync}")
        for j in range(warm):
            write(j)
        c0, t0 = time.process_time(), time.perf_counter()
        for j in range(warm, warm + n):
            write(j)
        runs[f"cpu {sync}"] = (time.process_time() - c0) / n * 1e6
        runs[f"wall {sync}"] = (time.perf_counter() - t0) / n * 1e6
    path = folder / f"{kind}-count.db"
    conn, write = _writer(kind, path, texts)
    for j in range(warm):
        write(j)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    sent: collections.Counter[str] = collections.Counter()
    last = [""]

    def trace(sql: str) -> None:
        # A trigger's start is traced as the statement that fired it, again: counted once.
        if sql.startswith("--"):
            sent["(triggers' and FTS5's own, traced as comments)"] += 1
        elif sql != last[0]:
            sent[re.sub(r"'(?:[^']|'')*'|\b\d+\b", "?", sql)[:60]] += 1
            last[0] = sql

    conn.set_trace_callback(trace)
    for j in range(warm, warm + n):
        write(j)
    conn.set_trace_callback(None)
    owner = {int(p): str(name) for name, p in conn.execute("SELECT name, pageno FROM dbstat")}
    pages = collections.Counter(owner.get(p, "?") for p in _pages(path, conn))
    print(
        f"{kind}: CPU {runs['cpu OFF']:.0f} us (synchronous OFF), {runs['cpu FULL']:.0f} us "
        f"(FULL); wall {runs['wall FULL']:.0f} us (FULL); "
        f"{sum(pages.values()) / n:.2f} WAL pages, "
        f"{sum(c for s, c in sent.items() if not s.startswith('(')) / n:.1f} statements"
    )
    print("  pages: " + ", ".join(f"{name} {c / n:.2f}" for name, c in pages.most_common()))
    print("  statements: " + "; ".join(f"{c / n:.2f} {s}" for s, c in sent.most_common()))


def main() -> None:
    """Measure the floor, an append and an admission, one after the other, on one disk."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--warm", type=int, default=500)
    parser.add_argument("--dir")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for kind in ("floor", "append", "admit"):
            measure(kind, Path(tmp), args.commits, args.warm)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
