"""Per-model limits of an eval: a model's lane never has more requests in flight than its
`concurrency` (and does use that many), and `rpm` spaces its requests 60/rpm seconds apart at
least; another model's lane is not held back by them."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.providers.fake_servers import FakeServer, Recorded, Reply
from tests.replay.wire import o_text
from wakeful.config import Config, FamilyConfig, ProvidersConfig
from wakeful.execution import Runtime
from wakeful.replay import load_suite, run_suite


class Counting:
    """Answers after a pause, noting how many requests were in flight and when each came."""

    def __init__(self, server: FakeServer, pause: float) -> None:
        self.pause = pause
        self.now = 0
        self.most = 0
        self.arrivals: list[float] = []
        server.respond = self.respond

    async def respond(self, request: Recorded) -> Reply:
        self.arrivals.append(time.monotonic())
        self.now += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(self.pause)
        self.now -= 1
        return o_text("ok")


async def test_concurrency_and_rate_per_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    async with FakeServer() as server:
        counting = Counting(server, pause=0.15)
        config = Config(providers=ProvidersConfig(openai=FamilyConfig(base_url=f"{server.url}/v1")))
        rt = Runtime(str(tmp_path / "s.db"), workspace=tmp_path, config=config, model="openai:a")
        cases = "".join(f'[[cases]]\nid = "c{n}"\nprompt = "p{n}"\n' for n in range(8))
        suite = tmp_path / "suite.toml"
        suite.write_text(f'models = [{{spec = "openai:a", concurrency = 2}}]\n{cases}')
        await run_suite(rt, load_suite(rt.store, suite))
        assert counting.most == 2  # never more than its limit, and the limit was used

        counting.arrivals.clear()
        counting.pause = 0.0
        suite.write_text(f'models = [{{spec = "openai:b", concurrency = 8, rpm = 600}}]\n{cases}')
        await run_suite(rt, load_suite(rt.store, suite))
        # 60/600 s apart, whatever the concurrency (on average: each request's way from the
        # lane to the server varies by a few milliseconds)
        span = counting.arrivals[-1] - counting.arrivals[0]
        assert len(counting.arrivals) == 8 and span / 7 >= 0.09
        await rt.aclose()
