"""Rewind, unrevert, history edits, artifacts, metadata and extension state over the HTTP API,
through a real server; every mistake is a 4xx with a reason."""

from __future__ import annotations

from pathlib import Path

from tests.server.conftest import MakeServer, script

RULES = [
    {
        "match": "^make",
        "replies": [
            {
                "tool_calls": [
                    {"name": "write_file", "input": {"path": "hello.txt", "content": "hi\n"}}
                ]
            },
            {"text": "made it"},
        ],
    },
    {"match": ".", "replies": [{"text": "ok"}]},
]


def test_rewind_unrevert_and_history_over_the_api(make_server: MakeServer, tmp_path: Path):
    served = make_server(model=script(tmp_path, RULES), permissions={"*": "allow"})
    c = served.client()
    r = c.post("/sessions", json={"prompt": {"text": "hello", "wait": True}})
    sid = r.json()["session"]["id"]
    r = c.post(f"/sessions/{sid}/prompt", json={"text": "make a file", "wait": True})
    assert r.status_code in (200, 202), r.text
    hello = served.runtime.workspace / "hello.txt"
    assert hello.exists()

    r = c.post(f"/sessions/{sid}/rewind", json={"files": True})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["files_restored"] == ["hello.txt"] and out["prompt"] == "make a file"
    assert not hello.exists()
    assert "make a file" not in c.get(f"/sessions/{sid}/messages").text
    r = c.post(f"/sessions/{sid}/unrevert", json={})
    assert r.status_code == 200 and hello.read_text() == "hi\n"
    again = c.post(f"/sessions/{sid}/unrevert", json={})
    assert again.status_code == 422 and "no rewind" in again.json()["reason"]

    stale = c.post(f"/sessions/{sid}/history", json={"revision": 1, "delete_turn": "x"})
    assert stale.status_code == 409 and "changed" in stale.json()["reason"]
    revision = c.get(f"/sessions/{sid}").json()["last_seq"]
    [first_turn, _] = [t.turn_id for t in served.runtime.store.turns(sid)]
    r = c.post(f"/sessions/{sid}/history", json={"revision": revision, "delete_turn": first_turn})
    assert r.status_code == 200 and r.json()["revision"] == revision + 1
    bad = c.post(f"/sessions/{sid}/rewind", json={"turn_id": "turn_nope"})
    assert bad.status_code == 404 and "no turn" in bad.json()["reason"]
    assert c.post("/sessions/ses_nope/rewind", json={}).status_code == 404


def test_artifacts_metadata_and_extension_state_over_the_api(
    make_server: MakeServer, tmp_path: Path
):
    served = make_server(model=script(tmp_path, RULES))
    c = served.client()
    sid = c.post("/sessions", json={}).json()["session"]["id"]
    pr = "https://github.com/acme/app/pull/7"
    r = c.post(
        f"/sessions/{sid}/artifacts", json={"kind": "pull_request", "uri": pr, "label": "PR 7"}
    )
    assert r.status_code == 201 and r.json()["kind"] == "pull_request"
    listed = c.get(f"/sessions/{sid}/artifacts", params={"kind": "pull_request"}).json()
    assert [a["uri"] for a in listed["artifacts"]] == [pr]
    found = c.get("/artifacts", params={"uri": pr}).json()["artifacts"]
    assert [a["session_id"] for a in found] == [sid]
    bad = c.post(f"/sessions/{sid}/artifacts", json={"kind": "Bad", "uri": pr, "label": "x"})
    assert bad.status_code == 422

    r = c.patch(f"/sessions/{sid}/metadata", json={"patch": {"owner": "alice", "n": 1}})
    assert r.status_code == 200 and r.json()["metadata"]["owner"] == "alice"
    r = c.patch(f"/sessions/{sid}/metadata", json={"patch": {"n": None}})
    assert "n" not in r.json()["metadata"]
    big = c.patch(f"/sessions/{sid}/metadata", json={"patch": {"x": "y" * 70_000}})
    assert big.status_code == 422 and "exceed" in big.json()["reason"]

    url = f"/sessions/{sid}/extensions/todo-sync"
    r = c.put(f"{url}/cursor", json={"value": {"page": 2}})
    assert r.status_code == 200 and r.json()["values"] == {"cursor": {"page": 2}}
    assert c.get(url).json()["values"] == {"cursor": {"page": 2}}
    assert c.delete(f"{url}/cursor").json()["values"] == {}
    assert c.put(f"{url}/k", json={"value": "y" * 20_000}).status_code == 422

    doc = c.get("/openapi.json").json()
    for path in (
        "/sessions/{session_id}/rewind",
        "/sessions/{session_id}/unrevert",
        "/sessions/{session_id}/artifacts",
        "/artifacts",
        "/sessions/{session_id}/metadata",
        "/sessions/{session_id}/history",
    ):
        assert path in doc["paths"], path
