"""Who admitted, approved, interrupted, rewound or deleted is in the log (issue 39 item 1,
docs/access.md "Who did what"): through the server (a user, `operator`), never a token."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.server.conftest import TOKEN, MakeServer, Served, script, wait_for
from wakeful.events import StoredEvent

SLOW = "x" * 400
RULES = [
    {"match": "slow", "replies": [{"text": SLOW}]},
    {
        "match": ".",
        "replies": [
            {"tool_calls": [{"name": "shell", "input": {"command": "echo hi"}}]},
            {"text": "done"},
        ],
    },
]


def _actors(server: Served, sid: str) -> list[tuple[str, str | None]]:
    """(type, actor) of each event of the session that records one, in order."""
    events = [e for e in server.store.log(sid) if isinstance(e, StoredEvent)]
    return [(e.type, e.event.actor) for e in events if hasattr(e.event, "actor")]


def _settled(detail: dict[str, object]) -> bool:
    """Idle and held by no driver: a rewind now interrupts nothing."""
    return detail["status"] == "idle" and not detail["active"] and detail["claim"] is None


def _user(server: Served, name: str) -> tuple[str, httpx.Client]:
    made = server.client().post(
        "/admin/tokens", json={"user": name, "scopes": ["read", "drive", "approve"]}
    )
    secret = made.json()["secret"]
    return secret, server.client(secret)


def test_the_log_names_who_did_each_thing_over_the_api(make_server: MakeServer, tmp_path: Path):
    server = make_server(
        model=script(tmp_path, RULES, chunk_chars=4, chunk_delay_ms=20), permissions={}
    )
    secret, alice = _user(server, "alice")
    made = alice.post("/sessions", json={"prompt": {"text": "go", "wait": True}})
    sid = made.json()["session"]["id"]
    [waiting] = alice.get(f"/sessions/{sid}/approvals").json()["approvals"]
    r = alice.post(f"/sessions/{sid}/approvals/{waiting['call_id']}", json={"decision": "deny"})
    assert r.status_code == 202, r.text
    wait_for(lambda: _settled(alice.get(f"/sessions/{sid}").json()), what="the drain's end")
    assert alice.post(f"/sessions/{sid}/rewind", json={}).status_code == 200
    assert alice.post(f"/sessions/{sid}/unrevert", json={}).status_code == 200
    operator = server.client()
    operator.post(f"/sessions/{sid}/prompt", json={"text": "slow"})
    wait_for(lambda: operator.get(f"/sessions/{sid}").json()["active"], what="the slow turn")
    assert operator.post(f"/sessions/{sid}/interrupt").json()["requested"] is True
    assert _actors(server, sid) == [
        ("inbox.enqueued", "alice"),  # the first prompt
        ("inbox.enqueued", "alice"),  # the denial
        ("session.reverted", "alice"),
        ("session.unreverted", "alice"),
        ("inbox.enqueued", "operator"),  # an operator token's prompt
        ("session.interrupt_requested", "operator"),
    ]
    wait_for(lambda: not operator.get(f"/sessions/{sid}").json()["active"], what="the stop")
    assert alice.post(f"/sessions/{sid}/budget", json={"amount": "+5usd"}).status_code == 202
    assert alice.post(f"/sessions/{sid}/compact", json={"resume": False}).status_code == 202
    moved = alice.post(f"/sessions/{sid}/move", json={"location": str(tmp_path), "resume": False})
    assert moved.status_code == 202, moved.text
    assert _actors(server, sid)[-3:] == [
        ("budget.raised", "alice"),
        ("inbox.enqueued", "alice"),  # the compaction request
        ("inbox.enqueued", "alice"),  # the move
    ]
    log = "\n".join(repr(e) for e in server.store.log(sid))
    assert secret not in log and TOKEN not in log
    assert alice.delete(f"/sessions/{sid}").status_code == 200
    [gone] = server.store.access.deletions(sid)
    assert (gone.actor, gone.owner, gone.how, gone.parent_id) == ("alice", "alice", "delete", None)


@pytest.mark.parametrize("name", ["operator", "local"])
def test_an_actor_of_another_kind_is_no_users_name(server: Served, name: str):
    r = server.client().post("/admin/tokens", json={"user": name, "scopes": ["read"]})
    assert r.status_code == 422 and "another kind of actor" in r.json()["reason"]
