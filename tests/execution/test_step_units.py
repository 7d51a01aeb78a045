"""What one drive costs the store, in units of work (issue 36 item 1: commits per step).

A fresh session's one input answered in three model steps (two tool calls, then a text) by a
`Runtime` over a real store: every `backend.transaction` the drive opens is counted, read or
write, by the store method that opened it. On SQLite each unit is a commit (a read's too); on
PostgreSQL a write is one, and a read one per round trip (its statements autocommit at their
Sync). The bounds are what the drive costs now; a change that adds a unit per drive or per
step fails here, and says which.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_database
from wakeful.config import Config, ExecutionConfig
from wakeful.execution import Runtime


@contextmanager
def _url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield str(tmp_path / "s.db")
        return
    with fresh_database() as url:
        yield url


def _script(tmp_path: Path) -> str:
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}
    rules = [{"match": ".", "replies": [call, call, {"text": "done"}]}]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": rules, "chunk_delay_ms": 0}))
    return f"scripted:{path}"


def _count_units(rt: Runtime) -> Counter[str]:
    """Count the units the store's backend opens, as 'read NAME' / 'write NAME' where NAME is
    the store function that opened it (a spy on the real backend)."""
    import sys

    units: Counter[str] = Counter()
    backend: Any = rt.store.backend  # type: ignore[attr-defined]
    opened = backend.transaction

    def counted(*, write: bool, batched: bool = False) -> AbstractContextManager[Any]:
        frame = sys._getframe(1)
        name = ""
        while frame is not None:  # the outermost store function of this call
            if "/wakeful/store/" in frame.f_code.co_filename:
                name = frame.f_code.co_name
            frame = frame.f_back  # type: ignore[assignment]
        units[f"{'write' if write else 'read'} {name}"] += 1
        return opened(write=write, batched=batched)

    backend.transaction = counted
    return units


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_three_step_drive_costs_seven_writes_and_few_reads(tmp_path: Path, backend: str):
    """Writes: the claim with the delivery and the first delta, the first receipt, three step
    boundaries (each reply with its results and the next receipt), the turn's end, the
    release. Reads: the session row (`resume`), the newest event id (the interrupt watcher's
    start), the context (row, facts, `/mcp` state), the prelude's instruction state, the
    turn's opening, the first history read, the last promotion's look. The turn's first step
    renders the first delta the claim's unit wrote without reading it back (four reads and the
    instruction state before)."""
    config = Config(execution=ExecutionConfig(poll_interval_ms=60_000))  # no watcher polls
    with _url(backend, tmp_path) as url:
        rt = Runtime(url, model=_script(tmp_path), workspace=tmp_path, config=config)
        sid = rt.send("work", resume=False).session_id
        units = _count_units(rt)
        [turn] = await rt.resume(sid)
        units = Counter(units)  # (closing the runtime is no part of the drive)
        await rt.aclose()
        assert turn.outcome == "completed" and turn.steps == 3
        writes = sum(n for k, n in units.items() if k.startswith("write"))
        reads = sum(n for k, n in units.items() if k.startswith("read"))
        assert writes <= 7, units
        assert reads <= 8, units
        instruction_reads = {"live_compactions", "get_blobs", "events", "plain_events"}
        assert not [k for k in units if k.split()[1] in instruction_reads], units
