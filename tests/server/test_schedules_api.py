"""Schedules over the HTTP API, through a real server: add, list with next fire times, read with
fires, pause, resume, delete; bad input is a 4xx with a reason; the OpenAPI document has them."""

from __future__ import annotations

import time
from pathlib import Path

from tests.server.conftest import MakeServer, script
from wakeful.execution import fire_due
from wakeful.server import Settings


def test_schedules_over_the_api(make_server: MakeServer, tmp_path: Path):
    served = make_server(model=script(tmp_path, [{"match": ".", "replies": [{"text": "ok"}]}]))
    c = served.client()
    sid = c.post("/sessions", json={"title": "target"}).json()["session"]["id"]
    r = c.post(
        "/schedules",
        json={
            "prompt": "tick",
            "every": "1s",
            "session_id": sid,
            "missed": "once",
            "grace_ms": 5000,
            "name": "ticker",
        },
    )
    assert r.status_code == 201, r.text
    added = r.json()
    assert (added["every"], added["missed"], added["session_id"]) == ("every 1s", "once", sid)
    assert added["next_fire"] is not None and added["enabled"] is True
    made = c.post(
        "/schedules", json={"prompt": "report", "cron": "0 9 * * *", "timezone": "Asia/Tokyo"}
    ).json()
    assert made["template"]["model"] == served.runtime.model and "+09:00" in made["next_fire"]

    listed = c.get("/schedules").json()["schedules"]
    assert [s["id"] for s in listed] == [added["id"], made["id"]]
    time.sleep(1.2)
    fired = fire_due(served.runtime.store)
    assert [f.schedule_id for f in fired] == [added["id"]]
    one = c.get(f"/schedules/{added['id']}").json()
    assert one["last_fire"]["outcome"] == "fired" and len(one["fires"]) == 1
    assert one["fires"][0]["session_id"] == sid

    assert c.post(f"/schedules/{added['id']}/pause").json()["enabled"] is False
    assert c.post(f"/schedules/{added['id']}/resume").json()["enabled"] is True
    assert c.delete(f"/schedules/{made['id']}").json() == {"id": made["id"], "deleted": True}
    assert [s["id"] for s in c.get("/schedules").json()["schedules"]] == [added["id"]]


def test_bad_schedules_are_4xx_with_a_reason(make_server: MakeServer, tmp_path: Path):
    served = make_server(model=script(tmp_path, [{"match": ".", "replies": [{"text": "ok"}]}]))
    c = served.client()
    for body, status, words in [
        ({"prompt": "x", "cron": "nope"}, 422, "cron"),
        ({"prompt": "x"}, 422, "exactly one"),
        ({"prompt": "x", "every": "1s", "timezone": "Nowhere/Land"}, 422, "time zone"),
        ({"prompt": "x", "every": "1s", "session_id": "ses_missing"}, 404, "ses_missing"),
        ({"prompt": "x", "every": "1s", "missed": "later"}, 422, "missed"),
        ({"prompt": "x", "every": "1s", "extra": 1}, 422, "extra"),
        ({"prompt": "", "every": "1s"}, 422, "prompt"),
    ]:
        r = c.post("/schedules", json=body)
        assert r.status_code == status, (body, r.text)
        assert words in r.json()["reason"], (body, r.text)
    for method, path in [
        ("GET", "/schedules/sch_missing"),
        ("POST", "/schedules/sch_missing/pause"),
        ("POST", "/schedules/sch_missing/resume"),
        ("DELETE", "/schedules/sch_missing"),
    ]:
        r = c.request(method, path)
        assert r.status_code == 404 and "sch_missing" in r.json()["reason"]
    assert c.get("/schedules").json() == {"schedules": []}


def test_the_openapi_document_has_the_schedule_operations(make_server: MakeServer, tmp_path: Path):
    served = make_server(model=script(tmp_path, [{"match": ".", "replies": [{"text": "ok"}]}]))
    doc = served.client().get("/openapi.json").json()
    assert {"get", "post"} <= set(doc["paths"]["/schedules"])
    assert {"get", "delete"} <= set(doc["paths"]["/schedules/{schedule_id}"])
    assert "post" in doc["paths"]["/schedules/{schedule_id}/pause"]
    assert "ScheduleIn" in doc["components"]["schemas"]


def test_a_server_fires_due_schedules_and_drives_what_they_admit(
    make_server: MakeServer, tmp_path: Path
):
    served = make_server(
        model=script(tmp_path, [{"match": "tick", "replies": [{"text": "tock"}]}]),
        settings=Settings(keepalive_s=1.0, poll_ms=10, schedules=True),
    )
    c = served.client()
    sid = c.post("/sessions", json={"title": "target"}).json()["session"]["id"]
    r = c.post("/schedules", json={"prompt": "tick", "every": "1s", "session_id": sid})
    assert r.status_code == 201, r.text
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # no worker runs: only the server can fire and drive
        turns = c.get(f"/sessions/{sid}/turns").json()["turns"]
        if any(t["status"] == "completed" for t in turns):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the server fired nothing, or did not drive what it fired")
    transcript = c.get(f"/sessions/{sid}/messages").text
    assert '"tick"' in transcript and '"tock"' in transcript
