"""What a write costs on the file-map store (`store/_filemap.py`) as its session grows: each
write saves the whole map (the database image and the two readable views), so the cost grows
with the session, where a SQLite file's does not.

    python -m bench.bench_filemap [--sizes 100,1000,4000] [--writes 20] [--dir DIR]

For each size, a session of that many messages (user and assistant, ~200 characters each) is
built, then `--writes` single-message appends are timed on: the file-map store over a
directory, the same over a dict in memory (no I/O: the serialization alone), the in-memory
store (no map), and a SQLite file. Prints the median milliseconds per append and the size of
the saved map.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from wakeful.events import MessageAdded
from wakeful.messages import assistant, user
from wakeful.store import SqlStore, file_map_store, memory_store, open_store


class DictMap:
    """A `FileMap` in memory."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def get(self) -> Mapping[str, str]:
        return dict(self.files)

    def save(self, files: Mapping[str, str]) -> None:
        self.files = dict(files)

    def delete(self) -> None:
        self.files = {}


def median_append_ms(store: SqlStore, size: int, writes: int) -> float:
    sid = store.create_session(title="bench").id
    pad = "lorem ipsum dolor sit amet " * 7
    batch = [
        MessageAdded(message=(user if i % 2 == 0 else assistant)(f"{i} {pad}")) for i in range(size)
    ]
    store.append(sid, batch)
    times = []
    for i in range(writes):
        started = time.perf_counter()
        store.append(sid, [MessageAdded(message=user(f"more {i} {pad}"))])
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,4000")
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-filemap-"))
    print(
        f"{'messages':>9}  {'file map (dir)':>15}  {'file map (dict)':>16}  "
        f"{'memory':>8}  {'sqlite file':>12}  {'map size':>10}"
    )
    for size in (int(x) for x in args.sizes.split(",")):
        where = base / f"map-{size}"
        kinds: dict[str, Callable[[], SqlStore]] = {
            "dir": lambda where=where: file_map_store(where),  # type: ignore[misc]
            "dict": lambda: file_map_store(DictMap()),
            "memory": memory_store,
            "sqlite": lambda db=str(base / f"s-{size}.db"): open_store(db),  # type: ignore[misc]
        }
        ms = {}
        for name, make in kinds.items():
            store = make()
            ms[name] = median_append_ms(store, size, args.writes)
            store.close()
        mapped = sum(p.stat().st_size for p in where.iterdir() if not p.name.startswith("."))
        print(
            f"{size:>9}  {ms['dir']:>12.2f} ms  {ms['dict']:>13.2f} ms  {ms['memory']:>5.2f} ms  "
            f"{ms['sqlite']:>9.2f} ms  {mapped / 1e6:>7.2f} MB"
        )


if __name__ == "__main__":
    main()
