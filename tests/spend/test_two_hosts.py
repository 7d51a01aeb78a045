"""Issue 41's acceptance across processes: two hosts (`wakeful run` processes with their own
`WAKEFUL_HOST_ID`) drive sessions under one shared budget (`[budgets.agents.build]`) and one
shared rate limit, against a loopback server speaking Chat Completions through the official
SDK, which counts the requests it answers and when each arrived. The host whose request
would cross the budget is SIGKILLed while that request is in flight (held at the server,
never answered); started again, it sends the step again, and the budget is crossed once:
every answered request is one `usage.recorded` in the log, none is lost and none counted
twice, and the next request is not sent (the session pauses with reason `budget`)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.allow import allow_writes
from tests.providers.fake_servers import FakeServer, Recorded, Reply, o_chunk, openai_events
from wakeful.events import UsageRecorded
from wakeful.store import open_store

pytestmark = pytest.mark.slow
PER_REQUEST = 1_010  # the tokens the server reports for every request
LIMIT = 8_000  # B's 3 requests and A's 4 stay under it; A's 5th crosses it
B_CALLS = 2  # B: two tool calls, then its answer (3 requests)
HOLD_AT = 4  # A's request with 4 tool results (its 5th) is held at the kill


class Server:
    """Answers `job-a` with tool calls forever and `job-b` with `B_CALLS` calls then text;
    counts the answered requests per job, notes when every request arrived, and holds A's
    crossing request while `hold` is set (a request held across a kill is never answered)."""

    def __init__(self, server: FakeServer) -> None:
        self.answered: Counter[str] = Counter()
        self.arrived: list[float] = []
        self.hold = True
        self.held = asyncio.Event()
        self.released = asyncio.Event()
        server.respond = self.respond

    async def respond(self, request: Recorded) -> Reply | None:
        self.arrived.append(time.monotonic())
        body = request.json()
        job = "a" if b"job-a" in request.body else "b"
        done = sum(m.get("role") == "tool" for m in body["messages"])
        if job == "a" and done == HOLD_AT and self.hold:
            self.held.set()
            await self.released.wait()
            return None  # its process was killed: hang up, never answered
        await asyncio.sleep(0.02)
        self.answered[job] += 1
        if job == "b" and done >= B_CALLS:
            delta: dict[str, object] = {"role": "assistant", "content": "done"}
            return _reply(delta, "stop")
        call = {
            "index": 0,
            "id": f"call_{job}{done}",
            "type": "function",
            "function": {"name": "goal_set", "arguments": json.dumps({"goal": f"{job}{done}"})},
        }
        return _reply({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")


def _reply(delta: dict[str, object], finish: str) -> Reply:
    usage = {"prompt_tokens": 1_000, "completion_tokens": 10, "total_tokens": PER_REQUEST}
    return Reply(
        events=openai_events(
            o_chunk(delta), o_chunk({}, finish_reason=finish), o_chunk(usage=usage)
        )
    )


async def _until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(120):
        while not await asyncio.to_thread(check):  # noqa: ASYNC110 (a store, polled)
            await asyncio.sleep(0.05)


def _usage(db: str) -> dict[str, list[int]]:
    """Each job's session -> the tokens of every `usage.recorded` in its log."""
    store = open_store(db)
    try:
        out: dict[str, list[int]] = {}
        for row in store.list_sessions(limit=10).sessions:
            events = store.events(row.id)
            job = "a" if any("job-a" in str(e.event) for e in events) else "b"
            out[job] = [
                e.event.input_tokens + e.event.output_tokens
                for e in events
                if isinstance(e.event, UsageRecorded)
            ]
        return out
    finally:
        store.close()


def _session_of(db: str, job: str) -> str:
    store = open_store(db)
    try:
        for row in store.list_sessions(limit=10).sessions:
            if any(f"job-{job}" in str(e.event) for e in store.events(row.id)):
                return row.id
        raise AssertionError(f"no session for job-{job}")
    finally:
        store.close()


async def test_two_hosts_share_a_budget_and_a_rate_limit_through_a_kill(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").mkdir()
    db = str(tmp_path / "s.db")
    allow_writes(tmp_path / ".config")
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    base |= {"WAKEFUL_DB": db, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    async with FakeServer() as fake:
        server = Server(fake)
        (work / "wakeful.toml").write_text(
            f'[rate_limits."{fake.url}"]\nrpm = 600\nburst_s = 0.1\n\n'
            f"[budgets.agents.build]\ntokens = {LIMIT}\n\n"
            "[retry]\npoll_interval_ms = 20\n"
        )
        model = f"openai-compatible:gpt-fake@{fake.url}/v1"

        async def run(host: str, *args: str) -> asyncio.subprocess.Process:
            return await asyncio.create_subprocess_exec(
                sys.executable, "-m", "wakeful", "run", "--model", model, *args,
                cwd=work, env=base | {"WAKEFUL_HOST_ID": host},
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip

        host_a = await run("host-a", "job-a: work")
        host_b = await run("host-b", "job-b: work")
        assert await asyncio.wait_for(host_b.wait(), 120) == 0  # B answered, under the budget
        await asyncio.wait_for(server.held.wait(), 120)  # A's crossing request is in flight
        await _until(lambda: len(_usage(db).get("a", [])) == HOLD_AT)  # its earlier replies
        host_a.send_signal(signal.SIGKILL)
        await host_a.wait()
        server.hold = False
        server.released.set()
        again = await run("host-a", "--session", _session_of(db, "a"))  # the same host, again
        assert await asyncio.wait_for(again.wait(), 120) == 4  # paused: the budget is spent
    used = _usage(db)
    # Every answered request is one usage record, none lost, none twice; A's crossing step was
    # answered once (after the restart), and nothing was sent after it.
    assert server.answered == Counter({"a": HOLD_AT + 1, "b": B_CALLS + 1})
    assert len(used["a"]) == server.answered["a"] and len(used["b"]) == server.answered["b"]
    total = sum(used["a"]) + sum(used["b"])
    assert total == PER_REQUEST * (HOLD_AT + 1 + B_CALLS + 1) and total - PER_REQUEST < LIMIT
    store = open_store(db)
    try:
        spent = store.spend.scopes(_session_of(db, "a"), lambda _u: [("agent", "build", None)])
        assert spent[0][1] == total  # the session rows agree with the log
        ended = store.events(_session_of(db, "a"), types=("turn.ended",))
        assert ended and getattr(ended[-1].event, "error_kind", None) == "budget"
    finally:
        store.close()
    # The shared rate limit held across the hosts: ten a second with one saved up, so no
    # 300 ms window holds more than 4 takes (3 refilled and the one saved). The server sees
    # arrivals, which lag their takes by the sender's scheduling: on a loaded machine (CI, 3
    # test processes) a window once held 5, most likely one request taken earlier arriving late
    # among the next ones. One late arrival is allowed; a limit kept per host, not shared,
    # would let both hosts' saved and refilled takes into the same windows (up to 8).
    arrived = sorted(server.arrived)
    assert len(arrived) == HOLD_AT + 2 + B_CALLS + 1  # the held request arrived too
    assert all(sum(a <= t < a + 0.3 for t in arrived) <= 5 for a in arrived), arrived
