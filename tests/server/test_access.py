"""Users, scopes and ownership on every route (issue 39 item 1, docs/access.md).

The acceptance test is generated from the app's route table: every route needs a rule below,
so a new route without one fails here until someone decides who may call it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass

import httpx
import pytest
from starlette.routing import Route

from tests.server.conftest import TOKEN, Served, wait_for
from wakeful.server import Tokens, create_app

WORD = "quokkazebra"

# Routes without a session in their path, by name: what user B (drive scope) gets.
LISTINGS = {
    "list_sessions",
    "instance_log",
    "usage_totals",
    "find_artifacts",
    "index",
    "usage_page",
    "budgets",
}
ADMIN_ONLY = {
    "list_schedules", "add_schedule", "get_schedule", "pause_schedule", "resume_schedule",
    "delete_schedule", "put_blob", "get_blob", "prune", "list_tokens", "create_token",
    "revoke_token", "schedules_page",
}  # fmt: skip
OWN = {"create_session", "whoami"}  # acting on nobody else's sessions
OPEN = {"root", "login_form", "login", "logout", "static", "_health", "_openapi", "health"}
OPEN |= {"openapi", "share_page", "share_open", "shared_view", "shared_log", "shared_media"}
NOT_THEIRS = {"revoke_share"}  # names a thing of A's session by its own id: a 404 for B
BODIES: dict[str, object] = {
    "create_session": {"title": "t"},
    "fork_session": {},
    "prompt": {"text": "hi", "resume": False},
    "compact": {"resume": False},
    "interrupt": {},
    "rewind": {"seq": 1},
    "decide": {"decision": "deny"},
    "budget": {"add_tokens": 10},
    "move": {"location": "/tmp"},
    "edit_history": {"drop": [1]},
    "add_artifact": {"kind": "file", "uri": "file:///tmp/x"},
    "update_metadata": {"patch": {"a": 1}},
    "set_extension_state": {"value": 1},
    "patch_session": {"title": "x"},
    "append_events": {"events": []},
    "agui_run": {},
    "unrevert": {},
}


@dataclass
class People:
    """An admin (the operator token), users A and B (read, drive, approve) and a read-only R."""

    admin: httpx.Client
    a: httpx.Client
    b: httpx.Client
    r: httpx.Client
    a_sid: str
    r_sid: str
    a_share: str


def _people(server: Served) -> People:
    admin = server.client()
    made = {}
    for user, scopes in (("alice", ["read", "drive", "approve"]), ("bob", ["read", "drive"])):
        r = admin.post("/admin/tokens", json={"user": user, "scopes": scopes + ["approve"]})
        assert r.status_code == 201, r.text
        made[user] = r.json()["secret"]
    made["reader"] = admin.post(
        "/admin/tokens", json={"user": "reader", "scopes": ["read"]}
    ).json()["secret"]
    a, b, r = (server.client(made[u]) for u in ("alice", "bob", "reader"))
    a_sid = a.post("/sessions", json={"prompt": {"text": f"remember {WORD}"}}).json()["session"][
        "id"
    ]
    wait_for(lambda: a.get(f"/sessions/{a_sid}").json()["status"] == "idle", what="A's turn")
    a.post(f"/sessions/{a_sid}/artifacts", json={"kind": "file", "uri": "file:///tmp/a.txt"})
    made_share = a.post(f"/sessions/{a_sid}/shares", json={})
    assert made_share.status_code == 201, made_share.text
    r_sid = admin.post("/sessions", json={}).json()["session"]["id"]
    server.store.access.set_owner(r_sid, "reader")
    return People(admin, a, b, r, a_sid, r_sid, made_share.json()["share"]["id"])


def _routes(server: Served) -> list[Route]:
    app = create_app(server.runtime, tokens=Tokens([TOKEN]))
    return [r for r in app.routes if isinstance(r, Route)]


def _url(route: Route, sid: str, share: str = "shr_" + "0" * 16) -> str:
    url = route.path.replace("{session_id}", sid).replace("{digest}", "0" * 64)
    url = url.replace("{call_id}", "call_x").replace("{namespace}", "ns").replace("{key}", "k")
    url = url.replace("{schedule_id}", "sch_" + "0" * 24).replace("{token_id}", "tok_" + "0" * 16)
    url = url.replace("{name}", "app.js").replace("{share_id}", share)
    if route.name in ("session_log", "instance_log", "agui_follow"):
        url += "?follow=true&idle_timeout=0"
    if route.name == "find_artifacts":
        url += "?uri=file:///tmp/a.txt"
    return url


def test_every_route_keeps_users_apart(server: Served):
    p = _people(server)
    routes = _routes(server)
    assert len(routes) >= 40
    for route in routes:
        name = route.name
        for method in sorted((route.methods or set()) - {"HEAD"}):
            url = _url(route, p.a_sid, p.a_share)
            body = BODIES.get(name) if method != "GET" else None
            got = p.b.request(method, url, json=body, follow_redirects=False)
            if "{session_id}" in route.path:
                assert got.status_code == 404, (method, url, got.status_code, got.text)
                assert p.a_sid not in got.text or "no session" in got.text
            elif name in ADMIN_ONLY:
                assert got.status_code in (403, 404), (method, url, got.status_code)
            elif name in NOT_THEIRS:
                assert got.status_code == 404, (method, url, got.status_code)
            elif name in LISTINGS:
                assert got.status_code == 200, (method, url, got.text)
                assert p.a_sid not in got.text, (method, url)
            else:
                assert name in OWN | OPEN, f"route {name} ({route.path}) has no access rule"


def test_listings_and_search_show_only_the_callers_sessions(server: Served):
    p = _people(server)
    assert [s["id"] for s in p.a.get("/sessions").json()["sessions"]] == [p.a_sid]
    assert p.b.get("/sessions").json()["sessions"] == []
    assert [s["id"] for s in p.a.get(f"/sessions?q={WORD}").json()["sessions"]] == [p.a_sid]
    assert p.admin.get(f"/sessions?q={WORD}").json()["sessions"][0]["id"] == p.a_sid
    assert p.b.get(f"/sessions?q={WORD}").json()["sessions"] == []
    assert p.b.get(f"/sessions?q={p.a_sid}").json()["sessions"] == []
    a_events = p.a.get("/events").json()["events"]
    assert a_events and {e["session_id"] for e in a_events} == {p.a_sid}
    assert p.b.get("/events").json()["events"] == []
    stream = p.b.get("/events?follow=true&idle_timeout=0").text
    assert p.a_sid not in stream and WORD not in stream
    assert p.a_sid in p.a.get("/events?follow=true&idle_timeout=0").text
    assert p.a_sid not in p.b.get("/usage").text and p.a_sid in p.a.get("/usage").text
    assert p.b.get(f"/sessions/{p.a_sid[:8]}").status_code == 404
    assert p.b.get("/whoami").json() == {
        "user": "bob",
        "scopes": ["read", "drive", "approve"],
        "admin": False,
    }


def test_a_fork_and_a_child_belong_to_the_roots_owner(server: Served):
    p = _people(server)
    fork = p.a.post(f"/sessions/{p.a_sid}/fork", json={}).json()["id"]
    assert p.a.get(f"/sessions/{fork}").status_code == 200
    assert p.b.get(f"/sessions/{fork}").status_code == 404
    child = server.store.create_session(parent_id=p.a_sid, root_id=p.a_sid).id
    assert p.a.get(f"/sessions/{child}").status_code == 200
    assert p.b.get(f"/sessions/{child}/messages").status_code == 404


def test_a_read_token_cannot_change_anything(server: Served):
    p = _people(server)
    for route in _routes(server):
        for method in sorted((route.methods or set()) - {"GET", "HEAD"}):
            if route.name in ("login", "logout", "share_open"):
                continue
            url = _url(route, p.r_sid, p.a_share)
            got = p.r.request(method, url, json=BODIES.get(route.name), follow_redirects=False)
            assert got.status_code == 403, (method, url, got.status_code, got.text)
            assert "scope" in got.json()["reason"]
    assert p.r.get(f"/sessions/{p.r_sid}").status_code == 200
    assert p.r.get(f"/sessions/{p.r_sid}/log").status_code == 200


def test_admin_tokens_api_and_revocation(server: Served):
    admin = server.client()
    made = admin.post("/admin/tokens", json={"user": "dana", "scopes": ["read"], "label": "ci"})
    body = made.json()
    dana = server.client(body["secret"])
    assert dana.get("/sessions").status_code == 200
    assert dana.get("/admin/tokens").status_code == 403
    listed = admin.get("/admin/tokens").json()["tokens"]
    assert [t["id"] for t in listed] == [body["token"]["id"]]
    assert body["secret"] not in admin.get("/admin/tokens").text
    bad = admin.post("/admin/tokens", json={"user": "dana", "scopes": ["root"]})
    assert bad.status_code == 422 and "unknown scope" in bad.json()["reason"]
    gone = admin.delete(f"/admin/tokens/{body['token']['id']}")
    assert gone.status_code == 200 and gone.json()["revoked_ms"] is not None
    assert dana.get("/sessions").status_code == 401
    assert admin.delete("/admin/tokens/tok_0000000000000000").status_code == 404


def test_a_users_token_signs_in_to_the_inspector(server: Served):
    secret = (
        server.client()
        .post("/admin/tokens", json={"user": "eve", "scopes": ["read"]})
        .json()["secret"]
    )
    c = server.client(token=None)
    r = c.post("/ui/login", data={"token": secret}, follow_redirects=False)
    assert r.status_code == 303
    assert secret not in r.headers["set-cookie"]
    assert c.get("/whoami").json()["user"] == "eve"
    assert c.get("/ui/").status_code == 200


@pytest.mark.parametrize("scopes", [["read", "admin"]])
def test_an_admin_user_sees_every_session(server: Served, scopes: list[str]):
    p = _people(server)
    boss = server.client(
        server.client()
        .post("/admin/tokens", json={"user": "boss", "scopes": scopes})
        .json()["secret"]
    )
    assert p.a_sid in {s["id"] for s in boss.get("/sessions").json()["sessions"]}
    assert boss.get(f"/sessions/{p.a_sid}").status_code == 200


def test_an_expired_token_gets_401_with_its_reason(server: Served):
    admin = server.client()
    made = admin.post("/admin/tokens", json={"user": "fay", "scopes": ["read"], "expires": "300ms"})
    assert made.status_code == 201, made.text
    body = made.json()
    assert 0 < body["token"]["expires_ms"] - body["token"]["created_ms"] <= 300
    fay = server.client(body["secret"])
    refused = wait_for(lambda: (r := fay.get("/sessions")).status_code == 401 and r, what="expiry")
    assert refused.json()["reason"].startswith(f"the token {body['token']['id']} expired at ")
    bad = admin.post("/admin/tokens", json={"user": "fay", "scopes": ["read"], "expires": "soon"})
    assert bad.status_code == 422 and "bad interval" in bad.json()["reason"]


@pytest.mark.usefixtures("own_keys")  # plain: it reads titles from the SQLite file
def test_a_session_and_its_owner_are_written_together(server: Served):
    alice = server.client(
        server.client()
        .post("/admin/tokens", json={"user": "alice", "scopes": ["read", "drive"]})
        .json()["secret"]
    )
    kept = alice.post("/sessions", json={"title": "before"}).json()["session"]["id"]
    db = server.tmp_path / "s0.db"
    with sqlite3.connect(db) as conn:  # the owner's write fails, as a crash between would cut it
        conn.execute(
            "CREATE TRIGGER no_owner BEFORE INSERT ON session_owners "
            "BEGIN SELECT RAISE(ABORT, 'no owner'); END"
        )
    for path, title in (("/sessions", "orphan?"), (f"/sessions/{kept}/fork", "fork?")):
        # the store's error reaches the client as a 500 or a dropped connection
        with contextlib.suppress(httpx.TransportError):
            assert alice.post(path, json={"title": title}).status_code >= 500
    with sqlite3.connect(db) as conn:
        titles = {r[0] for r in conn.execute("SELECT title FROM sessions")}
        assert titles == {"before"}, "a session was left without its owner"
        conn.execute("DROP TRIGGER no_owner")
    forked = alice.post(f"/sessions/{kept}/fork", json={"title": "fork"})
    assert forked.status_code == 201
    assert alice.get(f"/sessions/{forked.json()['id']}").status_code == 200
