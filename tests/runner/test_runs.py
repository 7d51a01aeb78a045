"""Run records folded from the log."""

from __future__ import annotations

import json
from pathlib import Path

from wakeful.config import Config, RetryConfig
from wakeful.execution import Runtime
from wakeful.runner._runs import run_records


async def test_run_records_carry_usage_steps_and_retries(tmp_path: Path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [
        {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}],
         "usage": {"input_tokens": 10, "output_tokens": 2}},
        {"text": "done", "usage": {"input_tokens": 20, "output_tokens": 3},
         "error": {"kind": "overloaded", "times": 1}},
    ]}]}))  # fmt: skip
    config = Config(retry=RetryConfig(initial_delay_ms=1, max_delay_ms=5, poll_interval_ms=1))
    rt = Runtime(
        str(tmp_path / "db.sqlite"), model=f"scripted:{script}", workspace=tmp_path, config=config
    )
    await rt.run("go")
    sid = rt.store.list_sessions().sessions[0].id
    [run] = run_records(rt.store, sid)
    assert run.status == "completed" and run.outcome == "completed"
    assert (run.tokens_in, run.tokens_out, run.steps) == (30, 5, 2)
    assert [r["error_kind"] for r in run.retries] == ["overloaded"]
    assert run.ended_ms is not None and run.ended_ms >= run.started_ms
    await rt.aclose()
