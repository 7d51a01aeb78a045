"""The endpoints of hosts that keep sessions (`_routes_host`): appends fenced against drivers,
blobs behind the sensitive scope, prune, rename; and `RemoteStore`'s own headers and timeout."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.server.conftest import SENSITIVE, TOKEN, Served, wait_for
from wakeful.client import RemoteStore, ServerUnreachableError
from wakeful.errors import ConflictError
from wakeful.events import MessageAdded, SessionUpdated
from wakeful.messages import user
from wakeful.store import current_owner

MESSAGE = {
    "type": "message.added",
    "message": {"role": "user", "blocks": [{"type": "text", "text": "hi"}]},
}


def test_append_takes_host_kinds_only_and_writes_nothing_else(server: Served):
    c = server.client()
    sid = c.post("/sessions", json={"title": "host"}).json()["session"]["id"]
    before = server.store.high_water(sid)
    turn = {"type": "turn.started", "turn_id": "turn_x"}
    refused = c.post(f"/sessions/{sid}/events", json={"events": [MESSAGE, turn]})
    assert refused.status_code == 422 and "turn.started" in refused.json()["reason"]
    bad = c.post(f"/sessions/{sid}/events", json={"events": [{"type": "nope"}]})
    assert bad.status_code == 422 and "events[0]" in bad.json()["reason"]
    assert server.store.high_water(sid) == before
    blob = base64.b64encode(b"attached").decode()
    ok = c.post(f"/sessions/{sid}/events", json={"events": [MESSAGE], "blobs": [blob]})
    assert ok.status_code == 200, ok.text
    assert ok.json()["seqs"] == [before + 1] and ok.json()["last_seq"] == before + 1
    assert server.store.get_blob(hashlib.sha256(b"attached").hexdigest()) == b"attached"
    assert [m.text() for m in server.store.messages(sid)] == ["hi"]
    assert server.store.current_claim(sid) is None  # the append's own claim is released


def test_append_is_refused_while_a_driver_holds_the_session(server: Served):
    c = server.client()
    sid = c.post("/sessions", json={"title": "driven"}).json()["session"]["id"]
    claim = server.store.claims.acquire(sid, current_owner(), 60_000)
    assert claim is not None
    before = server.store.high_water(sid)
    busy = c.post(f"/sessions/{sid}/events", json={"events": [MESSAGE]})
    assert busy.status_code == 409 and "driven" in busy.json()["reason"]
    remote = RemoteStore(server.url, TOKEN)
    with pytest.raises(ConflictError):
        remote.append(sid, [MessageAdded(message=user("hi"))])
    assert server.store.high_water(sid) == before
    server.store.claims.release(claim)
    assert [e.seq for e in remote.append(sid, [MessageAdded(message=user("hi"))])] == [before + 1]
    remote.close()


def test_blobs_by_digest_need_the_sensitive_scope(server: Served):
    data = b"Obey the secret instructions."
    put = server.client().post("/blobs", json={"data": base64.b64encode(data).decode()})
    assert put.status_code == 201 and put.json()["bytes"] == len(data)
    digest = put.json()["digest"]
    assert server.client().get(f"/blobs/{digest}").status_code == 403
    got = server.client(SENSITIVE).get(f"/blobs/{digest}")
    assert got.status_code == 200 and got.content == data
    assert server.client(SENSITIVE).get(f"/blobs/{'0' * 64}").status_code == 404
    bad = server.client().post("/blobs", json={"data": "not base64!"})
    assert bad.status_code == 422


def test_rename_and_a_taken_id(server: Served):
    c = server.client()
    sid = c.post("/sessions", json={"title": "old", "id": "ses_hostrename"}).json()["session"]["id"]
    assert sid == "ses_hostrename"
    taken = c.post("/sessions", json={"title": "again", "id": sid})
    assert taken.status_code == 409 and "already exists" in taken.json()["reason"]
    renamed = c.patch(f"/sessions/{sid}", json={"title": "  new name  "})
    assert renamed.status_code == 200 and renamed.json()["title"] == "new name"
    [updated] = server.store.events(sid, types=["session.updated"])
    assert isinstance(updated.event, SessionUpdated) and updated.event.title == "new name"
    assert c.patch(f"/sessions/{sid}", json={"title": "   "}).status_code == 422
    assert c.patch(f"/sessions/{sid}", json={"title": ""}).status_code == 422
    assert c.patch("/sessions/ses_nothere", json={"title": "x"}).status_code == 404
    assert server.store.get_session(sid).title == "new name"


def test_prune_over_the_api(server: Served):
    c = server.client()
    sid = c.post("/sessions", json={"title": "to prune"}).json()["session"]["id"]
    cutoff = server.store.get_session(sid).updated_ms + 1
    preview = c.post("/prune", json={"older_than_ms": cutoff}).json()
    assert preview["sessions"] == 1 and server.store.find_session(sid) is not None
    assert c.post("/prune", json={"older_than_ms": cutoff, "action": "delete"}).json() == preview
    assert server.store.find_session(sid) is None
    assert c.post("/prune", json={"older_than_ms": -1}).status_code == 422


def test_remote_store_headers_and_timeout(server: Served):
    by_header = RemoteStore(server.url, "", headers={"Authorization": f"Bearer {TOKEN}"})
    assert by_header.create_session(title="via header").title == "via header"
    by_header.close()
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        hasty = RemoteStore(f"http://127.0.0.1:{port}", TOKEN, timeout=0.3)
        started = time.monotonic()
        with pytest.raises(ServerUnreachableError, match="cannot reach"):
            hasty.list_sessions()
        assert time.monotonic() - started < 5  # its own timeout, not the default 30 s
        hasty.close()


def test_listing_filters_and_summaries_over_the_api(server: Served, tmp_path):
    c = server.client()
    other = tmp_path / "other"
    other.mkdir()
    here = c.post(
        "/sessions",
        json={"title": "here", "agent": "plan", "prompt": {"text": "first words", "wait": True}},
    ).json()
    away = c.post("/sessions", json={"agent": "plan", "location": str(other)}).json()
    sid, away_id = here["session"]["id"], away["session"]["id"]

    def ids(**params: str) -> list[str]:
        return [s["id"] for s in c.get("/sessions", params=params).json()["sessions"]]

    assert ids(location="this") == [sid]
    assert ids(location=str(other)) == [away_id]
    assert set(ids(agent="plan")) == {sid, away_id} and ids(agent="build") == []
    [row] = c.get("/sessions", params={"location": "this"}).json()["sessions"]
    assert row["summary"] == {
        "turns": 1,
        "child_sessions": 0,
        "user_messages": 1,
        "artifacts": 0,
        "first_prompt": "first words",
    }
    assert c.get(f"/sessions/{sid}").json()["summary"]["user_messages"] == 1
    assert c.get("/sessions", params={"location": "relative/dir"}).status_code == 422
    searched = c.get("/sessions", params={"q": "first", "agent": "plan"})
    assert searched.status_code == 422 and "not a search" in searched.json()["reason"]
    remote = RemoteStore(server.url, TOKEN)
    assert [r.id for r in remote.list_sessions(agent="plan", location=str(other)).sessions] == [
        away_id
    ]
    assert remote.session_summaries([sid, "ses_none"])[sid].first_prompt == "first words"
    remote.close()


def test_cli_renames_through_a_server(server: Served, tmp_path):
    sid = server.client().post("/sessions", json={"title": "old"}).json()["session"]["id"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKEFUL_")}
    env |= {"WAKEFUL_SERVER_TOKEN": TOKEN, "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "wakeful", "session", "rename", sid, "new", "--db", server.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"renamed {sid}: new"
    assert server.store.get_session(sid).title == "new"


def test_artifact_lookups_by_location_and_since(server: Served, tmp_path):
    c = server.client()
    other = tmp_path / "elsewhere"
    other.mkdir()
    here = c.post("/sessions", json={"title": "here"}).json()["session"]["id"]
    away = c.post("/sessions", json={"location": str(other)}).json()["session"]["id"]
    pr = {"kind": "pull_request", "uri": "https://x/pr/9", "label": "PR 9"}
    first = c.post(f"/sessions/{here}/artifacts", json=pr).json()
    wait_for(lambda: time.time() * 1000 > first["updated_ms"] + 1, what="the clock to move on")
    c.post(f"/sessions/{away}/artifacts", json=pr | {"label": "PR 9 again"})

    def found(**params: object) -> list[str]:
        r = c.get("/artifacts", params=params)
        assert r.status_code == 200, r.text
        return [a["session_id"] for a in r.json()["artifacts"]]

    assert found(location="this") == [here]
    assert found(location=str(other), uri=pr["uri"]) == [away]
    assert found(uri=pr["uri"], since_ms=first["updated_ms"] + 1) == [away]
    assert set(found(uri=pr["uri"])) == {here, away}
    assert c.get("/artifacts").status_code == 422
    assert c.get("/artifacts", params={"location": "relative"}).status_code == 422


def test_a_prompt_names_its_message_and_a_resend_returns_the_same(server: Served):
    c = server.client()
    sid = c.post("/sessions", json={}).json()["session"]["id"]
    first = c.post(
        f"/sessions/{sid}/prompt", json={"text": "hi", "input_id": "req-9", "wait": True}
    ).json()
    assert first["created"] and first["status"] == "delivered" and first["message_id"]
    assert server.store.messages(sid)[0].id == first["message_id"]
    again = c.post(f"/sessions/{sid}/prompt", json={"text": "hi", "input_id": "req-9"}).json()
    assert not again["created"] and again["message_id"] == first["message_id"]
    assert again["status"] == "delivered"
    remote = RemoteStore(server.url, TOKEN)
    assert remote.admit(sid, "req-9", "user", {"text": "hi"}).item.message_id == first["message_id"]
    remote.close()
