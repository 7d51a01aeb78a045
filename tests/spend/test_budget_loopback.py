"""Issue 41's acceptance for one session: against a loopback server speaking Chat Completions
through the official SDK, which reports usage, a session with a 10,000-token budget pauses
before the request that would start past it; `approve --budget` (`raise_budget`) continues it
to the raised limit; the requests the server answered match the log's usage records."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.providers.fake_servers import FakeServer, Recorded, Reply, o_chunk, openai_events
from wakeful.config import BudgetConfig, Config
from wakeful.events import UsageRecorded
from wakeful.execution import Runtime, raise_budget

PER_REQUEST = 1_010


class Calls:
    """Answers every request with a `goal_set` call, reporting `PER_REQUEST` tokens."""

    def __init__(self, server: FakeServer) -> None:
        self.answered = 0
        server.respond = self.respond

    async def respond(self, request: Recorded) -> Reply | None:
        self.answered += 1
        n = self.answered
        call = {
            "index": 0,
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "goal_set", "arguments": json.dumps({"goal": f"g{n}"})},
        }
        usage = {"prompt_tokens": 1_000, "completion_tokens": 10, "total_tokens": PER_REQUEST}
        return Reply(
            events=openai_events(
                o_chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
                o_chunk({}, finish_reason="tool_calls"),
                o_chunk(usage=usage),
            )
        )


def _records(rt: Runtime, sid: str) -> list[int]:
    return [
        e.event.input_tokens + e.event.output_tokens
        for e in rt.store.events(sid)
        if isinstance(e.event, UsageRecorded)
    ]


async def test_a_10000_token_budget_pauses_and_a_raise_continues(tmp_path: Path) -> None:
    async with FakeServer() as server:
        calls = Calls(server)
        config = Config(budgets=BudgetConfig(session_tokens=10_000), loop_guard={"enabled": False})
        rt = Runtime(
            str(tmp_path / "s.db"),
            model=f"openai-compatible:gpt-fake@{server.url}/v1",
            workspace=tmp_path,
            config=config,
        )
        try:
            [turn] = await rt.run("work")
            assert (turn.outcome, turn.error_kind) == ("paused", "budget")
            row = rt.store.latest_session()
            assert row is not None
            used = _records(rt, row.id)
            # Ten requests reach 10,100 tokens: the eleventh would start past the limit.
            assert calls.answered == len(used) == 10 and sum(used) == 10 * PER_REQUEST
            assert "of its 10,000 tokens" in (turn.error or "")
            _raised, sent = raise_budget(rt, row.id, "+5000tokens")
            assert sent is not None  # paused for its budget: continued
            [turn] = await asyncio.wait_for(rt.drive_input(row.id, sent.input_id), 60)
            assert (turn.outcome, turn.error_kind) == ("paused", "budget")
            assert "of its 15,000 tokens" in (turn.error or "")
            used = _records(rt, row.id)
            assert calls.answered == len(used) == 15 and sum(used) == 15 * PER_REQUEST
        finally:
            await rt.aclose()
