"""The cyclic collector is paused while a transcript is decoded, and only then."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from wakeful.events import MessageAdded
from wakeful.messages import user
from wakeful.store import open_store
from wakeful.store._bulk import collector_paused


def test_the_collector_is_paused_inside_and_running_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_paused_by_someone_else_stays_paused() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_transcript_read_leaves_the_collector_running(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    try:
        sid = store.create_session().id
        store.append(sid, [MessageAdded(message=user(f"m{i}")) for i in range(3)])
        assert [m.text() for m in store.messages(sid)] == ["m0", "m1", "m2"]
        assert gc.isenabled()
    finally:
        store.close()


class _Node:
    """A weakly referable object that can sit in a reference cycle."""

    other: object = None


def test_what_the_block_made_is_not_walked_on_resume_but_still_collected() -> None:
    import weakref

    assert gc.get_freeze_count() == 0
    gc.collect()
    with collector_paused():
        kept = [[i] for i in range(5000)]  # far more than a young generation holds
        cycle = _Node()
        cycle.other = cycle
        dead = weakref.ref(cycle)
        del cycle
    # No young collection is due: the 5,000 lists went to the oldest generation unexamined.
    assert gc.get_count()[0] < 100
    assert gc.get_freeze_count() == 0
    assert len(kept) == 5000 and dead() is not None  # the cycle waits for a full collection
    gc.collect()
    assert dead() is None


def test_objects_the_process_froze_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            made = [[i] for i in range(1000)]
        assert gc.get_freeze_count() == frozen and len(made) == 1000
    finally:
        gc.unfreeze()
