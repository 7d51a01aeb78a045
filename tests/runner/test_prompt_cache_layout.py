"""A cache-aware request layout: what changes during a session (the work state) goes after the
cached prefix, Anthropic requests carry breakpoints on the stable prefix, OpenAI requests a
stable `prompt_cache_key`; a 50-step session with todo updates keeps >= 95% of its requests'
bytes identical to the previous request's prefix (`bench/bench_prompt_cache.py` prints it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench._model_server import cache_prefix, common_prefix
from bench.bench_prompt_cache import breakpoints, old_layout, run, shares

STEPS = 50


@pytest.mark.parametrize("family", ["anthropic", "openai"])
async def test_a_long_session_with_todo_updates_keeps_its_prefix(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_KEY", "test-key")
    bodies, hit_ratio = await run(family, STEPS, tmp_path)
    assert len(bodies) == STEPS
    total, _median, _least, every_from, kept = shares(bodies)
    assert total >= 0.95
    assert every_from is not None and every_from <= STEPS // 2
    assert kept >= 0.95  # of every request, what the next one keeps as its prefix (the cache's)
    # The same requests with the work state in the system prompt (the layout before) fail it.
    old_total, *_rest, old_kept = shares([old_layout(b) for b in bodies])
    assert old_total < 0.85 and old_kept < 0.5
    assert hit_ratio >= 0.9  # the server reports the shared prefix as cache reads
    # The system prompt never changes, although the todos changed every 4 steps.
    system = [b["system"] if family == "anthropic" else b["messages"][0] for b in bodies]
    assert all(s == system[0] for s in system)
    # The work-state note is the last message, after the newest settled one.
    last = bodies[-1]["messages"][-1]
    text = last["content"][0]["text"] if family == "anthropic" else last["content"]
    assert "# Work state" in text and "item 0" in text
    if family == "anthropic":
        n = len(bodies[-1]["messages"])
        assert breakpoints(bodies[-1]) == [
            f"tools[{len(bodies[-1]['tools']) - 1}]",
            "system[0]",
            f"messages[{n - 2}] of {n}",
        ]
        assert all("cache_control" not in b for b in bodies)  # no automatic top-level marker
    else:
        keys = {b["prompt_cache_key"] for b in bodies}
        assert len(keys) == 1 and next(iter(keys)).startswith("ses_")


def test_the_prefix_measure_ignores_breakpoint_markers() -> None:
    a = {
        "tools": [],
        "system": [],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
    }
    b = {
        "tools": [],
        "system": [],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": "x"},
        ],
    }
    assert common_prefix(cache_prefix(a), cache_prefix(b)) == len(cache_prefix(a))
