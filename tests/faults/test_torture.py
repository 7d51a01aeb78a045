"""Issue 16's torture run: random SIGKILLs of drivers while the store itself misbehaves.

Two long-lived `wakeful worker` processes share the store with drivers (`run --session`,
`worker --once`) that are SIGKILLed at random moments, 60 times per backend. Meanwhile, at
random moments, another process holds SQLite's write lock for 6 s (past the 5 s busy timeout),
or the PostgreSQL server ends every connection of the store (`pg_terminate_backend`). The jobs'
tool calls append to a ledger. At the end every call is settled, every turn terminal, both
workers alive (and they exit 0 on SIGTERM, without a traceback), nothing lost or duplicated:
`check_session` of the crash tests, ledger included, so no tool call is left `running` and
the persisted transcript is wire-valid (a tool result that cannot be saved is retried with the
claim kept, and a call whose driver died is settled by the next drain: issue 16, item 1).
`WAKEFUL_TORTURE_KILLS` sets the kills per backend, `WAKEFUL_TORTURE_SEED` replays a run.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from tests.execution.helpers import (
    check_session,
    cli_env,
    create_session,
    finish,
    job_script,
    kill_after,
    ledger_lines,
    make_workspace,
    wait_for,
    wakeful,
)
from tests.pg import fresh_database
from wakeful.errors import StoreError
from wakeful.events import TurnEnded
from wakeful.store import open_store

from .helpers import assert_clean, hold_lock, terminate

pytestmark = pytest.mark.slow

T = TypeVar("T")
SESSIONS = [f"ses_tort{i}" for i in range(3)]


def patiently(fn: Callable[[], T]) -> T:
    """The test's own store calls wait out the faults it causes, as a worker would."""
    while True:
        try:
            return fn()
        except StoreError as err:
            if not err.retryable:
                raise
            time.sleep(0.2)


class Torment:
    """A thread doing `hurt()` at random moments until stopped; counts what it did."""

    def __init__(self, rng: random.Random, pause: tuple[float, float], hurt: Callable[[], int]):
        self.rng, self.pause, self.hurt = rng, pause, hurt
        self.times = 0
        self.hits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.rng.uniform(*self.pause)):
            self.hits += self.hurt()
            self.times += 1

    @contextmanager
    def running(self) -> Iterator[Torment]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=60)


def hold_sqlite(db: str) -> Callable[[], int]:
    def hurt() -> int:
        finish(hold_lock(db, 6.0), timeout=120)  # 6 s, past the 5 s busy timeout
        return 1

    return hurt


def end_connections(url: str) -> Callable[[], int]:
    return lambda: terminate(url)


def torture(tmp_path: Path, db: str, hurt: Callable[[], int], pause: tuple[float, float]) -> None:
    kills_wanted = int(os.environ.get("WAKEFUL_TORTURE_KILLS", "60"))
    seed = int(os.environ.get("WAKEFUL_TORTURE_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"torture seed {seed}", flush=True)  # shown with a failure: WAKEFUL_TORTURE_SEED
    work = make_workspace(tmp_path, lease_ms=3_000)
    store = open_store(db)
    tags = iter(f"T{i}" for i in range(100_000))
    # a run that ends before its kill takes new prompts: enough rules for many more runs than kills
    model = job_script(tmp_path / "script.json", [f"T{i}" for i in range(30 * kills_wanted + 30)])
    env = cli_env(db, tmp_path)
    for sid in SESSIONS:
        create_session(store, sid, model, [f"job {next(tags)}" for _ in range(2)], workspace=work)
    workers = [wakeful(["worker"], env, work) for _ in range(2)]
    started = time.monotonic()
    kills = runs = 0
    try:
        with Torment(rng, pause, hurt).running() as torment:
            while kills < kills_wanted:
                sid = rng.choice(SESSIONS)
                top_up = 3 - len(patiently(lambda sid=sid: store.pending(sid)))
                for _ in range(max(top_up, 0)):
                    prompt = f"job {next(tags)}"
                    patiently(lambda sid=sid, p=prompt: create_session(store, sid, model, [p]))
                args = ["run", "--session", sid] if rng.random() < 0.6 else ["worker", "--once"]
                proc = wakeful(args, env, work)
                kills += kill_after(proc, rng.uniform(0.3, 2.0))
                proc.communicate()
                runs += 1
                assert [w.poll() for w in workers] == [None, None], "a worker died"
        wait_for(lambda: all(not store.pending(s) and all(t.status != "running"
                                                          for t in store.turns(s))
                             for s in SESSIONS), timeout=300)  # fmt: skip
        assert [w.poll() for w in workers] == [None, None], "a worker died"
        ledger = ledger_lines(work)
        totals: Counter[str] = Counter()
        ends: Counter[str] = Counter()
        why: Counter[str] = Counter()  # the errors that ended turns, shown with the figures
        for sid in SESSIONS:
            totals.update(check_session(store, sid, ledger))
            for e in store.events(sid, types=["turn.ended"]):
                end = e.event
                assert isinstance(end, TurnEnded)
                ends[f"{end.outcome}:{end.error_kind or '-'}"] += 1
                if end.error:
                    why[end.error[:120]] += 1
    finally:
        outputs = []
        for w in workers:
            w.send_signal(signal.SIGTERM)
            outputs.append(finish(w, timeout=60))
        store.close()
    for code, _out, err in outputs:
        assert code == 0, err
        assert_clean(err)
    faults = sum(err.count("store fault") for _code, _out, err in outputs)
    saves = sum(err.count("store fault saving tool results") for _code, _out, err in outputs)
    print(
        f"\nseed {seed}: {kills} kills in {runs} driver runs, {torment.times} store faults "
        f"caused ({torment.hits} locks held / connections ended) in "
        f"{time.monotonic() - started:.0f}s; workers alive, {faults} outages logged by them "
        f"({saves} while saving tool results, each waited out); "
        f"{dict(totals)}; turn ends {dict(ends)} ({dict(why)}); ledger lines {sum(ledger.values())}, each once"
    )


def test_torture_sqlite(tmp_path: Path):
    db = str(tmp_path / "sessions.db")
    torture(tmp_path, db, hold_sqlite(db), pause=(1.0, 6.0))


@pytest.mark.postgres
def test_torture_postgres(tmp_path: Path):
    with fresh_database() as url:
        torture(tmp_path, url, end_connections(url), pause=(0.3, 3.0))
