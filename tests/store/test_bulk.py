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
