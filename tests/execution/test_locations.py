"""The library's `Runtime` runs each session at its location, not at its own workspace; a
moved session is rebound; a location missing here is not run and not failed."""

from __future__ import annotations

from pathlib import Path

from tests.allow import USER_TOML
from wakeful.execution import Runtime
from wakeful.store import open_store

from .helpers import write_script

RULES = [
    {
        "match": "note",
        "replies": [
            {"tool_calls": [{"name": "write_file", "input": {"path": "n.txt", "content": "x"}}]},
            {"text": "ok"},
        ],
    },
    {"match": ".", "replies": [{"text": "hi"}]},
]


def place(tmp_path: Path, name: str) -> Path:
    path = (tmp_path / name).resolve()
    path.mkdir()
    (path / ".git").mkdir()
    (path / "AGENTS.md").write_text(f"Rules of {name}.")
    (path / "wakeful.toml").write_text(USER_TOML)  # each place allows the note's write itself
    return path


async def test_a_runtime_elsewhere_drives_the_session_at_its_location(db_url: str, tmp_path: Path):
    a, b, here = place(tmp_path, "a"), place(tmp_path, "b"), place(tmp_path, "here")
    model = write_script(tmp_path / "s.json", RULES)
    maker = Runtime(db_url, model=model, workspace=a)
    sid = maker.send("write a note", resume=False).session_id
    assert maker.store.get_session(sid).location == str(a)
    await maker.aclose()
    rt = Runtime(db_url, model=model, workspace=here)
    try:
        [turn] = await rt.resume(sid)
        assert turn.outcome == "completed"
        assert (a / "n.txt").exists() and not (here / "n.txt").exists()
        rt.move(sid, b, resume=False)
        rt.send("another note", session_id=sid, resume=False)
        [turn] = await rt.resume(sid)
        assert turn.outcome == "completed" and (b / "n.txt").exists()
        receipt = rt.store.receipts(sid)[-1]
        texts = {m.id: m.text() for m in rt.store.messages(sid)}
        assert "Rules of b." in "\n".join(texts.get(i, "") for i in receipt.message_ids)
    finally:
        await rt.aclose()


async def test_a_session_whose_location_is_missing_waits(db_url: str, tmp_path: Path):
    here = place(tmp_path, "here")
    model = write_script(tmp_path / "s.json", RULES)
    store = open_store(db_url)
    sid = store.create_session(model=model, location=str(tmp_path / "gone")).id
    store.admit(sid, "in_1", "user", {"text": "note"})
    store.close()
    rt = Runtime(db_url, model=model, workspace=here)
    try:
        assert await rt.resume(sid) == []
        row = rt.store.get_session(sid)
        assert row.waiting_for == str(tmp_path / "gone") and row.status == "idle"
        assert [i.input_id for i in rt.store.pending(sid)] == ["in_1"]
        assert rt.store.current_claim(sid) is None
        assert rt.store.events(sid)[-1].event.type == "inbox.enqueued"  # no error recorded
    finally:
        await rt.aclose()
