"""Shared rate limits (`docs/spend.md`): one bucket in the store for every process, taken in
one statement; waits are durable `retry.scheduled` (kind `rate_limited`); a 429's
`retry-after` slows every driver of the bucket. Requests are counted at a loopback server
speaking the Chat Completions protocol through the official SDK."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.execution.helpers import wait_for
from tests.providers.fake_servers import FakeServer, Recorded, Reply, o_chunk, openai_events
from wakeful.config import Config, RateLimitConfig, RetryConfig
from wakeful.events import RetryScheduled
from wakeful.execution import Runtime
from wakeful.execution._rates import bucket_of
from wakeful.store import Rate, SqlStore, open_store

USAGE = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}


def test_a_take_is_one_request_and_the_bucket_refills(store: SqlStore) -> None:
    rate, now = Rate(rpm=60), 1_000_000  # one a second, one saved up
    assert store.rates.take("k", rate, now) == 0
    assert store.rates.take("k", rate, now) == 1000  # empty: one second to the next
    assert store.rates.take("k", rate, now + 400) == 600
    assert store.rates.take("k", rate, now + 1000) == 0
    assert store.rates.take("other", rate, now + 1000) == 0  # buckets are separate


def test_tokens_are_charged_after_the_reply_and_their_debt_waited_out(store: SqlStore) -> None:
    rate, now = Rate(tpm=6000), 0  # 100 tokens a second, 100 saved up
    assert store.rates.take("k", rate, now) == 0
    store.rates.charge("k", 300)  # 200 in debt: two seconds
    assert store.rates.take("k", rate, now) == 2000
    assert store.rates.take("k", rate, now + 2000) == 0


def test_a_retry_after_slows_the_bucket_and_a_later_one_stands(store: SqlStore) -> None:
    rate = Rate()  # no rate: only a provider's retry-after is shared
    store.rates.slow("k", 5_000, 0)
    store.rates.slow("k", 3_000, 0)  # earlier than the one written: the later stands
    assert store.rates.take("k", rate, 1_000) == 4_000
    assert store.rates.take("k", rate, 5_000) == 0


def test_concurrent_takers_never_take_more_than_the_bucket_holds(db_url: str) -> None:
    stores = [open_store(db_url) for _ in range(4)]
    rate, now = Rate(rpm=600, burst_s=1.0), 10_000  # ten saved up, none refilled at `now`
    try:
        with ThreadPoolExecutor(4) as pool:
            waits = list(
                pool.map(lambda i: stores[i % 4].rates.take("shared", rate, now), range(40))
            )
    finally:
        for s in stores:
            s.close()
    assert waits.count(0) == 10  # exactly what the bucket held, whoever took it


def test_a_bucket_is_found_by_base_url_or_key_variable() -> None:
    config = Config(
        rate_limits={
            "http://gpu:8000": RateLimitConfig(rpm=10),
            "http://gpu:8000/v1": RateLimitConfig(rpm=20),
            "OPENAI_API_KEY": RateLimitConfig(tpm=1000),
        }
    )
    found = bucket_of("openai-compatible:llama@http://gpu:8000/v1", config)
    assert found is not None and found[0] == "http://gpu:8000/v1"  # the longest prefix
    found = bucket_of("openai:gpt-4o", config)
    assert found is not None and found[0] == "OPENAI_API_KEY"
    assert bucket_of("anthropic:claude-x", config) is None
    assert bucket_of("openai:gpt-4o", Config()) is None


class Counting:
    """Answers each request with a `goal_set` call until the conversation holds `calls` tool
    results, then with text; records when each request arrived. `limited`: the first
    request is answered with a 429 carrying `retry-after`."""

    def __init__(self, server: FakeServer, calls: int, limited_s: int = 0) -> None:
        self.calls = calls
        self.limited_s = limited_s
        self.arrived: list[float] = []
        server.respond = self.respond

    async def respond(self, request: Recorded) -> Reply | None:
        self.arrived.append(time.monotonic())
        if self.limited_s and len(self.arrived) == 1:
            body = {"error": {"message": "slow down", "type": "rate_limit", "code": None}}
            return Reply(429, {"retry-after": str(self.limited_s)}, json_body=body)
        done = sum(m.get("role") == "tool" for m in request.json()["messages"])
        if done >= self.calls:
            delta: dict[str, object] = {"role": "assistant", "content": "done"}
            finish = "stop"
        else:
            call = {
                "index": 0,
                "id": f"call_{done}",
                "type": "function",
                "function": {"name": "goal_set", "arguments": json.dumps({"goal": f"g{done}"})},
            }
            delta, finish = (
                {"role": "assistant", "content": None, "tool_calls": [call]},
                "tool_calls",
            )
        return Reply(
            events=openai_events(
                o_chunk(delta), o_chunk({}, finish_reason=finish), o_chunk(usage=USAGE)
            )
        )


def _runtime(db: str, work: Path, url: str, limit: RateLimitConfig) -> Runtime:
    config = Config(
        rate_limits={url: limit},
        retry=RetryConfig(poll_interval_ms=20, initial_delay_ms=50, max_delay_ms=100),
        loop_guard={"enabled": False},
    )
    return Runtime(db, model=f"openai-compatible:gpt-fake@{url}/v1", workspace=work, config=config)


async def test_two_runtimes_share_one_bucket(tmp_path: Path) -> None:
    async with FakeServer() as server:
        counting = Counting(server, calls=4)
        db = str(tmp_path / "s.db")
        # Ten a second, none saved up past one: two drivers of five requests each.
        limit = RateLimitConfig(rpm=600, burst_s=0.1)
        rts = [_runtime(db, tmp_path, server.url, limit) for _ in range(2)]
        try:
            turns = await asyncio.gather(*(rt.run(f"work {i}") for i, rt in enumerate(rts)))
            assert [t.outcome for [t] in turns] == ["completed", "completed"]
            waits = [
                e.event
                for rt in rts
                for row in rt.store.list_sessions(limit=10).sessions
                for e in rt.store.events(row.id, types=("retry.scheduled",))
            ]
        finally:
            for rt in rts:
                await rt.aclose()
    arrived = sorted(counting.arrived)
    assert len(arrived) == 10
    # At one request per 100 ms from a bucket holding one, ten requests span 900 ms or more,
    # and no 300 ms window holds more than 4 of them (3 refilled + the one held).
    assert arrived[-1] - arrived[0] >= 0.85
    assert all(sum(a <= t < a + 0.3 for t in arrived) <= 4 for a in arrived)
    assert waits and all(isinstance(w, RetryScheduled) for w in waits)
    assert {w.error_kind for w in waits if isinstance(w, RetryScheduled)} == {"rate_limited"}


async def test_a_429_retry_after_slows_every_driver(tmp_path: Path) -> None:
    async with FakeServer() as server:
        counting = Counting(server, calls=0, limited_s=1)
        db = str(tmp_path / "s.db")
        url = server.url
        rts = [_runtime(db, tmp_path, url, RateLimitConfig()) for _ in range(2)]
        try:
            first = asyncio.ensure_future(rts[0].run("one"))
            # The first request met the 429, and its retry-after is shared.
            await asyncio.to_thread(wait_for, lambda: rts[0].store.rates.state(url) is not None)
            [second] = await rts[1].run("two")
            [one] = await first
            assert (one.outcome, second.outcome) == ("completed", "completed")
        finally:
            for rt in rts:
                await rt.aclose()
    # The second driver never met the 429, yet waited for its retry-after (a second).
    assert len(counting.arrived) == 3
    assert counting.arrived[1] - counting.arrived[0] >= 0.9
    assert counting.arrived[2] - counting.arrived[0] >= 0.9
