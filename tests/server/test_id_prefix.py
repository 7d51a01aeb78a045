"""A unique id prefix names its session in every API route and in the inspector; an ambiguous
one is a 422 listing the candidates; none is a 404."""

from __future__ import annotations

from tests.server.conftest import Served

A = "ses_cafe0000000000000000000a"
B = "ses_cafe1111111111111111111b"


def test_prefixes_resolve_in_routes(server: Served):
    server.store.create_session(A, title="one")
    server.store.create_session(B, title="two")
    c = server.client()
    assert c.get("/sessions/ses_cafe0").json()["id"] == A
    assert c.get("/sessions/cafe1").json()["title"] == "two"
    assert c.get("/sessions/cafe1/messages").status_code == 200
    r = c.post("/sessions/cafe0/archive")
    assert r.status_code == 200 and r.json()["id"] == A and r.json()["archived"]
    r = c.post("/sessions/cafe1/prompt", json={"text": "hi", "wait": True})
    assert r.status_code in (200, 202) and r.json()["session_id"] == B
    ambiguous = c.get("/sessions/cafe")
    assert ambiguous.status_code == 422
    assert ambiguous.json()["reason"] == f"session id prefix 'cafe' is ambiguous: {A}, {B}"
    assert c.get("/sessions/ses_beef").status_code == 404
    assert c.delete("/sessions/cafe").status_code == 422
    assert c.get(f"/sessions/{A}").status_code == 200  # nothing was deleted


def test_the_inspector_redirects_a_prefix_to_the_full_address(server: Served):
    server.store.create_session(A, title="one")
    c = server.client()
    r = c.get("/ui/sessions/cafe0", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].endswith(f"/ui/sessions/{A}")
    assert c.get("/ui/sessions/nothing-here").status_code == 404


def test_a_prompt_resolves_its_prefix_in_the_admission_and_writes_nothing_for_a_bad_one(
    server: Served,
):
    # The prompt route resolves the id in its admission's own thread (one hop per request).
    server.store.create_session(A, title="one")
    server.store.create_session(B, title="two")
    c = server.client()
    body = {"text": "hi", "resume": False}
    r = c.post("/sessions/cafe0/prompt", json=body)
    assert r.status_code == 202 and r.json()["session_id"] == A and r.json()["created"]
    again = c.post(f"/sessions/{A}/prompt", json=body | {"input_id": r.json()["input_id"]})
    assert again.status_code == 202 and again.json()["created"] is False
    ambiguous = c.post("/sessions/cafe/prompt", json=body)
    assert ambiguous.status_code == 422
    assert ambiguous.json()["reason"] == f"session id prefix 'cafe' is ambiguous: {A}, {B}"
    assert c.post("/sessions/ses_beef/prompt", json=body).status_code == 404
    assert c.post("/sessions/bad!id/prompt", json=body).status_code == 404
    assert [i.session_id for i in server.store.pending(A)] == [A]
    assert server.store.pending(B) == []
    assert server.store.find_session("ses_beef") is None
