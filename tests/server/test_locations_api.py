"""Locations over the API: sessions show where they live; a move is admitted (202) or refused
with a reason (400) and nothing stored; the server drives each session at its location."""

from __future__ import annotations

from pathlib import Path

from tests.server.conftest import Served, wait_for
from wakeful.events import location_id


def test_session_out_has_its_location_and_a_move_is_checked(server: Served, tmp_path: Path):
    c = server.client()
    r = c.post("/sessions", json={"prompt": {"text": "hi", "wait": True}})
    assert r.status_code == 201
    session = r.json()["session"]
    sid, home = session["id"], str(server.runtime.workspace)
    assert (session["location"], session["location_id"], session["waiting_for"]) == (
        home,
        location_id(home),
        None,
    )
    before = c.get(f"/sessions/{sid}").json()["last_seq"]
    bad = c.post(f"/sessions/{sid}/move", json={"location": str(tmp_path / "missing")})
    assert bad.status_code == 400 and "not a directory" in bad.json()["reason"]
    assert c.get(f"/sessions/{sid}").json()["last_seq"] == before
    assert c.post("/sessions/ses_nope/move", json={"location": str(tmp_path)}).status_code == 404
    other = tmp_path / "other"
    other.mkdir()
    (other / "AGENTS.md").write_text("Rules of other.")
    ok = c.post(f"/sessions/{sid}/move", json={"location": str(other)})
    assert ok.status_code == 202 and ok.json()["location"] == str(other.resolve())
    wait_for(lambda: c.get(f"/sessions/{sid}").json()["location"] == str(other.resolve()))
    listed = c.get("/sessions").json()["sessions"]
    assert listed[0]["location_id"] == location_id(str(other.resolve()))
    texts = [m["message"] for m in c.get(f"/sessions/{sid}/messages").json()["messages"]]
    assert [m["role"] for m in texts] == ["user", "assistant", "system", "system"]
    assert c.get(f"/sessions/{sid}/pending").json()["items"] == []


def test_a_session_may_be_created_at_another_existing_directory(server: Served, tmp_path: Path):
    c = server.client()
    there = tmp_path / "there"
    there.mkdir()
    (there / "AGENTS.md").write_text("Rules of there.")
    r = c.post("/sessions", json={"location": str(there), "prompt": {"text": "hi", "wait": True}})
    assert r.status_code == 201, r.text
    assert r.json()["session"]["location"] == str(there.resolve())
    sid = r.json()["session"]["id"]
    [receipt] = c.get(f"/sessions/{sid}/receipts").json()["receipts"]
    assert any(s.get("source") == "AGENTS.md" for s in receipt["sections"]), receipt["sections"]
    count = len(c.get("/sessions").json()["sessions"])
    bad = c.post("/sessions", json={"location": str(tmp_path / "missing"), "prompt": {"text": "x"}})
    assert bad.status_code == 400 and "not a directory" in bad.json()["reason"]
    assert len(c.get("/sessions").json()["sessions"]) == count  # nothing stored
