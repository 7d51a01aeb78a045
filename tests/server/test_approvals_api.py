"""Approvals over the API, through a real server: a turn with nobody to ask pauses; the calls
it waits on are listed with their command; a decision admitted by POST runs the call once, or
denies it and the model is told; bad decisions are 4xx with a reason."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.server.conftest import TOKEN, MakeServer, Served, script, wait_for
from wakeful.client import Client

GO = "echo one >> ledger.txt"
RULES = [
    {
        "match": ".",
        "replies": [
            {"tool_calls": [{"name": "shell", "input": {"command": GO}}]},
            {"text": "done"},
        ],
    }
]


def paused(make_server: MakeServer, tmp_path: Path) -> tuple[Served, str, str]:
    served = make_server(model=script(tmp_path, RULES), permissions={})  # the defaults: ask
    c = served.client()
    r = c.post("/sessions", json={"prompt": {"text": "go", "wait": True}})
    assert r.status_code == 201, r.text
    [turn] = r.json()["admission"]["turns"]
    assert turn["outcome"] == "paused"
    sid = r.json()["session"]["id"]
    assert c.get(f"/sessions/{sid}").json()["status"] == "awaiting_approval"
    listed = c.get(f"/sessions/{sid}/approvals").json()
    assert listed["status"] == "awaiting_approval"
    [waiting] = listed["approvals"]
    assert (waiting["name"], waiting["preview"], waiting["input"]) == (
        "shell",
        f"$ {GO}",
        {"command": GO},
    )
    return served, sid, waiting["call_id"]


def ledger(served: Served) -> Counter[str]:
    path = served.runtime.workspace / "ledger.txt"
    return Counter(path.read_text().split()) if path.exists() else Counter()


def idle(served: Served, sid: str) -> bool:
    return bool(served.client().get(f"/sessions/{sid}").json()["status"] == "idle")


def test_a_paused_turn_is_approved_over_the_api_and_runs_once(
    make_server: MakeServer, tmp_path: Path
):
    served, sid, call = paused(make_server, tmp_path)
    c = served.client()
    assert ledger(served) == Counter()
    r = c.post(f"/sessions/{sid}/approvals/{call}", json={"decision": "allow"})
    assert r.status_code == 202 and r.json()["input_id"] == f"approval_{call}"
    wait_for(lambda: idle(served, sid), what="the approved turn to end")
    assert ledger(served) == {"one": 1}
    assert c.get(f"/sessions/{sid}/approvals").json()["approvals"] == []
    again = c.post(f"/sessions/{sid}/approvals/{call}", json={"decision": "allow"})
    assert again.status_code == 404 and "awaits approval" in again.json()["reason"]
    assert ledger(served) == {"one": 1}


def test_a_deny_over_the_client_tells_the_model(make_server: MakeServer, tmp_path: Path):
    served, sid, call = paused(make_server, tmp_path)
    with Client(served.url, token=TOKEN) as client:
        assert [a["call_id"] for a in client.approvals(sid)] == [call]
        client.approve(sid, call, "deny")
    wait_for(lambda: idle(served, sid), what="the denied turn to end")
    assert ledger(served) == Counter()
    results = [r for m in served.store.messages(sid) for r in m.tool_results()]
    assert [r.output for r in results] == ["permission denied: the user declined shell"]
    assert served.store.messages(sid)[-1].text() == "done"


def test_bad_decisions_are_4xx_with_a_reason(make_server: MakeServer, tmp_path: Path):
    served, sid, call = paused(make_server, tmp_path)
    c = served.client()
    bad = c.post(f"/sessions/{sid}/approvals/{call}", json={"decision": "maybe"})
    assert bad.status_code == 422 and "decision" in bad.json()["reason"]
    unknown = c.post(f"/sessions/{sid}/approvals/call_nope", json={"decision": "allow"})
    assert unknown.status_code == 404
    missing = c.get("/sessions/ses_nope/approvals")
    assert missing.status_code == 404
    deny = {"decision": "deny", "resume": False}
    assert c.post(f"/sessions/{sid}/approvals/{call}", json=deny).status_code == 202
    conflict = c.post(f"/sessions/{sid}/approvals/{call}", json={"decision": "allow"})
    assert conflict.status_code == 409 and "decided" in conflict.json()["reason"]


def test_a_remote_store_reads_the_waiting_calls_as_the_local_one(
    make_server: MakeServer, tmp_path: Path
):
    """`RemoteStore` implements the `Store` protocol's `tool_calls` from the log, so the calls a
    session waits on read the same through a server as from the database (`session show
    --db http://...` lists them)."""
    from wakeful.client import RemoteStore
    from wakeful.execution import pending_approvals

    served, sid, call = paused(make_server, tmp_path)
    remote = RemoteStore(served.url, TOKEN)
    try:
        assert remote.tool_calls(sid) == served.store.tool_calls(sid) == []
        assert [r.call_id for r in pending_approvals(remote, sid)] == [call]
        assert pending_approvals(remote, sid) == pending_approvals(served.store, sid)
        served.client().post(f"/sessions/{sid}/approvals/{call}", json={"decision": "allow"})
        wait_for(lambda: idle(served, sid), what="the approved turn to end")
        [ran] = served.store.tool_calls(sid)
        assert ran.status != "running" and remote.tool_calls(sid) == [ran]
        assert remote.tool_calls(sid, "running") == [] and pending_approvals(remote, sid) == []
    finally:
        remote.close()
