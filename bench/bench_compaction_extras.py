"""What the tail strategy and the idle scan cost, each beside its baseline in the same run.

Run: `python bench/bench_compaction_extras.py [--messages N] [--sessions S]`

1. Building a step's request over an N-message history (rounds of user text, a `read_file` call,
   its result, a reply) with a `tail` hide point three quarters of the way in, against the same
   request without one (the baseline): the stubs are made once per message object, so a later
   step pays a list walk. Both warm (the same messages, as consecutive steps send them); the
   best of 15 each, alternating.
2. The idle scan (`SqlStore.claims.cache_expiring`) over S idle sessions of which all are in the
   cache window (the worst case: every one is examined), against the worker's existing
   `startable_sessions` scan of the same store (the baseline every poll already pays), and
   the locations query every scan makes first (each location's own settings decide; it runs
   whatever the settings say, over the sessions active within a day).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_compaction import conversation  # noqa: E402

from wakeful.clock import FakeClock  # noqa: E402
from wakeful.config import DAY_MS  # noqa: E402
from wakeful.events import MessageAdded, TurnEnded, TurnStarted, UsageRecorded  # noqa: E402
from wakeful.runner import Section  # noqa: E402
from wakeful.runner._prompt import build_request  # noqa: E402
from wakeful.runner._tail import TAIL_SECTION  # noqa: E402
from wakeful.store import open_store  # noqa: E402


def best_of(sections: list[Section], history: list) -> float:
    start = time.perf_counter()
    build_request(sections, history, "scripted")
    return time.perf_counter() - start


def requests(n: int, rounds: int = 15) -> tuple[float, float]:
    """The best of `rounds` builds each, the two kinds alternating (a shared machine's noise
    hits both alike), after one build each that warms the memos as a first step does."""
    history = conversation(n)
    base = [Section("system.agent", "agent:build", "You are careful.")]
    cut = history[(n * 3 // 4) // 4 * 4].id  # a user-input boundary
    tailed = [*base, Section(TAIL_SECTION, "compaction", cut)]
    plain, tail = best_of(base, history), best_of(tailed, history)
    for _ in range(rounds):
        plain = min(plain, best_of(base, history))
        tail = min(tail, best_of(tailed, history))
    return plain, tail


def scans(folder: Path, sessions: int) -> tuple[float, float, float, int]:
    clock = FakeClock()
    store = open_store(str(folder / "bench.db"), clock=clock)
    for i in range(sessions):
        sid = store.create_session().id
        started = TurnStarted(turn_id=f"t{i}", input_ids=())
        usage = UsageRecorded(input_tokens=150_000, output_tokens=100)
        ended = TurnEnded(turn_id=f"t{i}", outcome="completed")
        store.append(
            sid, [started, *[MessageAdded(message=m) for m in conversation(8)], usage, ended]
        )
    clock.advance(250_000)
    now = clock.now_ms()
    start = time.perf_counter()
    found = store.claims.cache_expiring(now, 300_000, 60_000, 100_000, limit=sessions)
    idle = time.perf_counter() - start
    start = time.perf_counter()
    store.claims.idle_locations(
        now - DAY_MS
    )  # every scan, before it reads each location's settings
    locations = time.perf_counter() - start
    start = time.perf_counter()
    store.claims.startable()
    baseline = time.perf_counter() - start
    store.close()
    return idle, locations, baseline, len(found)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=1_000)
    args = parser.parse_args()
    plain, tail = requests(args.messages)
    with tempfile.TemporaryDirectory() as tmp:
        idle, locations, baseline, found = scans(Path(tmp), args.sessions)
    print(f"build a step's request over {args.messages:,} messages:")
    print(f"  no hide point (baseline)                 {plain * 1000:9.2f} ms")
    print(f"  tail hide point at 3/4                   {tail * 1000:9.2f} ms")
    print(f"scan {args.sessions:,} idle sessions in their cache window (SQLite):")
    print(f"  startable_sessions, every poll (baseline) {baseline * 1000:8.2f} ms")
    print(f"  idle_locations, every 10 s                {locations * 1000:8.2f} ms")
    print(f"  cache_expiring, every 10 s ({found} found)   {idle * 1000:8.2f} ms")


if __name__ == "__main__":
    main()
