"""Steps per second of the whole turn loop on the scripted provider (SQLite, one process).

Prints the loop's rate next to the scripted provider streaming the same replies on its own
(same requests, no store, no tools), so the difference is the runtime's own overhead per step.

    python bench/bench_runner.py [--steps 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from wakeful.config import Config
from wakeful.execution import Runtime
from wakeful.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from wakeful.providers import ModelRequest, make_provider
from wakeful.runner import BUILTIN_AGENTS


def write_script(folder: Path, steps: int) -> str:
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "bench"}}]}
    replies = [call] * (steps - 1) + [{"text": "done"}]
    path = folder / "script.json"
    path.write_text(
        json.dumps({"rules": [{"match": ".", "replies": replies}], "chunk_delay_ms": 0})
    )
    return f"scripted:{path}"


async def loop_rate(folder: Path, model: str, steps: int) -> float:
    config = Config.model_validate({"agents": {"build": {"max_steps": steps + 5}}})
    rt = Runtime(str(folder / "bench.db"), model=model, workspace=folder, config=config)
    start = time.perf_counter()
    [turn] = await rt.run("go")
    elapsed = time.perf_counter() - start
    assert turn.steps == steps and turn.outcome == "completed", turn
    await rt.aclose()
    return elapsed


async def provider_only(model: str, steps: int) -> float:
    provider = make_provider(model)
    history: list[Message] = [Message(role="user", blocks=(TextBlock(text="go"),))]
    agent = BUILTIN_AGENTS["build"]
    start = time.perf_counter()
    for k in range(steps):
        request = ModelRequest(
            model=provider.model, system=agent.system_prompt, messages=tuple(history)
        )
        finish = None
        async for event in provider.stream(request):
            finish = event
        assert finish is not None and finish.type == "finish"
        history.append(finish.message)
        if k < steps - 1:
            call = finish.message.blocks[-1]
            assert isinstance(call, ToolCallBlock)
            history.append(
                Message(role="user", blocks=(ToolResultBlock(call_id=call.id, output="ok"),))
            )
    elapsed = time.perf_counter() - start
    await provider.aclose()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = write_script(folder, args.steps)
        loop = asyncio.run(loop_rate(folder, model, args.steps))
        bare = asyncio.run(provider_only(model, args.steps))
    n = args.steps
    print(f"{'measure':<44}{'steps/s':>10}{'ms/step':>10}")
    print(f"{'whole loop (store, receipts, tools)':<44}{n / loop:>10.0f}{loop / n * 1000:>10.2f}")
    print(f"{'scripted provider alone (baseline)':<44}{n / bare:>10.0f}{bare / n * 1000:>10.2f}")
    print(f"{'runtime overhead per step':<44}{'':>10}{(loop - bare) / n * 1000:>10.2f}")
    print("target: at least 200 steps/s for the whole loop")


if __name__ == "__main__":
    main()
