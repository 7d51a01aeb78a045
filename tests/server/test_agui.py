"""AG-UI through a real server, read with the `ag-ui-protocol` package's own types: a client
runs a session, drops the connection mid-run, reconnects with `Last-Event-ID` and sees every
event once; an approval is an interrupt, and a resume entry runs the call once."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from ag_ui.core import (
    Event,
    RunAgentInput,
    RunFinishedEvent,
    StateSnapshotEvent,
    UserMessage,
)
from pydantic import TypeAdapter

from tests.server.conftest import MakeServer, Served, script

EVENT: TypeAdapter[Any] = TypeAdapter(Event)
GO = "echo one >> ledger.txt"
FINAL = "All written down: " + "the list has two items. " * 4
RULES = [
    {
        "match": "^plan$",
        "replies": [
            {
                "tool_calls": [
                    {
                        "name": "todo_write",
                        "input": {
                            "todos": [
                                {"content": "buy milk"},
                                {"content": "call mum", "status": "in_progress"},
                            ]
                        },
                    }
                ]
            },
            {"text": FINAL},
        ],
    },
    {
        "match": "^go$",
        "replies": [
            {"tool_calls": [{"name": "shell", "input": {"command": GO}}]},
            {"text": "done"},
        ],
    },
]


def run_input(sid: str, *texts: str, run: str = "run-1", **kw: Any) -> dict[str, Any]:
    messages = [UserMessage(id=f"m{i}", content=t) for i, t in enumerate(texts)]
    body = RunAgentInput(thread_id=sid, run_id=run, messages=messages, **kw)
    return body.model_dump(mode="json", by_alias=True)


def read_sse(response: httpx.Response, stop: int | None = None) -> list[tuple[str, Any]]:
    """(id, AG-UI event) pairs, each validated with the package's types; `stop` events at most."""
    out: list[tuple[str, Any]] = []
    sid, data = "", ""
    for line in response.iter_lines():
        if line.startswith("id:"):
            sid = line[3:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip()
        elif not line and data:
            out.append((sid, EVENT.validate_json(data)))
            sid, data = "", ""
            if stop is not None and len(out) >= stop:
                break
    return out


def session(served: Served) -> str:
    r = served.client().post("/sessions", json={})
    assert r.status_code == 201, r.text
    return str(r.json()["session"]["id"])


def types(pairs: list[tuple[str, Any]]) -> list[str]:
    return [e.type.value for _, e in pairs]


def test_a_client_follows_a_run_across_a_reconnect_and_sees_every_event_once(
    make_server: MakeServer, tmp_path: Path
):
    served = make_server(model=script(tmp_path, RULES, chunk_chars=4, chunk_delay_ms=20))
    sid = session(served)
    c = served.client()
    body = run_input(sid, "plan")
    with c.stream("POST", f"/sessions/{sid}/agui", json=body) as first:
        assert first.status_code == 200 and first.headers["content-type"].startswith(
            "text/event-stream"
        )
        seen = read_sse(first, stop=7)  # dropped mid-run: the final reply is still streaming
    assert types(seen)[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    last_id = seen[-1][0]
    headers = {"Last-Event-ID": last_id}
    with c.stream("POST", f"/sessions/{sid}/agui", json=body, headers=headers) as again:
        seen += read_sse(again)
    ids = [i for i, _ in seen]
    assert len(ids) == len(set(ids)) and ids == sorted(
        ids, key=lambda i: tuple(map(int, i.split(":")))
    )
    assert types(seen) == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STATE_SNAPSHOT",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    events = [e for _, e in seen]
    assert events[0].thread_id == sid and events[0].run_id == "agui_m0"
    assert events[3].delta == "plan" and events[2].message_id == "m0"  # the client's own id
    assert json.loads(events[6].delta)["todos"][0]["content"] == "buy milk"
    snapshots = [e.snapshot for e in events if isinstance(e, StateSnapshotEvent)]
    assert snapshots == [
        {},
        {
            "todos": [
                {"content": "buy milk", "status": "pending"},
                {"content": "call mum", "status": "in_progress"},
            ]
        },
    ]
    assert events[11].delta == FINAL
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].outcome.type == "success"
    # A follower from the start sees exactly the same events with the same ids.
    with c.stream("GET", f"/sessions/{sid}/agui", params={"follow": "false"}) as whole:
        assert [(i, e.model_dump()) for i, e in read_sse(whole)] == [
            (i, e.model_dump()) for i, e in seen
        ]
    # The same request again admits nothing twice: one user input, one run.
    log = c.get(f"/sessions/{sid}/log").json()["events"]
    assert [e["type"] for e in log].count("inbox.enqueued") == 1


def ledger(served: Served) -> Counter[str]:
    path = served.runtime.workspace / "ledger.txt"
    return Counter(path.read_text().split()) if path.exists() else Counter()


def test_an_approval_is_an_interrupt_and_a_resume_entry_runs_the_call_once(
    make_server: MakeServer, tmp_path: Path
):
    served = make_server(model=script(tmp_path, RULES), permissions={})  # shell asks
    sid = session(served)
    c = served.client()
    with c.stream("POST", f"/sessions/{sid}/agui", json=run_input(sid, "go")) as first:
        paused = read_sse(first)
    end = paused[-1][1]
    assert isinstance(end, RunFinishedEvent) and end.outcome.type == "interrupt"
    [interrupt] = end.outcome.interrupts
    assert interrupt.message == f"$ {GO}" and interrupt.tool_call_id == interrupt.id
    assert ledger(served) == Counter()
    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"decision": "allow"}}]
    body = run_input(sid, "go", run="run-2", resume=resume)
    with c.stream("POST", f"/sessions/{sid}/agui", json=body) as second:
        resumed = read_sse(second)
    assert types(resumed) == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert resumed[-1][1].outcome.type == "success" and ledger(served) == {"one": 1}
    with c.stream("POST", f"/sessions/{sid}/agui", json=body) as third:  # the same again
        assert third.status_code == 200
        assert types(read_sse(third))[-7:] == types(resumed)  # after the first run, replayed
    other = run_input(sid, "go", run="run-3", resume=[{**resume[0], "payload": False}])
    assert c.post(f"/sessions/{sid}/agui", json=other).status_code == 409
    assert ledger(served) == {"one": 1}


def test_bad_run_inputs_are_refused_with_a_reason_and_write_nothing(server: Served):
    sid = session(server)
    c = server.client()
    before = c.get(f"/sessions/{sid}/log").json()["events"]
    cases = [
        (run_input("ses_other", "hi"), {}, 422, "threadId"),
        (run_input(sid), {}, 422, "nothing to run"),
        (
            run_input(
                sid,
                "hi",
                resume=[
                    {
                        "interruptId": "call_x",
                        "status": "resolved",
                        "payload": {"decision": "allow"},
                    }
                ],
            ),
            {},
            404,
            "call_x",
        ),
        (
            run_input(
                sid,
                "hi",
                resume=[
                    {
                        "interruptId": "call_x",
                        "status": "resolved",
                        "payload": {"decision": "maybe"},
                    }
                ],
            ),
            {},
            422,
            "decision",
        ),
        ({"threadId": sid}, {}, 422, "runId"),
    ]
    for body, headers, status, reason in cases:
        r = c.post(f"/sessions/{sid}/agui", json=body, headers=headers)
        assert r.status_code == status and reason in r.json()["reason"], (body, r.text)
    bad = c.get(f"/sessions/{sid}/agui", headers={"Last-Event-ID": "x"})
    assert bad.status_code == 400 and "SEQ" in bad.json()["reason"]
    assert c.get("/sessions/ses_000000000000000000000000/agui").status_code == 404
    assert c.get(f"/sessions/{sid}/log").json()["events"] == before
