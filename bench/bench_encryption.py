"""Encryption at rest, on beside off, in the same run (docs/encryption.md).

    python bench/bench_encryption.py [--dir DIR] [--rounds N]

SQLite in a temporary directory (or DIR). Each measure runs on a store without a key and on a
store with one, in alternating rounds (the figure is the median of the rounds):
- admissions per second: into one session, and each into a new session (a new session makes
  its data key: one keyring append and fsync);
- step overhead: a scripted turn of 20 tool steps, milliseconds per step;
- load: reading a 2,000-message transcript, and listing 500 sessions (each title opened).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from wakeful.config import Config, EncryptionConfig
from wakeful.events import MessageAdded, SessionCreated
from wakeful.execution import Runtime
from wakeful.messages import assistant
from wakeful.store import SqlStore, new_master_key, open_store

PROMPT = (
    "Please look at the failing test in tests/store and tell me why the follower misses events."
)
STEPS = 20


class Bench:
    def __init__(self, root: Path) -> None:
        self.root = root
        key = root / "master.key"
        key.write_text(new_master_key())
        self.on = EncryptionConfig(key_file=str(key))
        self.n = 0

    def store(self, encrypted: bool) -> SqlStore:
        self.n += 1
        db = self.root / f"s{self.n}.db"
        return open_store(str(db), encryption=self.on if encrypted else None)


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def admissions(b: Bench, encrypted: bool, *, new_sessions: bool, n: int = 200) -> float:
    store = b.store(encrypted)
    created = SessionCreated(title="bench", agent="build", model="scripted:x")
    try:
        store.admit("ses_one", None, "user", {"text": PROMPT}, "queue", create=created)

        def run() -> None:
            for i in range(n):
                sid = f"ses_{i:05d}" if new_sessions else "ses_one"
                store.admit(sid, None, "user", {"text": PROMPT}, "queue", create=created)

        return n / timed(run)
    finally:
        store.close()


def step_ms(b: Bench, encrypted: bool) -> float:
    script = b.root / "script.json"
    calls = [
        {"tool_calls": [{"name": "goal_set", "input": {"goal": f"g{i}"}}]} for i in range(STEPS)
    ]
    script.write_text(
        json.dumps({"rules": [{"match": ".", "replies": [*calls, {"text": "done"}]}]})
    )
    b.n += 1
    config = Config(encryption=b.on if encrypted else EncryptionConfig())
    rt = Runtime(
        str(b.root / f"s{b.n}.db"), model=f"scripted:{script}", workspace=b.root, config=config
    )

    async def turn() -> float:
        sid = rt.send(PROMPT, resume=False).session_id
        start = time.perf_counter()
        [result] = await rt.resume(sid)
        assert result.outcome == "completed", result
        took = time.perf_counter() - start
        await rt.aclose()
        return took

    return asyncio.run(turn()) * 1000 / (STEPS + 1)


def loads(b: Bench, encrypted: bool) -> tuple[float, float]:
    store = b.store(encrypted)
    try:
        sid = store.create_session("ses_long", title="long").id
        for start in range(0, 2000, 200):
            store.append(
                sid, [MessageAdded(message=assistant(f"{PROMPT} {start + i}")) for i in range(200)]
            )
        for i in range(500):
            store.create_session(f"ses_{i:05d}", title=f"{PROMPT[:60]} {i}")
        transcript = timed(lambda: store.messages(sid)) * 1000
        listing = timed(lambda: store.list_sessions(limit=500)) * 1000
        return transcript, listing
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        b = Bench(Path(tmp))
        rows: dict[str, dict[bool, list[float]]] = {}

        def add(name: str, encrypted: bool, value: float) -> None:
            rows.setdefault(name, {False: [], True: []})[encrypted].append(value)

        for _ in range(args.rounds):
            for encrypted in (False, True):
                add(
                    "admissions/s, one session",
                    encrypted,
                    admissions(b, encrypted, new_sessions=False),
                )
                add(
                    "admissions/s, new sessions",
                    encrypted,
                    admissions(b, encrypted, new_sessions=True),
                )
                add("ms per step (20-step turn)", encrypted, step_ms(b, encrypted))
                transcript, listing = loads(b, encrypted)
                add("ms to load 2,000 messages", encrypted, transcript)
                add("ms to list 500 sessions", encrypted, listing)
        print(f"{'measure':32} {'off':>10} {'on':>10} {'on/off':>8}")
        for name, by in rows.items():
            off, on = statistics.median(by[False]), statistics.median(by[True])
            print(f"{name:32} {off:10.2f} {on:10.2f} {on / off:8.2f}")


if __name__ == "__main__":
    main()
