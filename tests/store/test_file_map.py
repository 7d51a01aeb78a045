"""The file-map store (issue 37 item 3): a store kept as `store.b64` + `meta.json` +
`turns.jsonl` over any get/save/delete backend, a directory shipped. Real turns run on it,
what returned is there after a reopen, and the readable views say what the store holds."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from wakeful.errors import StoreBusyError, StoreError
from wakeful.execution import Runtime
from wakeful.store import DirectoryFileMap, FileMapNames, file_map_store


class DictMap:
    """A host's backend in a dict, counting its saves (any `FileMap` will do)."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.saves = 0
        self.deleted = 0

    def get(self) -> Mapping[str, str]:
        return dict(self.files)

    def save(self, files: Mapping[str, str]) -> None:
        self.files = dict(files)
        self.saves += 1

    def delete(self) -> None:
        self.files = {}
        self.deleted += 1


def script(tmp_path: Path) -> str:
    path = tmp_path / "script.json"
    rules = [
        {
            "match": ".",
            "replies": [
                {"tool_calls": [{"name": "goal_set", "input": {"goal": "remember"}}]},
                {"text": "noted"},
            ],
        }
    ]
    path.write_text(json.dumps({"rules": rules}))
    return f"scripted:{path}"


async def test_turns_run_on_a_directory_map_and_survive_a_reopen(tmp_path: Path):
    where = tmp_path / "session"
    store = file_map_store(where)
    rt = Runtime(store=store, model=script(tmp_path), workspace=tmp_path)
    [turn] = await rt.run("keep this")
    assert turn.outcome == "completed"
    sid = store.list_sessions().sessions[0].id
    receipts = len(store.receipts(sid))
    await rt.aclose()
    store.close()
    assert sorted(p.name for p in where.iterdir()) == [
        ".lock",
        "meta.json",
        "store.b64",
        "turns.jsonl",
    ]
    meta = json.loads((where / "meta.json").read_text())
    assert meta["format"] == "wakeful-file-map/1" and meta["session"] == sid
    [row] = meta["sessions"]
    assert row["id"] == sid and row["last_seq"] > 0
    header, *messages = [json.loads(x) for x in (where / "turns.jsonl").read_text().splitlines()]
    assert header["wakeful_export"] == 1 and header["session"]["id"] == sid
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[-1]["blocks"][0]["text"] == "noted"

    again = file_map_store(where)  # what returned is there
    assert [m.text() for m in again.messages(sid)][::3] == ["keep this", "noted"]
    assert again.work_state(sid) == {"goal": "remember"} and len(again.receipts(sid)) == receipts
    rt = Runtime(store=again, model=script(tmp_path), workspace=tmp_path)
    [more] = await rt.run("and this", session_id=sid)
    assert more.outcome == "completed"
    await rt.aclose()
    again.close()


def test_every_write_is_saved_before_it_returns_and_a_deleted_store_deletes_the_map():
    fmap = DictMap()
    names = FileMapNames(database="db.txt", turns="t.jsonl")
    store = file_map_store(fmap, names=names)
    assert fmap.saves == 0 and fmap.files == {}
    sid = store.create_session(title="one").id
    assert fmap.saves == 1 and set(fmap.files) == {"db.txt", "meta.json", "t.jsonl"}
    store.admit(sid, "in-1", "user", {"text": "hi"})
    assert fmap.saves == 2
    # A second store loaded from the map as saved (no close in between: nothing waits).
    other = file_map_store(DictMapOf(fmap.files), names=names)
    assert [i.input_id for i in other.pending(sid)] == ["in-1"]
    other.close()
    store.delete(sid)
    assert fmap.deleted == 1 and fmap.files == {}
    store.close()


class DictMapOf(DictMap):
    def __init__(self, files: Mapping[str, str]) -> None:
        super().__init__()
        self.files = dict(files)


def test_a_second_process_cannot_open_the_same_directory(tmp_path: Path):
    store = file_map_store(tmp_path / "m")
    store.create_session(title="mine")
    code = f"from wakeful.store import file_map_store\nfile_map_store({str(tmp_path / 'm')!r})"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert other.returncode != 0 and "is open in another process" in other.stderr
    store.close()
    with pytest.raises(StoreBusyError):  # in this process too, while one is open
        first = DirectoryFileMap(tmp_path / "m")
        try:
            DirectoryFileMap(tmp_path / "m")
        finally:
            first.close()


def test_a_map_that_is_not_a_store_is_refused_and_left_alone(tmp_path: Path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("mine")
    with pytest.raises(StoreError, match="not a store"):
        file_map_store(tmp_path / "notes")
    assert (tmp_path / "notes" / "readme.txt").read_text() == "mine"
    broken = DictMapOf({"store.b64": base64.b64encode(b"not sqlite at all").decode()})
    with pytest.raises(StoreError, match="not a store|damaged"):
        file_map_store(broken)
    with pytest.raises(StoreError, match="damaged"):
        file_map_store(DictMapOf({"store.b64": "%%% not base64"}))
    file_map_store(tmp_path / "notes2").close()  # an empty directory is a new store


def test_the_transcript_view_follows_appends_rewinds_and_edits():
    from wakeful.events import MessageAdded
    from wakeful.messages import assistant, user

    fmap = DictMap()
    store = file_map_store(fmap)
    sid = store.create_session(title="view").id

    def shown() -> list[str]:
        _header, *lines = fmap.files["turns.jsonl"].splitlines()
        return [json.loads(x)["blocks"][0]["text"] for x in lines]

    store.append(sid, [MessageAdded(message=user("one")), MessageAdded(message=assistant("1"))])
    store.append(sid, [MessageAdded(message=user("two"))])
    assert shown() == ["one", "1", "two"]
    second = store.messages(sid)[1]
    store.shaping.revert(sid, message_id=second.id)
    assert shown() == ["one"]
    store.shaping.unrevert(sid)
    assert shown() == ["one", "1", "two"]
    last = store.get_session(sid).last_seq
    store.shaping.edit_history(sid, revision=last, message_id=second.id, text="uno")
    store.append(sid, [MessageAdded(message=assistant("2"))])
    assert shown() == ["one", "uno", "two", "2"]
    store.close()
