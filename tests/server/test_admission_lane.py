"""Prompts admitted together (`_lane.AdmissionLane`): a burst that arrives while an admission is
being written is admitted in one worker-thread call and one transaction, and every request
still gets the answer its own admission gives (checked by asking again alone); a request that
fails fails alone, and the store holds each created input once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.allow import ALLOW_WRITES
from tests.server.conftest import ECHO, TOKEN, ServerThread, script
from wakeful.config import Config
from wakeful.execution import Runtime
from wakeful.server import Settings, Tokens, create_app
from wakeful.server._lane import CALLS

AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Spy:
    """Records the size of every `Runtime.admit_together` call (the lane's worker-thread
    calls) and holds the first `CALLS` (all the lane runs at once) until `hold_for` other
    requests wait in the lane, so the burst is sure to arrive while they are being written."""

    def __init__(self, runtime: Runtime, lane: Any, hold_for: int) -> None:
        self.real = runtime.admit_together
        self.lane, self.hold_for = lane, hold_for
        self.sizes: list[int] = []

    def __call__(self, requests: list[Any]) -> list[Any]:
        self.sizes.append(len(requests))
        if len(self.sizes) <= CALLS:
            deadline = time.monotonic() + 10
            while len(self.lane._waiting) < self.hold_for and time.monotonic() < deadline:
                time.sleep(0.002)
        return self.real(requests)


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Any:
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    rt = Runtime(
        db_url,
        model=script(tmp_path, ECHO),
        workspace=work,
        config=Config(permissions=ALLOW_WRITES),
    )
    app = create_app(
        rt, tokens=Tokens([TOKEN]), settings=Settings(keepalive_s=1.0), own_runtime=True
    )
    thread = ServerThread(app)
    thread.start()
    yield f"http://127.0.0.1:{thread.port}", rt, app.state.wakeful
    thread.stop()


def _answer(r: httpx.Response) -> tuple[int, Any]:
    return r.status_code, r.json()


async def _post_all(url: str, posts: list[tuple[str, dict[str, Any]]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as c:
        return list(
            await asyncio.gather(
                *(c.post(f"/sessions/{sid}/prompt", json=body) for sid, body in posts)
            )
        )


def test_a_burst_is_admitted_together_and_each_gets_its_own_answer(served: Any) -> None:
    url, rt, state = served
    a = rt.create_session(session_id="ses_lane_aaaaaaaa").id
    b = rt.create_session(session_id="ses_lane_bbbbbbbb").id
    rt.send(session_id=a, input_id="dup", payload={"text": "same"}, resume=False, create=False)
    events_before = {sid: len(rt.store.events(sid)) for sid in (a, b)}
    posts: list[tuple[str, dict[str, Any]]] = [
        (a, {"text": "one", "input_id": "a1", "resume": False}),
        (b, {"text": "two", "input_id": "b1", "resume": False, "delivery": "queue"}),
        (a, {"text": "same", "input_id": "dup", "resume": False}),  # the original: 202
        (a, {"text": "other", "input_id": "dup", "resume": False}),  # 409
        ("ses_lane_nobody", {"text": "lost", "resume": False}),  # 404
        ("ses_lane_b", {"text": "by prefix", "input_id": "b2", "resume": False}),  # 202, to b
        (a, {"text": "twice", "input_id": "tw", "resume": False}),  # one of these two
        (a, {"text": "twice", "input_id": "tw", "resume": False}),  # creates it
        (b, {"text": "no id", "resume": False}),
    ]
    spy = Spy(rt, state.lane, hold_for=len(posts) - CALLS)
    rt.admit_together = spy  # the lane calls it by name on the runtime
    answers = [_answer(r) for r in asyncio.run(_post_all(url, posts))]

    # A call each for the requests that found a call free, one for all that waited meanwhile.
    assert spy.sizes == [1] * CALLS + [len(posts) - CALLS]
    statuses = [status for status, _ in answers]
    assert statuses == [202, 202, 202, 409, 404, 202, 202, 202, 202]
    created = {
        (body["session_id"], body["input_id"]): body["created"]
        for status, body in answers
        if status == 202 and body["input_id"] != "tw"
    }
    no_id = answers[8][1]["input_id"]
    assert created == {
        (a, "a1"): True,
        (b, "b1"): True,
        (a, "dup"): False,
        (b, "b2"): True,
        (b, no_id): True,
    }
    assert sorted(body["created"] for _, body in answers[6:8]) == [False, True]
    assert all(body["status"] == "pending" for status, body in answers if status == 202)

    # Asked again alone (the lane idle), each request gets the same answer, but for `created`:
    # an input id admitted once is the original from then on (and a post without an id is new).
    again = [_answer(r) for r in asyncio.run(_post_all(url, posts[:6]))]
    for (status, body), (status2, body2) in zip(answers[:6], again, strict=True):
        assert status2 == status
        if status == 202:
            assert {**body, "created": False} == body2
        else:
            assert body2 == body

    # The store holds each created input once, in gap-free logs, and nothing of the failures.
    pending = {sid: sorted(i.input_id for i in rt.store.pending(sid)) for sid in (a, b)}
    assert pending == {a: ["a1", "dup", "tw"], b: sorted(["b1", "b2", no_id])}
    for sid in (a, b):
        seqs = [e.seq for e in rt.store.events(sid)]
        assert seqs == list(range(1, len(seqs) + 1))
        assert len(seqs) == events_before[sid] + 3 - (sid == a)  # a: a1, tw (dup was there)


def test_a_lone_prompt_is_admitted_alone(served: Any) -> None:
    url, rt, state = served
    a = rt.create_session(session_id="ses_lane_alone").id
    spy = Spy(rt, state.lane, hold_for=0)
    rt.admit_together = spy
    with httpx.Client(base_url=url, headers=AUTH) as c:
        for n in range(3):
            r = c.post(f"/sessions/{a}/prompt", json={"text": f"n{n}", "resume": False})
            assert r.status_code == 202 and r.json()["created"]
    assert spy.sizes == [1, 1, 1]
    assert len(rt.store.pending(a)) == 3
