"""Turns against a local server speaking Chat Completions the way llama.cpp's Python server does:
an error body that blames the request ends the turn at once (no retries), and an empty 200
stream for a prompt over the server's window is recovered by compaction like any overflow."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.providers.fake_servers import (
    LLAMA_CPP_VALIDATION_500,
    FakeServer,
    Reply,
    o_chunk,
    openai_error,
    openai_events,
)
from wakeful.config import CompactionConfig, Config, RetryConfig
from wakeful.events import CompactionEnded
from wakeful.execution import Runtime


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer() as s:
        yield s


def reply(text: str) -> Reply:
    chunks = [o_chunk({"role": "assistant", "content": text}), o_chunk({}, finish_reason="stop")]
    return Reply(events=openai_events(*chunks))


def runtime(tmp_path: Path, server: FakeServer) -> Runtime:
    config = Config(
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=20, poll_interval_ms=5),
        compaction=CompactionConfig(tail_turns=0),
    )
    model = f"openai-compatible:smol@{server.url}/v1"
    return Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config)


async def test_a_500_that_blames_the_request_blocks_the_turn_without_retrying(
    tmp_path: Path, server: FakeServer
) -> None:
    server.enqueue(Reply(status=500, json_body=LLAMA_CPP_VALIDATION_500))
    rt = runtime(tmp_path, server)
    [turn] = await rt.run("hi")
    assert turn.outcome == "blocked" and turn.error_kind == "invalid_request"
    assert len(server.requests) == 1
    sid = rt.store.list_sessions().sessions[0].id
    assert rt.store.events(sid, types=["retry.scheduled"]) == []
    await rt.aclose()


async def test_an_empty_stream_over_the_window_is_recovered_by_compaction(
    tmp_path: Path, server: FakeServer
) -> None:
    overflow = openai_error(
        "This model's maximum context length is 512 tokens. However, you requested 900 tokens",
        "invalid_request_error",
        "context_length_exceeded",
    )
    rt = runtime(tmp_path, server)
    server.enqueue(reply("first answer"), reply("second answer"))
    [first] = await rt.run("one")
    sid = rt.store.list_sessions().sessions[0].id
    [second] = await rt.run("two", session_id=sid)
    server.enqueue(
        Reply(stream=True),  # the step: an empty 200 stream
        Reply(status=400, json_body=overflow),  # the probe: the server names the overflow
        reply("They asked one and two."),  # the summary request
        reply("third answer"),  # the same step, rebuilt on the compacted history
    )
    [third] = await rt.run("three", session_id=sid)
    assert (first.outcome, second.outcome, third.outcome) == ("completed",) * 3
    assert third.final_text == "third answer"
    [ended] = [e.event for e in rt.store.events(sid, types=["compaction.ended"])]
    assert isinstance(ended, CompactionEnded) and ended.reason == "overflow"
    receipts = rt.store.receipts(sid)
    assert [(r.step, r.attempt, r.purpose) for r in receipts][-3:] == [
        (1, 1, "step"),
        (1, 1, "compaction"),
        (1, 2, "step"),
    ]
    assert len(server.requests) == 6 and server.requests[3].json()["max_tokens"] == 1
    await rt.aclose()
