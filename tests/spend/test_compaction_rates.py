"""A compaction's summary request is paced by the shared rate bucket as a step's request is
(`docs/spend.md`, "Shared rate limits"): its wait is a durable `retry.scheduled`
(`rate_limited`) in the log, cleared in the compaction's outcome, and a step's request takes
from the bucket once it is built, after the compaction it needed. Requests are timed at a
loopback server speaking Chat Completions through the official SDK."""

from __future__ import annotations

import time
from pathlib import Path

from tests.providers.fake_servers import FakeServer, Recorded, Reply, o_chunk, openai_events
from wakeful.config import CompactionConfig, Config, ProvidersConfig, RateLimitConfig, RetryConfig
from wakeful.events import RetryCleared, RetryScheduled
from wakeful.execution import Runtime

INTERVAL_S = 0.8  # the bucket: one request each 0.8 s, none saved up past one
SPACED_S = 0.4  # arrivals at least this far apart (the interval, less a first send's set-up)


class Timed:
    """Answers every request with text, reporting `prompt_tokens` of input; notes when each
    request arrived and whether it asked for a summary."""

    def __init__(self, server: FakeServer, prompt_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.arrived: list[tuple[float, bool]] = []
        server.respond = self.respond

    async def respond(self, request: Recorded) -> Reply | None:
        summary = "Summarize the conversation" in str(request.json()["messages"][-1]["content"])
        self.arrived.append((time.monotonic(), summary))
        usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": 5, "total_tokens": 0}
        delta = {"role": "assistant", "content": "a summary" if summary else "done"}
        chunks = (o_chunk(delta), o_chunk({}, finish_reason="stop"), o_chunk(usage=usage))
        return Reply(events=openai_events(*chunks))


def _runtime(tmp_path: Path, url: str) -> Runtime:
    spec = f"openai-compatible:gpt-fake@{url}/v1"
    config = Config(
        rate_limits={url: RateLimitConfig(rpm=round(60 / INTERVAL_S), burst_s=0.1)},
        retry=RetryConfig(poll_interval_ms=20, initial_delay_ms=50, max_delay_ms=100),
        providers=ProvidersConfig(context_windows={spec: 10_000}, max_output_tokens=1_000),
        compaction=CompactionConfig(tail_turns=0, restore_files=0),
        loop_guard={"enabled": False},
    )
    return Runtime(str(tmp_path / "s.db"), model=spec, workspace=tmp_path, config=config)


def _spaced(arrived: list[tuple[float, bool]]) -> list[float]:
    times = [t for t, _summary in arrived]
    return [round(b - a, 3) for a, b in zip(times, times[1:], strict=False)]


def _rate_waits(rt: Runtime, sid: str) -> list[tuple[str, object]]:
    """The log's rate waits and what came after each: (`retry.scheduled` or the type of the
    next event that was not a rate wait, the event)."""
    out: list[tuple[str, object]] = []
    for stored in rt.store.events(sid):
        event = stored.event
        if isinstance(event, RetryScheduled) and event.error_kind == "rate_limited":
            out.append(("wait", event))
        elif out and out[-1][0] == "wait":
            out.append((event.type, event))
    return out


async def test_a_proactive_summary_request_waits_for_the_bucket_in_its_turn(
    tmp_path: Path,
) -> None:
    async with FakeServer() as server:
        timed = Timed(server, prompt_tokens=6_000)  # over the trigger: the next step compacts
        rt = _runtime(tmp_path, server.url)
        try:
            [first] = await rt.run("one")
            sid = rt.store.list_sessions().sessions[0].id
            [second] = await rt.run("two", session_id=sid)
            assert (first.outcome, second.outcome) == ("completed", "completed")
            [receipts] = [[(r.turn_id, r.purpose) for r in rt.store.receipts(sid)]]
            waits = _rate_waits(rt, sid)
            events = rt.store.events(sid)
            retry = rt.store.retry_state(sid)
        finally:
            await rt.aclose()
    # Turn one's step, then in turn two its summary request and its step: three requests, each
    # at least the bucket's interval after the one before (the step took only once its request
    # was built, after the summary).
    assert [summary for _t, summary in timed.arrived] == [False, True, False]
    assert all(gap >= SPACED_S for gap in _spaced(timed.arrived)), _spaced(timed.arrived)
    assert [purpose for turn, purpose in receipts if turn == second.turn_id] == [
        "compaction",
        "step",
    ]
    # The summary request's wait is in the log, in turn two's first step, before its receipt;
    # the compaction's outcome cleared it in the same transaction as `compaction.ended`.
    summary_wait = next(e for kind, e in waits if kind == "wait")
    assert isinstance(summary_wait, RetryScheduled)
    assert (summary_wait.turn_id, summary_wait.step) == (second.turn_id, 1)
    after = [kind for kind, _e in waits]
    assert after[after.index("wait") + 1] == "receipt.recorded"
    ended = next(i for i, s in enumerate(events) if s.event.type == "compaction.ended")
    assert isinstance(events[ended + 2].event, RetryCleared)
    assert retry is None


async def test_a_manual_summary_request_waits_for_the_bucket_and_clears_its_wait(
    tmp_path: Path,
) -> None:
    async with FakeServer() as server:
        timed = Timed(server, prompt_tokens=50)
        rt = _runtime(tmp_path, server.url)
        try:
            [first] = await rt.run("one")
            sid = rt.store.list_sessions().sessions[0].id
            rt.compact(sid, tail_turns=0, resume=False)
            await rt.drive(sid)
            [ended] = rt.store.events(sid, types=("compaction.ended",))
            waits = [e for kind, e in _rate_waits(rt, sid) if kind == "wait"]
            types = [s.event.type for s in rt.store.events(sid, after=ended.seq - 3)]
            retry = rt.store.retry_state(sid)
        finally:
            await rt.aclose()
    assert [summary for _t, summary in timed.arrived] == [False, True]
    assert all(gap >= SPACED_S for gap in _spaced(timed.arrived)), _spaced(timed.arrived)
    # Outside a turn (no turn id): the wait is durable all the same, and the compaction's
    # outcome clears it (no step's reply follows to do it).
    [wait] = waits
    assert isinstance(wait, RetryScheduled) and wait.turn_id is None
    assert types[-4:] == ["message.added", "compaction.ended", "usage.recorded", "retry.cleared"]
    assert retry is None
