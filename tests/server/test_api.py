"""The REST API through a real uvicorn server: sessions, inputs, reads, and bad input -> 4xx."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import httpx

from tests.server.conftest import ECHO, MakeServer, Served, script, wait_for


def _create(c: httpx.Client, **body: object) -> str:
    r = c.post("/sessions", json=body)
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"/sessions/{r.json()['session']['id']}"
    return str(r.json()["session"]["id"])


def test_health_and_openapi(server: Served):
    c = server.client()
    assert c.get("/health").json()["status"] == "ok"
    doc = c.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    assert {
        "/sessions",
        "/sessions/{session_id}/prompt",
        "/sessions/{session_id}/log",
        "/events",
    } <= set(doc["paths"])


def test_bodies_that_may_be_empty_are_not_required_in_the_document(server: Served):
    # issue 43 item 6: POST /sessions, /fork and /compact take an empty body
    c = server.client()
    paths = c.get("/openapi.json").json()["paths"]
    sid = _create(c)
    for path, route in [
        ("/sessions", "/sessions"),
        ("/sessions/{session_id}/fork", f"/sessions/{sid}/fork"),
        ("/sessions/{session_id}/compact", f"/sessions/{sid}/compact"),
    ]:
        assert paths[path]["post"]["requestBody"]["required"] is False, path
        assert c.post(route, content=b"").status_code < 400, route
    assert paths["/sessions/{session_id}/prompt"]["post"]["requestBody"]["required"] is True


def test_a_405_allows_every_method_of_the_path(server: Served):
    # issue 43 item 6: Starlette named the methods of the path's first route only
    c = server.client()
    sid = _create(c)
    r = c.options(f"/sessions/{sid}")
    assert r.status_code == 405
    assert set(r.headers["allow"].split(", ")) == {"DELETE", "GET", "HEAD", "PATCH"}
    assert r.json()["error"] == "method_not_allowed"


def test_create_with_prompt_and_wait_runs_a_turn(server: Served):
    c = server.client()
    r = c.post("/sessions", json={"title": "greet", "prompt": {"text": "hi", "wait": True}})
    assert r.status_code == 201
    body = r.json()
    sid = body["session"]["id"]
    [turn] = body["admission"]["turns"]
    assert turn["outcome"] == "completed"
    assert turn["final_text"] == "hello from the scripted model"
    detail = c.get(f"/sessions/{sid}").json()
    assert detail["title"] == "greet" and detail["status"] == "idle" and detail["pending"] == 0
    assert detail["claim"] is None
    roles = [m["message"]["role"] for m in c.get(f"/sessions/{sid}/messages").json()["messages"]]
    assert roles == ["user", "assistant"]
    [run] = c.get(f"/sessions/{sid}/turns").json()["turns"]
    assert run["outcome"] == "completed" and run["steps"] == 1 and run["tokens_out"] > 0
    usage = c.get(f"/sessions/{sid}/usage").json()
    assert usage["output_tokens"] == run["tokens_out"] and len(usage["turns"]) == 1
    [receipt] = c.get(f"/sessions/{sid}/receipts").json()["receipts"]
    assert receipt["step"] == 1 and all(len(s["digest"]) == 64 for s in receipt["sections"])


def test_prompt_resume_wakes_the_coordinator(server: Served):
    c = server.client()
    sid = _create(c)
    r = c.post(f"/sessions/{sid}/prompt", json={"text": "go"})
    assert r.status_code == 202 and r.json()["created"] is True
    wait_for(
        lambda: (
            c.get(f"/sessions/{sid}/turns").json()["turns"][-1:]
            and c.get(f"/sessions/{sid}/turns").json()["turns"][-1]["outcome"] == "completed"
        ),
        what="the woken drain",
    )


def test_resume_false_only_records(server: Served):
    c = server.client()
    sid = _create(c)
    r = c.post(
        f"/sessions/{sid}/prompt", json={"text": "later", "resume": False, "delivery": "queue"}
    )
    assert r.status_code == 202 and r.json()["status"] == "pending"
    [item] = c.get(f"/sessions/{sid}/pending").json()["items"]
    assert item["delivery"] == "queue" and item["payload"] == {"text": "later"}
    assert c.get(f"/sessions/{sid}/turns").json()["turns"] == []


def test_input_id_is_idempotent_and_conflicts_are_409(server: Served):
    c = server.client()
    sid = _create(c)
    body = {"text": "once", "input_id": "in-fixed-1", "resume": False}
    first = c.post(f"/sessions/{sid}/prompt", json=body)
    again = c.post(f"/sessions/{sid}/prompt", json=body)
    assert first.json()["created"] is True and again.json()["created"] is False
    assert again.json()["input_id"] == "in-fixed-1"
    clash = c.post(f"/sessions/{sid}/prompt", json=body | {"text": "other"})
    assert clash.status_code == 409 and clash.json()["error"] == "conflict"
    assert len(c.get(f"/sessions/{sid}/pending").json()["items"]) == 1


def test_bad_input_is_4xx_with_a_reason(server: Served):
    c = server.client()
    sid = _create(c)
    cases = [
        (c.get("/sessions/ses_nope"), 404),
        (c.get("/sessions/bad%20id"), 404),
        (c.post("/sessions/ses_nope/prompt", json={"text": "x"}), 404),
        (c.post("/sessions/ses_nope/interrupt"), 404),
        (c.post(f"/sessions/{sid}/prompt", content=b"{not json"), 400),
        (c.post(f"/sessions/{sid}/prompt", json={"text": ""}), 422),
        (
            c.post(
                f"/sessions/{sid}/prompt",
                json={"text": "a", "blocks": [{"type": "text", "text": "b"}]},
            ),
            422,
        ),
        (c.post(f"/sessions/{sid}/prompt", json={"blocks": [{"type": "nope"}]}), 422),
        (c.post(f"/sessions/{sid}/prompt", json={"text": "x", "delivery": "later"}), 422),
        (c.post(f"/sessions/{sid}/prompt", json={"text": "x", "extra": 1}), 422),
        (c.post(f"/sessions/{sid}/prompt", json={"text": "x", "wait": True, "resume": False}), 422),
        (c.post("/sessions", json={"agent": "no-such-agent"}), 422),
        (c.post("/sessions", json={"model": "nonsense"}), 422),
        (c.get("/sessions", params={"limit": 0}), 422),
        (c.get("/sessions", params={"cursor": "garbage"}), 422),
        (c.get(f"/sessions/{sid}/log", params={"after": -1}), 422),
        (c.get(f"/sessions/{sid}/log", headers={"Last-Event-ID": "x"}), 400),  # docs/server.md
        (c.get("/events", headers={"Last-Event-ID": "-1", "Accept": "text/event-stream"}), 400),
        (c.post(f"/sessions/{sid}/fork", json={"through_seq": 10_000}), 422),
        (c.get("/no/such/route"), 404),
        (c.put("/sessions"), 405),
    ]
    for response, status in cases:
        assert response.status_code == status, (response.request.url, response.text)
        body = response.json()
        assert body["error"] and body["reason"], body


def test_fork_archive_list_search_delete(server: Served):
    c = server.client()
    a = _create(c, title="alpha report", prompt={"text": "hi", "wait": True})
    b = _create(c, title="beta notes")
    # seq 1 created, 2 enqueued, 3 the instruction delta (before delivery), 4 delivered
    fork = c.post(f"/sessions/{a}/fork", json={"through_seq": 4, "title": "alpha fork"})
    assert fork.status_code == 201
    f = fork.json()
    assert f["forked_from"] == a and f["fork_seq"] == 4
    assert [
        m["message"]["role"] for m in c.get(f"/sessions/{f['id']}/messages").json()["messages"]
    ] == ["user"]
    assert c.post(f"/sessions/{b}/archive").json()["archived"] is True
    ids = [s["id"] for s in c.get("/sessions").json()["sessions"]]
    assert b not in ids and {a, f["id"]} <= set(ids)
    assert [
        s["id"] for s in c.get("/sessions", params={"archived": "true"}).json()["sessions"]
    ] == [b]
    found = c.get("/sessions", params={"q": "ALPHA", "archived": "all"}).json()["sessions"]
    assert {s["id"] for s in found} == {a, f["id"]}
    page1 = c.get("/sessions", params={"limit": 1, "archived": "all"}).json()
    page2 = c.get(
        "/sessions", params={"limit": 1, "archived": "all", "cursor": page1["next_cursor"]}
    ).json()
    assert page1["sessions"][0]["id"] != page2["sessions"][0]["id"]
    assert c.post(f"/sessions/{b}/unarchive").json()["archived"] is False
    gone = c.delete(f"/sessions/{b}")
    assert gone.status_code == 200 and gone.json()["sessions"] == 1
    assert c.get(f"/sessions/{b}").status_code == 404


def test_interrupt_stops_a_running_turn(make_server: MakeServer, tmp_path):
    slow = script(
        tmp_path,
        [{"match": ".", "replies": [{"text": "x" * 400}]}],
        chunk_chars=4,
        chunk_delay_ms=20,
    )
    server = make_server(model=slow)
    c = server.client()
    sid = _create(c, prompt={"text": "talk"})
    wait_for(lambda: c.get(f"/sessions/{sid}").json()["active"], what="the turn to start")
    assert c.delete(f"/sessions/{sid}").status_code == 409  # not while it runs here
    r = c.post(f"/sessions/{sid}/interrupt")
    assert r.status_code == 200 and r.json()["requested"] is True
    run = wait_for(
        lambda: (
            (t := c.get(f"/sessions/{sid}/turns").json()["turns"]) and t[-1]["outcome"] and t[-1]
        )
    )
    assert run["outcome"] == "interrupted"


def test_compact_is_admitted_as_a_control_item(server: Served):
    c = server.client()
    sid = _create(c, prompt={"text": "hi", "wait": True})
    r = c.post(f"/sessions/{sid}/compact", json={"tail_turns": 0, "resume": False})
    assert r.status_code == 202
    [item] = c.get(f"/sessions/{sid}/pending").json()["items"]
    assert item["kind"] == "compaction" and item["input_id"] == r.json()["input_id"]


def test_media_is_served_only_when_a_message_references_it(server: Served):
    c = server.client()
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    digest = server.store.put_blob(png)
    assert digest == hashlib.sha256(png).hexdigest()
    sid = _create(c)
    assert c.get(f"/sessions/{sid}/media/{digest}").status_code == 404
    block = {"type": "image", "media_type": "image/png", "ref": digest}
    c.post(f"/sessions/{sid}/prompt", json={"blocks": [block], "wait": True})
    r = c.get(f"/sessions/{sid}/media/{digest}")
    assert r.status_code == 200 and r.content == png and r.headers["content-type"] == "image/png"
    assert r.headers["content-security-policy"] == "sandbox"


def test_a_drain_whose_model_cannot_be_built_blocks_its_turn_with_the_reason(
    make_server: MakeServer, tmp_path: Path
):
    path = tmp_path / "vanishing.json"
    path.write_text(json.dumps({"rules": ECHO}))
    server = make_server(model=f"scripted:{path}")
    c = server.client()
    sid = _create(c)
    path.unlink()  # a permanent configuration error the drain meets when it builds the provider
    waited = c.post(f"/sessions/{sid}/prompt", json={"text": "hi", "wait": True})
    assert waited.status_code == 200, waited.text
    [turn] = waited.json()["turns"]
    assert turn["outcome"] == "blocked" and "no script file" in turn["error"]
    # Settled once, not left pending for every later driver to retry.
    assert c.get(f"/sessions/{sid}/pending").json()["items"] == []
    assert c.post("/sessions", json={"model": f"scripted:{path}"}).status_code == 422


def test_a_fork_with_an_agent_and_model_runs_as_them_and_leaves_the_original(
    make_server: MakeServer, tmp_path: Path
):
    path = tmp_path / "echo.json"
    path.write_text(json.dumps({"rules": ECHO}))
    server = make_server(model=f"scripted:{path}")
    c = server.client()
    sid = _create(c)
    bad = c.post(f"/sessions/{sid}/fork", json={"model": "scripted:/nonexistent.json"})
    assert bad.status_code == 422 and "no script file" in bad.text
    assert c.post(f"/sessions/{sid}/fork", json={"agent": "ghost"}).status_code == 422
    assert len(c.get("/sessions").json()["sessions"]) == 1  # nothing was forked
    fork = c.post(f"/sessions/{sid}/fork", json={"agent": "plan"})
    assert fork.status_code == 201 and fork.json()["agent"] == "plan"
    assert c.get(f"/sessions/{sid}").json()["agent"] == "build"
    events = c.get(f"/sessions/{fork.json()['id']}/log").json()["events"]
    [update] = [e["data"] for e in events if e["type"] == "session.updated"]
    assert update["agent"] == "plan" and "model" not in update
