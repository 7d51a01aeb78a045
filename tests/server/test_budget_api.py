"""`POST /sessions/{id}/budget` through a real server: a session its budget paused is raised
and continued; a bad amount is a 422 with a reason and writes nothing."""

from __future__ import annotations

from pathlib import Path

from tests.server.conftest import TOKEN, MakeServer, script, wait_for
from wakeful.client import Client

CALLS = [{"tool_calls": [{"name": "goal_set", "input": {"goal": f"g{i}"}}]} for i in range(40)]
RULES = [{"match": ".", "replies": [*CALLS, {"text": "done"}]}]


def test_a_budget_raise_over_the_api_continues_the_session(make_server: MakeServer, tmp_path: Path):
    served = make_server(model=script(tmp_path, RULES))
    place = tmp_path / "place"
    place.mkdir()
    (place / ".git").mkdir()
    (place / "wakeful.toml").write_text("[budgets]\nsession_tokens = 3000\n")
    c = served.client()
    r = c.post("/sessions", json={"location": str(place), "prompt": {"text": "go", "wait": True}})
    assert r.status_code == 201, r.text
    [turn] = r.json()["admission"]["turns"]
    assert turn["outcome"] == "paused" and turn["error"].startswith("budget:"), turn
    sid = r.json()["session"]["id"]
    page = c.get(f"/ui/sessions/{sid}")  # the inspector's raise button posts to the same route
    assert page.status_code == 200 and 'id="budget-form"' in page.text
    script_js = c.get("/ui/static/session.js").text
    assert '"/sessions/" + sid + "/budget"' in script_js
    bad = c.post(f"/sessions/{sid}/budget", json={"amount": "+5eur"})
    assert bad.status_code == 422 and "budget amount" in bad.json()["reason"]
    assert served.runtime.store.events(sid, types=("budget.raised",)) == []
    with Client(served.url, token=TOKEN) as client:
        out = client.raise_budget(sid, "1000000tokens")
    assert out["set_tokens"] == 1_000_000 and out["input_id"] is not None
    wait_for(
        lambda: c.get(f"/sessions/{sid}").json()["status"] == "idle",
        what="the continued turn to end",
    )
    turns = c.get(f"/sessions/{sid}/turns").json()["turns"]
    assert turns[-1]["outcome"] == "completed"
