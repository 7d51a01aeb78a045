"""`GET /sessions?q=`: full-text search over session content through the API and the client."""

from __future__ import annotations

from tests.server.conftest import TOKEN, Served, script
from wakeful.client import Client


def test_q_searches_content_ranks_pages_and_shows_where_it_matched(make_server, tmp_path):
    model = script(
        tmp_path,
        [
            {
                "match": "capybara",
                "replies": [{"text": "Capybaras are the largest living rodents."}],
            },
            {"match": ".", "replies": [{"text": "Nothing to see."}]},
        ],
    )
    server: Served = make_server(model=model)
    c = server.client()
    made = [
        c.post(
            "/sessions", json={"title": f"chat {i}", "prompt": {"text": text, "wait": True}}
        ).json()["session"]["id"]
        for i, text in enumerate(
            ["hello", "tell me about the capybara", "hi again", "and a capybara?"]
        )
    ]
    found = c.get("/sessions", params={"q": "rodents"}).json()
    assert {s["id"] for s in found["sessions"]} == {made[1], made[3]}
    assert found["sessions"][0]["match"]["snippet"] == "Capybaras are the largest living rodents."
    assert found["sessions"][0]["match"]["seq"] > 0
    assert found["next_cursor"] is None
    first = c.get("/sessions", params={"q": "chat", "limit": 3}).json()
    assert len(first["sessions"]) == 3 and first["next_cursor"] == "3"
    assert first["sessions"][0]["match"] == {"seq": 0, "snippet": first["sessions"][0]["title"]}
    rest = c.get("/sessions", params={"q": "chat", "limit": 3, "cursor": first["next_cursor"]})
    assert {s["id"] for s in first["sessions"] + rest.json()["sessions"]} == set(made)
    assert rest.json()["next_cursor"] is None
    by_id = c.get("/sessions", params={"q": made[2]}).json()["sessions"]
    assert [s["id"] for s in by_id] == [made[2]]
    listed = c.get("/sessions").json()["sessions"]
    assert all(s["match"] is None for s in listed)


def test_bad_searches_are_422_with_a_reason(server: Served):
    c = server.client()
    c.post("/sessions", json={"title": "one"})
    listing_cursor = "1700000000000:ses_abc"
    for params in ({"q": "!!!"}, {"q": "one", "cursor": listing_cursor}, {"q": "x" * 201}):
        response = c.get("/sessions", params=params)
        assert response.status_code == 422, params
        assert response.json()["reason"]


def test_the_client_searches_too(server: Served):
    with Client(server.url, TOKEN) as client:
        sid = client.create_session(title="quarterly numbers")["session"]["id"]
        client.create_session(title="something else")
        hits = client.list_sessions(q="quarterly")["sessions"]
        assert [s["id"] for s in hits] == [sid]


def test_session_search_works_against_a_server(server: Served, tmp_path):
    import os
    import subprocess
    import sys

    with Client(server.url, TOKEN) as client:
        sid = client.create_session(title="remote pangolin notes")["session"]["id"]
    env = os.environ | {"WAKEFUL_SERVER_TOKEN": TOKEN, "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "wakeful", "session", "search", "pangolin", "--db", server.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(sid)


def test_a_search_in_a_store_without_search_is_422_naming_how_to_turn_it_on(server: Served):
    c = server.client()
    sid = c.post("/sessions", json={"title": "okapi notes"}).json()["session"]["id"]
    server.store.set_search(False)
    response = c.get("/sessions", params={"q": "okapi"})
    assert response.status_code == 422
    assert "wakeful store search on" in response.json()["reason"]
    assert [s["id"] for s in c.get("/sessions").json()["sessions"]] == [sid]  # lists as before
    server.store.set_search(True)
    assert [s["id"] for s in c.get("/sessions", params={"q": "okapi"}).json()["sessions"]] == [sid]
