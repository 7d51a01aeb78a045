"""True usage and cost: cache read and write tokens are recorded per step and priced at their
own rates, from the event through the session row, run records and the API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.providers.fake_servers import (
    A_MESSAGE_STOP,
    FakeServer,
    Reply,
    a_block_start,
    a_block_stop,
    a_delta,
    a_message_delta,
    a_message_start,
    anthropic_events,
)
from wakeful.config import Config, FamilyConfig, ProvidersConfig, RetryConfig
from wakeful.events import UsageRecorded
from wakeful.execution import Runtime
from wakeful.providers import Usage
from wakeful.runner import cost_usd
from wakeful.runner._runs import run_records


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer() as s:
        yield s


def test_each_kind_of_input_token_is_priced_at_its_own_rate() -> None:
    # claude-sonnet-4: $3 in, $15 out; cache reads at 0.1x ($0.30), 5-minute writes at 1.25x
    # ($3.75). 1M input tokens of which 800k read from and 150k written to the cache.
    usage = Usage(1_000_000, 20_000, cache_read_tokens=800_000, cache_write_tokens=150_000)
    cost = cost_usd("anthropic:claude-sonnet-4-5", usage)
    assert round(cost, 2) == 1.25  # 0.15 + 0.24 + 0.5625 + 0.30 = 1.2525
    assert cost == pytest.approx(1.2525)
    # Without caching the same tokens cost $3.30: the old price of every input token at the
    # full rate.
    assert cost_usd("claude-sonnet-4-5", Usage(1_000_000, 20_000)) == pytest.approx(3.30)
    # OpenAI: cached input at the listed cached rate (gpt-4.1: $0.50 of $2.00), no write fee.
    cached = Usage(1_000_000, 0, cache_read_tokens=600_000)
    assert cost_usd("openai:gpt-4.1", cached) == pytest.approx(0.8 + 0.3)
    assert cost_usd("scripted:x.json", usage) is None  # no known price: unknown, not zero


def _reply(text: str, *, uncached: int, read: int, write: int) -> Reply:
    return Reply(
        events=anthropic_events(
            a_message_start(input_tokens=uncached, cache_read=read, cache_write=write),
            a_block_start(0, {"type": "text", "text": ""}),
            a_delta(0, {"type": "text_delta", "text": text}),
            a_block_stop(0),
            a_message_delta("end_turn", 20_000),
            A_MESSAGE_STOP,
        )
    )


async def test_cache_tokens_reach_the_event_the_session_row_and_the_run_record(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    config = Config(
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=20, poll_interval_ms=5),
        providers=ProvidersConfig(anthropic=FamilyConfig(base_url=server.url)),
    )
    rt = Runtime(
        str(tmp_path / "s.db"),
        model="anthropic:claude-sonnet-4-5",
        workspace=tmp_path,
        config=config,
    )
    server.enqueue(_reply("hello", uncached=50_000, read=800_000, write=150_000))
    [turn] = await rt.run("hi")
    assert turn.outcome == "completed"
    assert turn.usage == Usage(1_000_000, 20_000, 800_000, 150_000)
    sid = rt.store.list_sessions().sessions[0].id
    [stored] = rt.store.events(sid, types=["usage.recorded"])
    event = stored.event
    assert isinstance(event, UsageRecorded)
    assert (event.cache_read_tokens, event.cache_write_tokens) == (800_000, 150_000)
    assert round(event.cost_usd, 2) == 1.25
    [receipt] = rt.store.events(sid, types=["receipt.recorded"])
    assert event.receipt_id == receipt.event.receipt_id  # type: ignore[union-attr]
    row = rt.store.get_session(sid)
    assert (row.cache_read_tokens, row.cache_write_tokens) == (800_000, 150_000)
    assert round(row.cost_usd, 2) == 1.25
    assert row.to_json()["usage"]["cache_read_tokens"] == 800_000  # type: ignore[index]
    [run] = run_records(rt.store, sid)
    assert (run.tokens_cache_read, run.tokens_cache_write) == (800_000, 150_000)
    assert run.to_json()["cache_hit_ratio"] == 0.8
    await rt.aclose()
