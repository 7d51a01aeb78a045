"""Share links (issue 39 item 2, docs/access.md "Share links"): a read-only, expiring,
revocable view of one session or turn, opened without a token; revoking cuts its followers."""

from __future__ import annotations

import threading

import httpx

from tests.server.conftest import Served, wait_for

REPLY = "hello from the scripted model"


def _session(server: Served) -> tuple[httpx.Client, str]:
    c = server.client()
    sid = c.post("/sessions", json={"prompt": {"text": "first", "wait": True}}).json()["session"][
        "id"
    ]
    return c, sid


def _open(server: Served, secret: str) -> httpx.Client:
    """A browser without a token, through the link's page and its form."""
    browser = server.client(token=None)
    page = browser.get("/ui/share")
    assert page.status_code == 200 and "share.js" in page.text
    r = browser.post("/ui/share", data={"secret": secret}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/shared", r.text
    assert secret not in r.headers["location"]
    return browser


def test_a_link_opens_the_view_without_a_token(server: Served):
    c, sid = _session(server)
    other = c.post("/sessions", json={"title": "not shared"}).json()["session"]["id"]
    made = c.post(f"/sessions/{sid}/shares", json={"expires": "1h"})
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["path"] == f"/ui/share#{body['secret']}"
    assert [s["id"] for s in c.get(f"/sessions/{sid}/shares").json()["shares"]] == [
        body["share"]["id"]
    ]
    assert body["secret"] not in c.get(f"/sessions/{sid}/shares").text
    browser = _open(server, body["secret"])
    view = browser.get("/ui/shared")
    assert view.status_code == 200 and REPLY in view.text and "read-only" in view.text
    assert other not in view.text and 'id="compose"' not in view.text
    assert browser.get("/sessions").status_code == 401  # the link opens the view, nothing else
    assert browser.get(f"/ui/sessions/{sid}").status_code == 401
    bad = server.client(token=None).post("/ui/share", data={"secret": "wks_nope"})
    assert bad.status_code == 404


def test_revoking_cuts_a_live_follower(server: Served):
    c, sid = _session(server)
    body = c.post(f"/sessions/{sid}/shares", json={}).json()
    browser = _open(server, body["secret"])
    seen: list[str] = []
    done = threading.Event()

    def follow() -> None:
        with browser.stream("GET", "/ui/shared/log") as r:
            for line in r.iter_lines():
                seen.append(line)
        done.set()

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    wait_for(lambda: any(REPLY in line for line in seen), what="the follower to replay")
    c.post(f"/sessions/{sid}/prompt", json={"text": "second", "wait": True})
    wait_for(lambda: sum(REPLY in line for line in seen) >= 2, what="a live event")
    assert c.delete(f"/shares/{body['share']['id']}").json()["revoked_ms"] is not None
    assert done.wait(20), "the follower's stream was not closed at revoke"
    assert any("event: closed" in line for line in seen)
    assert browser.get("/ui/shared").status_code == 404
    assert browser.get("/ui/shared/log").status_code == 404


def test_a_link_expires_and_may_show_one_turn(server: Served):
    c, sid = _session(server)
    c.post(f"/sessions/{sid}/prompt", json={"text": "second turn please", "wait": True})
    turns = c.get(f"/sessions/{sid}/turns").json()["turns"]
    second = turns[1]["id"]
    one = c.post(f"/sessions/{sid}/shares", json={"turn_id": second}).json()
    view = _open(server, one["secret"]).get("/ui/shared").text
    assert "second turn please" in view and "first" not in view.split("<main>")[1]
    assert c.post(f"/sessions/{sid}/shares", json={"turn_id": "turn_nope"}).status_code == 404
    assert c.post(f"/sessions/{sid}/shares", json={"expires": "91d"}).status_code == 422
    short = c.post(f"/sessions/{sid}/shares", json={"expires": "100ms"}).json()
    browser = server.client(token=None)
    wait_for(
        lambda: browser.post("/ui/share", data={"secret": short["secret"]}).status_code == 404,
        what="the link to expire",
    )


def test_another_users_link_is_not_theirs(server: Served):
    c, sid = _session(server)
    admin = server.client()
    server.store.access.set_owner(sid, "alice")
    bob = server.client(
        admin.post("/admin/tokens", json={"user": "bob", "scopes": ["read", "drive"]}).json()[
            "secret"
        ]
    )
    link = c.post(f"/sessions/{sid}/shares", json={}).json()["share"]["id"]
    assert bob.post(f"/sessions/{sid}/shares", json={}).status_code == 404
    assert bob.delete(f"/shares/{link}").status_code == 404
    assert c.delete(f"/shares/{link}").status_code == 200


def _png(size: int = 48) -> bytes:
    """A `size` x `size` PNG, orange with a blue diagonal band: visible in a screenshot."""
    import struct
    import zlib

    rows = b"".join(
        b"\x00"
        + b"".join(
            bytes((30, 90, 200)) if abs(x - y) < size // 6 else bytes((240, 140, 20))
            for x in range(size)
        )
        for y in range(size)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def image_session(server: Served, png: bytes) -> tuple[httpx.Client, str, str]:
    """A session whose first prompt holds `png` (stored as a blob), and the blob's digest."""
    import base64
    import hashlib

    c = server.client()
    block = {"type": "image", "media_type": "image/png", "data": base64.b64encode(png).decode()}
    prompt = {"blocks": [{"type": "text", "text": "look at this"}, block], "wait": True}
    sid = c.post("/sessions", json={"prompt": prompt}).json()["session"]["id"]
    return c, sid, hashlib.sha256(png).hexdigest()


def test_a_links_view_serves_the_media_of_its_session_only(server: Served):
    png = _png()
    c, sid, digest = image_session(server, png)
    _, other_sid, other = image_session(server, _png(20))
    body = c.post(f"/sessions/{sid}/shares", json={}).json()
    browser = _open(server, body["secret"])
    assert f"/ui/shared/media/{digest}" in browser.get("/ui/shared").text
    got = browser.get(f"/ui/shared/media/{digest}")
    assert got.status_code == 200 and got.content == png
    assert got.headers["content-type"] == "image/png"
    assert browser.get(f"/ui/shared/media/{other}").status_code == 404  # another session's
    assert browser.get(f"/sessions/{sid}/media/{digest}").status_code == 401  # no API route
    stranger = server.client(token=None)
    assert stranger.get(f"/ui/shared/media/{digest}").status_code == 404  # no link, nothing
    assert stranger.get("/ui/shared/media/../../sessions").status_code in (401, 404)
    turn = c.post(f"/sessions/{other_sid}/prompt", json={"text": "more", "wait": True})
    assert turn.status_code == 200
    [second] = turn.json()["turns"]
    one_turn = c.post(f"/sessions/{other_sid}/shares", json={"turn_id": second["turn_id"]}).json()
    later = _open(server, one_turn["secret"])  # the second turn's view: not the first's image
    assert later.get(f"/ui/shared/media/{other}").status_code == 404
    c.delete(f"/shares/{body['share']['id']}")
    assert browser.get(f"/ui/shared/media/{digest}").status_code == 404  # revoked: nothing
