"""`memory_store()`: the in-memory store as a named constructor (the seed's `createMemoryStore`).
The store contract suite runs on it too (`test_contract.py`); here, what is its own: each call is
a store of its own, a runtime drives turns on it, and nothing outlives it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from wakeful.execution import Runtime
from wakeful.store import SqlStore, memory_store


def test_each_memory_store_is_its_own():
    one, two = memory_store(), memory_store()
    assert isinstance(one, SqlStore)
    row = one.create_session(title="only here")
    assert one.get_session(row.id).title == "only here"
    assert two.find_session(row.id) is None and two.list_sessions().sessions == []
    one.close()
    two.close()
    again = memory_store()  # a closed store's sessions are gone
    assert again.list_sessions().sessions == []
    again.close()


async def test_a_runtime_drives_turns_on_a_memory_store(tmp_path: Path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "hello"}]}]}))
    store = memory_store()
    rt = Runtime(store=store, model=f"scripted:{script}", workspace=tmp_path)
    [turn] = await rt.run("hi")
    sid = store.list_sessions().sessions[0].id
    [again] = await rt.run("again", session_id=sid)
    assert turn.outcome == again.outcome == "completed"
    assert [m.text() for m in store.messages(sid)] == ["hi", "hello", "again", "hello"]
    assert len(store.receipts(sid)) == 2
    await rt.aclose()
    assert sorted(p.name for p in os.scandir(tmp_path)) == ["script.json"]  # nothing on disk
