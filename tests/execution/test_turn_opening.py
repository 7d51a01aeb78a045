"""A turn's opening reads are one store call (issue 24: recovery CPU and round trips)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.pg import fresh_database
from wakeful.events import SessionCreated, WorkStateUpdated
from wakeful.execution._port import StorePort
from wakeful.store import SqlStore, fence, open_store

SID = "ses_opening"


@contextmanager
def _url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield str(tmp_path / "s.db")
        return
    with fresh_database() as url:
        yield url


def _counted(store: SqlStore) -> Counter[str]:
    """Count every public store method the port calls."""
    calls: Counter[str] = Counter()
    for name in dir(store):
        method = getattr(store, name)
        if name.startswith("_") or not callable(method):
            continue

        def counted(*args, _name=name, _method=method, **kwargs):
            calls[_name] += 1
            return _method(*args, **kwargs)

        setattr(store, name, counted)
    return calls


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_turns_opening_reads_are_one_store_call(tmp_path: Path, backend: str):
    """What a turn reads before its first request (approvals, retry state, work state,
    compaction tail and boundary, recent usage, in the runner's order) is one store call,
    `turn_opening`: each was a store call of its own (a thread hop, and on PostgreSQL a round
    trip), six per turn."""
    with _url(backend, tmp_path) as url:
        store = open_store(url)
        store.admit(SID, "in_0", "user", {"text": "hi"}, create=SessionCreated(agent="build"))
        claim = store.claims.acquire(SID, "host/1/a", 60_000)
        assert claim is not None
        store.append(SID, [WorkStateUpdated(kind="goal", value="g")], fence(claim))
        port = StorePort(store, SID, fence(claim))
        calls = _counted(store)
        assert (await port.approvals()).step is None
        assert await port.retry_state() is None
        assert await port.work_state() == {"goal": "g"}
        assert await port.tail_boundary() is None
        assert await port.compaction_boundary() == 0
        assert await port.recent_usage(64) == []
        assert dict(calls) == {"read": 1}
        store.close()
