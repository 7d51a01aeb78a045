"""How much of each request a provider can read from its prompt cache, over a long session.

Runs a 50-step tool-using turn (a `todo_write` every 4th step, `read_file` on the others) on the
Anthropic and OpenAI adapters against a local server speaking their protocols
(`bench/_model_server.py`), and prints, per adapter, the share of each request that is
byte-identical to the previous request's prefix, in the provider's cache order (tools, system,
messages; Anthropic's `cache_control` markers left out): the total over all requests after the
first, the median and least share, and the request from which every share is at least 95% (a
request's new tail, one tool call and its result, is a large share of a short request). Beside
it, the same requests laid out as before this change, with the work state appended to the
system prompt (the baseline, derived from the same run), and where the breakpoints sat.

    python bench/bench_prompt_cache.py [--steps 50]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

# The repository root, for `bench._model_server`; wakeful comes from the environment (run with
# PYTHONPATH=<another checkout>/src to measure that checkout).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._model_server import ModelServer, cache_prefix, common_prefix  # noqa: E402
from wakeful.config import Config  # noqa: E402
from wakeful.execution import Runtime  # noqa: E402

NOTE = "[system message]\n"


def old_layout(body: dict[str, Any]) -> dict[str, Any]:
    """`body` laid out as before: the trailing work-state note appended to the system prompt."""
    out = copy.deepcopy(body)
    messages = out["messages"]
    last = messages[-1] if messages else None
    if last is None:
        return out
    if isinstance(out.get("system"), list):  # Anthropic: a user message "[system message]\n..."
        text = last["content"][0].get("text", "") if isinstance(last["content"], list) else ""
        if last["role"] == "user" and text.startswith(NOTE):  # no other notes in this run
            messages.pop()
            out["system"][0]["text"] += "\n\n" + text[len(NOTE) :]
    elif last["role"] == "system" and messages[0]["role"] == "system" and len(messages) > 1:
        messages.pop()
        messages[0]["content"] += "\n\n" + last["content"]
    return out


def shares(bodies: list[dict[str, Any]]) -> tuple[float, float, float, int | None, float]:
    """Over requests 2..: (total shared / total size, the median share, the smallest share,
    the first request from which every share is at least 95%, and the smallest share of the
    *previous* request kept as the new one's prefix: what the provider's cache can serve)."""
    texts = [cache_prefix(b) for b in bodies]
    same = size = 0
    each: list[float] = []
    kept: list[float] = []
    for prev, now in zip(texts, texts[1:], strict=False):
        shared = common_prefix(prev, now)
        same += shared
        size += len(now)
        each.append(shared / len(now))
        kept.append(shared / len(prev))
    from_step = None
    for i in range(len(each) - 1, -1, -1):
        if each[i] < 0.95:
            break
        from_step = i + 2
    return same / size, statistics.median(each), min(each), from_step, min(kept)


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where a body's cache breakpoints sit."""
    out = []
    if any("cache_control" in t for t in body.get("tools", [])):
        out.append(f"tools[{len(body['tools']) - 1}]")
    if any("cache_control" in b for b in body.get("system", [])):
        out.append(f"system[{len(body['system']) - 1}]")
    for i, m in enumerate(body["messages"]):
        if isinstance(m["content"], list) and any("cache_control" in b for b in m["content"]):
            out.append(f"messages[{i}] of {len(body['messages'])}")
    return out


async def run(family: str, steps: int, folder: Path) -> tuple[list[dict[str, Any]], float]:
    async with ModelServer(steps=steps) as server:
        model = "anthropic:claude-sonnet-4-5" if family == "anthropic" else "openai:gpt-4.1"
        base = server.url if family == "anthropic" else f"{server.url}/v1"
        config = Config.model_validate(
            {
                "agents": {"build": {"max_steps": steps + 5}},
                "loop_guard": {"enabled": False},  # the same call step after step, on purpose
                "providers": {family: {"base_url": base, "api_key_env": "BENCH_KEY"}},
            }
        )
        work = folder / family
        (work / "notes").mkdir(parents=True)
        for i in range(5):
            (work / "notes" / f"file{i}.txt").write_text(f"notes {i}\n" + "some line\n" * 40)
        rt = Runtime(str(work / "s.db"), model=model, workspace=work, config=config)
        [turn] = await rt.run("go")
        assert turn.outcome == "completed" and turn.steps == steps, turn
        ratio = turn.usage.cache_read_tokens / turn.usage.input_tokens
        await rt.aclose()
        return server.bodies, ratio


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("BENCH_KEY", "bench-key")
    with tempfile.TemporaryDirectory() as tmp:
        for family in ("anthropic", "openai"):
            bodies, ratio = await run(family, args.steps, Path(tmp))
            now = shares(bodies)
            old = shares([old_layout(b) for b in bodies])
            print(f"{family}: {len(bodies)} requests, turn cache hit ratio {ratio:.1%}")
            for name, (total, median, least, start, kept) in (
                ("cache-aware", now),
                ("baseline", old),
            ):
                print(
                    f"  {name:11}: prefix shared with the previous request {total:.1%} "
                    f"overall, median {median:.1%}, least {least:.1%}; every request "
                    f">= 95% from request {start}; of each previous request at least "
                    f"{kept:.1%} kept as the next one's prefix"
                )
            if family == "anthropic":
                print(f"  breakpoints of the last request: {', '.join(breakpoints(bodies[-1]))}")
            else:
                print(f"  prompt_cache_key: {bodies[-1].get('prompt_cache_key')}")


if __name__ == "__main__":
    asyncio.run(main())
