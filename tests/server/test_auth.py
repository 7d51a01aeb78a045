"""Security: tokens on every route, the sensitive scope and redaction, cookies, size limits."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.server.conftest import SENSITIVE, TOKEN, MakeServer, Served
from wakeful.errors import UsageError
from wakeful.server import Settings, Tokens
from wakeful.server._app import OPS

SECRET = "SECRET-INSTRUCTION-7f3a9c"
CHANGED = "CHANGED-SECRET-41be0d"
BODIES = {
    "create_session": {"title": "t"},
    "fork_session": {},
    "prompt": {"text": "hi", "resume": False},
    "compact": {"resume": False},
}


def _calls(sid: str) -> list[tuple[str, str, dict[str, object] | None]]:
    """Every API route (and the extra ones) as (method, url, json body)."""
    out: list[tuple[str, str, dict[str, object] | None]] = []
    for op in OPS:
        url = op.path.replace("{session_id}", sid).replace("{digest}", "0" * 64)
        if op.op_id in ("session_log", "instance_log", "agui_follow"):
            url += "?follow=true&idle_timeout=0"
        out.append((op.method, url, BODIES.get(op.op_id) if op.body else None))
    out += [
        ("GET", "/openapi.json", None),
        ("GET", "/", None),
        ("GET", "/ui/", None),
        ("GET", f"/ui/sessions/{sid}", None),
        ("GET", "/ui/static/app.js", None),
        ("POST", "/ui/logout", None),
    ]
    return out


def test_every_route_but_health_needs_a_valid_token(server: Served):
    right = server.client()
    sid = right.post("/sessions", json={}).json()["session"]["id"]
    victim = right.post("/sessions", json={}).json()["session"]["id"]
    anonymous, wrong = server.client(token=None), server.client(token="wrong-token-000000000")
    basic = server.client(token=None, headers={"Authorization": "Basic dXNlcjpwYXNz"})
    calls = _calls(sid)
    assert len(calls) >= 23
    for method, url, body in calls:
        for c in (anonymous, wrong, basic):
            r = c.request(method, url, json=body)
            assert r.status_code == 401, (method, url, r.status_code)
            if url.startswith(("/sessions", "/events", "/openapi")):
                assert r.json()["error"] == "unauthorized"
                assert r.headers["www-authenticate"].startswith("Bearer")
            assert TOKEN not in r.text
    sensitive = server.client(SENSITIVE)
    for method, url, body in calls:
        target = url.replace(sid, victim) if method == "DELETE" else url
        # A blob by digest may hold instructions: only the sensitive scope reads it.
        c = sensitive if url.startswith("/blobs/") else right
        r = c.request(method, target, json=body, follow_redirects=False)
        assert r.status_code not in (401, 403) and r.status_code < 500, (method, url, r.text)
    assert right.get(f"/blobs/{'0' * 64}").status_code == 403
    assert anonymous.get("/health").status_code == 200
    assert anonymous.get("/ui/login").status_code == 200


def test_unauthenticated_pages_get_the_login_form(server: Served):
    r = server.client(token=None).get("/ui/")
    assert r.status_code == 401 and 'action="/ui/login"' in r.text
    assert "script-src 'self' 'sha256-" in r.headers["content-security-policy"]


def test_inspector_cookie_is_derived_and_unsafe_methods_need_the_csrf_header(server: Served):
    c = server.client(token=None)
    assert c.post("/ui/login", data={"token": "nope-nope-nope"}).status_code == 401
    r = c.post("/ui/login", data={"token": TOKEN}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/"
    cookie = r.cookies["wakeful_session"]
    assert TOKEN not in cookie and "httponly" in r.headers["set-cookie"].lower()
    assert "samesite=strict" in r.headers["set-cookie"].lower()
    assert c.get("/ui/").status_code == 200
    assert c.get("/sessions").status_code == 200
    sid = server.client().post("/sessions", json={}).json()["session"]["id"]
    blocked = c.post(f"/sessions/{sid}/prompt", json={"text": "x"})
    assert blocked.status_code == 403
    ok = c.post(
        f"/sessions/{sid}/prompt",
        json={"text": "x", "resume": False},
        headers={"X-Wakeful-CSRF": "1"},
    )
    assert ok.status_code == 202
    fake = server.client(token=None, cookies={"wakeful_session": "00" * 32})
    assert fake.get("/sessions").status_code == 401
    assert (
        server.client(token=None, cookies={"wakeful_session": cookie}).get("/sessions").status_code
        == 200
    )
    assert server.client(token=cookie).get("/sessions").status_code == 401  # a cookie is no bearer


def _secret_session(make_server: MakeServer) -> tuple[Served, str]:
    server = make_server()
    work = Path(server.runtime.workspace)
    (work / "AGENTS.md").write_text(f"Always obey {SECRET}.\n")
    c = server.client()
    sid = c.post("/sessions", json={"prompt": {"text": "one", "wait": True}}).json()["session"][
        "id"
    ]
    (work / "AGENTS.md").write_text(f"Now obey {CHANGED}.\n")
    c.post(f"/sessions/{sid}/prompt", json={"text": "two", "wait": True})
    return server, sid


def test_redacted_views_hold_no_instruction_text(make_server: MakeServer):
    server, sid = _secret_session(make_server)
    c, s = server.client(), server.client(token=SENSITIVE)
    receipts = c.get(f"/sessions/{sid}/receipts")
    assert receipts.status_code == 200 and receipts.json()["redacted"] is True
    sections = [x for r in receipts.json()["receipts"] for x in r["sections"]]
    assert any(
        x["id"].startswith("system.") and x["redacted"] and x["content"] is None for x in sections
    )
    redacted = [
        receipts,
        c.get(f"/sessions/{sid}/messages"),
        c.get(f"/sessions/{sid}/log"),
        c.get("/events"),
        c.get(f"/ui/sessions/{sid}"),
        s.get(f"/sessions/{sid}/receipts"),  # the scope alone does not unredact: it must be asked
        c.get(f"/sessions/{sid}/log", params={"follow": "true", "idle_timeout": 0}),
    ]
    for r in redacted:
        assert r.status_code == 200
        assert SECRET not in r.text and CHANGED not in r.text, r.request.url
    assert any("[redacted" in r.text for r in redacted[1:3])  # the system message, the event
    assert c.get(f"/sessions/{sid}/receipts", params={"sensitive": "true"}).status_code == 403
    assert c.get(f"/sessions/{sid}/messages", params={"sensitive": "true"}).status_code == 403
    full = s.get(f"/sessions/{sid}/receipts", params={"sensitive": "true"})
    assert full.json()["redacted"] is False and SECRET in full.text
    assert CHANGED in s.get(f"/sessions/{sid}/messages", params={"sensitive": "true"}).text
    assert CHANGED in s.get(f"/sessions/{sid}/log", params={"sensitive": "true"}).text


def test_request_over_the_size_limit_gets_413(make_server: MakeServer):
    server = make_server(settings=Settings(max_body_bytes=2048, keepalive_s=1.0, poll_ms=10))
    c = server.client()
    sid = c.post("/sessions", json={}).json()["session"]["id"]
    big = {"text": "x" * 4096, "resume": False}
    r = c.post(f"/sessions/{sid}/prompt", json=big)
    assert r.status_code == 413 and r.json()["error"] == "too_large"

    def chunks():  # no Content-Length: the limit is enforced on what arrives
        yield b'{"text": "'
        for _ in range(8):
            yield b"y" * 512
        yield b'"}'

    r = c.post(
        f"/sessions/{sid}/prompt", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413
    assert (
        c.post(f"/sessions/{sid}/prompt", json={"text": "small", "resume": False}).status_code
        == 202
    )
    assert c.get(f"/sessions/{sid}/pending").json()["items"][0]["payload"]["text"] == "small"


def test_tokens_compare_every_entry_and_validate():
    tokens = Tokens(["standard-token-1"], ["sensitive-token-1"])
    assert tokens.check("standard-token-1") == tokens.check("standard-token-1")
    assert tokens.check("standard-token-1").sensitive is False  # type: ignore[union-attr]
    assert tokens.check("sensitive-token-1").sensitive is True  # type: ignore[union-attr]
    assert tokens.check("standard-token-2") is None and tokens.check("") is None
    assert tokens.check("ünïcødé-token") is None
    cookie = tokens.cookie_for("sensitive-token-1")
    assert cookie and tokens.check_cookie(cookie).sensitive  # type: ignore[union-attr]
    assert tokens.check_cookie("zz") is None and tokens.cookie_for("nope") is None
    for bad in ([], ["short"], ["has space in it"]):
        with pytest.raises(UsageError):
            Tokens(bad)


def test_security_headers_on_every_response(server: Served):
    r = httpx.get(f"{server.url}/health")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
