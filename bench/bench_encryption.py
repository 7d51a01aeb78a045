"""Encryption at rest, on beside off, in the same run (docs/encryption.md).

    python bench/bench_encryption.py [--dir DIR] [--rounds N] [--db postgresql://…/postgres]

SQLite in a temporary directory (or DIR); with `--db`, PostgreSQL: a database made for each
store through that URL (an administrator's, as $WAKEFUL_TEST_PG) and dropped at the end, the
keyrings in the temporary directory. Each measure runs on a store without a key and on a
store with one, in rounds that alternate which goes first (the figure is the median):
- admissions per second: into one session, each into a new session (a new session makes
  its data key: one keyring append and fsync), and each with a 100 KB image of its own (a new
  blob under a new content key, wrapped for the session);
- step overhead: a scripted turn of 20 tool steps, milliseconds per step;
- load: reading a 2,000-message transcript, and listing 500 sessions (each title opened).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import JsonValue

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
    def __init__(self, root: Path, admin: str | None = None) -> None:
        self.root = root
        self.key = root / "master.key"
        self.key.write_text(new_master_key())
        self.admin = admin  # PostgreSQL: the URL databases are made through
        self.databases: list[str] = []
        self.n = 0

    def url(self) -> str:
        """A new, empty store: a SQLite file, or a PostgreSQL database made for it."""
        self.n += 1
        if self.admin is None:
            return str(self.root / f"s{self.n}.db")
        import psycopg

        name = f"wakeful_enc_{secrets.token_hex(5)}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.databases.append(name)
        return self.admin.rsplit("/", 1)[0] + "/" + name

    def settings(self, encrypted: bool) -> EncryptionConfig:
        """The store's encryption: the key and a keyring of its own, or none."""
        if not encrypted:
            return EncryptionConfig()
        return EncryptionConfig(key_file=str(self.key), keyring=str(self.root / f"{self.n}.ring"))

    def store(self, encrypted: bool) -> SqlStore:
        url = self.url()
        return open_store(url, encryption=self.settings(encrypted) if encrypted else None)

    def drop(self) -> None:
        """Drop the databases the run made."""
        if self.admin is None:
            return
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            for name in self.databases:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def admissions(
    b: Bench, encrypted: bool, *, new_sessions: bool = False, image: bool = False, n: int = 200
) -> float:
    """Admissions per second: into one session, each into a new session, or each with an image
    of its own into one session (a new blob: sealed under a new content key)."""
    store = b.store(encrypted)
    created = SessionCreated(title="bench", agent="build", model="scripted:x")
    try:
        store.admit("ses_one", None, "user", {"text": PROMPT}, "queue", create=created)

        def payload(i: int) -> dict[str, JsonValue]:
            if not image:
                return {"text": PROMPT}
            data = base64.b64encode(i.to_bytes(4, "big") + bytes(100_000)).decode()
            return {"blocks": [{"type": "image", "media_type": "image/png", "data": data}]}

        payloads = [payload(i) for i in range(n)]

        def run() -> None:
            for i in range(n):
                sid = f"ses_{i:05d}" if new_sessions else "ses_one"
                store.admit(sid, None, "user", payloads[i], "queue", create=created)

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
    url = b.url()
    config = Config(encryption=b.settings(encrypted))
    rt = Runtime(url, model=f"scripted:{script}", workspace=b.root, config=config)

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


def measure(b: Bench, rounds: int) -> dict[str, dict[bool, list[float]]]:
    """Each measure's figures, off and on, from `rounds` alternating rounds."""
    rows: dict[str, dict[bool, list[float]]] = {}

    def add(name: str, encrypted: bool, value: float) -> None:
        rows.setdefault(name, {False: [], True: []})[encrypted].append(value)

    for r in range(rounds):
        for encrypted in (False, True) if r % 2 == 0 else (True, False):  # each goes first
            add(
                "admissions/s, one session", encrypted, admissions(b, encrypted, new_sessions=False)
            )
            add(
                "admissions/s, new sessions", encrypted, admissions(b, encrypted, new_sessions=True)
            )
            add("admissions/s, 100 KB image", encrypted, admissions(b, encrypted, image=True))
            add("ms per step (20-step turn)", encrypted, step_ms(b, encrypted))
            transcript, listing = loads(b, encrypted)
            add("ms to load 2,000 messages", encrypted, transcript)
            add("ms to list 500 sessions", encrypted, listing)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", default=None, help="postgresql://… (an administrator's URL)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        b = Bench(Path(tmp), args.db)
        try:
            rows = measure(b, args.rounds)
        finally:
            b.drop()
        print(f"{'measure':32} {'off':>10} {'on':>10} {'on/off':>8}")
        for name, by in rows.items():
            off, on = statistics.median(by[False]), statistics.median(by[True])
            print(f"{name:32} {off:10.2f} {on:10.2f} {on / off:8.2f}")


if __name__ == "__main__":
    main()
