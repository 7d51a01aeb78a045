"""Run records folded from the log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from wakeful.config import AgentConfig, BudgetConfig, Config, RetryConfig
from wakeful.execution import Runtime
from wakeful.runner._runs import run_records


async def test_run_records_carry_usage_steps_and_retries(tmp_path: Path):
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": ".",
                        "replies": [
                            {
                                "tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}],
                                "usage": {"input_tokens": 10, "output_tokens": 2},
                            },
                            {
                                "text": "done",
                                "usage": {"input_tokens": 20, "output_tokens": 3},
                                "error": {"kind": "overloaded", "times": 1},
                            },
                        ],
                    }
                ]
            }
        )
    )
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


async def test_a_retry_entry_carries_delay_status_code_error_and_budget(tmp_path: Path):
    """Issue 37 item 11: the spec's `SessionRunRetry` (delay, status code, provider code, the
    error's text, the budget's size). On main an entry held only attempt, kind and deadline."""
    error = {"kind": "overloaded", "times": 2, "status_code": 529, "code": "overloaded_error"}
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps({"rules": [{"match": ".", "replies": [{"text": "done", "error": error}]}]})
    )
    retry = RetryConfig(initial_delay_ms=2, max_delay_ms=8, poll_interval_ms=1, max_retries=3)
    rt = Runtime(
        str(tmp_path / "db.sqlite"),
        model=f"scripted:{script}",
        workspace=tmp_path,
        config=Config(retry=retry),
    )
    await rt.run("go")
    sid = rt.store.list_sessions().sessions[0].id
    [run] = run_records(rt.store, sid)
    assert [r["attempt"] for r in run.retries] == [2, 3]
    for entry in run.retries:
        assert entry["status_code"] == 529 and entry["code"] == "overloaded_error"
        assert entry["max_attempts"] == 4 and entry["error_kind"] == "overloaded"
        assert 1 <= entry["delay_ms"] <= 8 and "scripted overloaded" in entry["error"]
    assert run.to_json()["retries"] == run.retries
    await rt.aclose()


def test_provider_errors_carry_their_status_and_code():
    import httpx2

    from wakeful.providers._errors import HttpFailure, classify_connection, classify_http

    failure = HttpFailure(429, "rate_limit_error", None, "slow down", {"retry-after": "2"})
    err = classify_http(failure)
    assert (err.kind, err.status_code, err.code, err.retry_after_ms) == (
        "rate_limit",
        429,
        "rate_limit_error",
        2000,
    )
    reset = ConnectionResetError(104, "Connection reset by peer")
    try:
        raise httpx2.ReadError("read failed") from reset
    except httpx2.ReadError as cut:
        assert classify_connection(cut).code == "ECONNRESET"
    assert classify_connection(httpx2.ConnectError("refused")).code == "ConnectError"


async def test_a_run_records_agent_model_label_origin_estimate_and_user_wait(tmp_path: Path):
    """Issue 37 item 13: what a run ran as (agent, model), why (origin, a host's label), how
    long it is expected to take (the earlier runs' median) and how long it waited on a person
    for an approval. On main a record had none of them."""
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": "^ask$",
                        "replies": [
                            {"tool_calls": [{"name": "shell", "input": {"command": "true"}}]},
                            {"text": "ran"},
                        ],
                    },
                    {"match": ".", "replies": [{"text": "done"}]},
                ]
            }
        )
    )
    db = str(tmp_path / "db.sqlite")
    rt = Runtime(db, model=f"scripted:{script}", workspace=tmp_path)
    first = rt.send("hello", resume=False)
    sid = first.session_id
    await rt.drive_input(sid, first.input_id)
    sent = rt.send(
        session_id=sid,
        payload={"text": "ask", "metadata": {"label": "nightly", "display": "/review"}},
        resume=False,
    )
    await rt.drive_input(sid, sent.input_id)  # paused: nobody to ask
    [waiting] = rt.approvals(sid)
    await asyncio.sleep(0.05)
    decided = rt.approve(sid, waiting.call_id, resume=False)
    await rt.drive_input(sid, decided.input_id)
    runs = run_records(rt.store, sid)
    one, two = runs[0], runs[1]
    assert one.agent == "build" and one.options["agent"] == "build"
    assert one.options["model"] == f"scripted:{script}"
    assert one.origin["kind"] == "user" and one.label is None and one.estimate_ms is None
    assert one.user_wait_ms == 0
    assert two.label == "nightly" and two.origin["display"] == "/review"
    assert two.estimate_ms == one.ended_ms - one.started_ms  # type: ignore[operator]
    assert two.user_wait_ms >= 50 and two.to_json()["user_wait_ms"] == two.user_wait_ms
    await rt.aclose()


async def test_a_rewound_turn_is_reverted_until_unreverted_and_stays_so_once_final(tmp_path: Path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "ok"}]}]}))
    rt = Runtime(str(tmp_path / "db.sqlite"), model=f"scripted:{script}", workspace=tmp_path)
    await rt.run("one")
    sid = rt.store.list_sessions().sessions[0].id
    await rt.run("two", session_id=sid)
    await rt.run("three", session_id=sid)
    turns = run_records(rt.store, sid)
    await rt.rewind(sid, turn_id=turns[1].id)  # hides turns 2 and 3
    assert [r.reverted for r in run_records(rt.store, sid)] == [False, True, True]
    assert run_records(rt.store, sid)[1].to_json()["reverted"] is True
    await rt.unrevert(sid)
    assert [r.reverted for r in run_records(rt.store, sid)] == [False, False, False]
    await rt.rewind(sid, turn_id=turns[2].id)
    await rt.run("four", session_id=sid)  # a new input: the revert is final
    assert [r.reverted for r in run_records(rt.store, sid)] == [False, False, True, False]
    await rt.aclose()


async def test_a_run_records_the_options_its_requests_ran_under(tmp_path: Path):
    """Issue 37 item 13 (the spec's `StoredRunOptions`: caps, model): besides its agent and
    model, a run records the step allowance, output limit, retry budget and budget caps in
    force, as its first request had them. On main `options` held the agent and model only."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "ok"}]}]}))
    config = Config(
        agents={"build": AgentConfig(max_steps=7)},
        retry=RetryConfig(max_retries=2),
        budgets=BudgetConfig(session_tokens=1_000_000),
    ).with_output_limit(1234)
    db = str(tmp_path / "db.sqlite")
    rt = Runtime(db, model=f"scripted:{script}", workspace=tmp_path, config=config)
    await rt.run("hello")
    sid = rt.store.list_sessions().sessions[0].id
    [run] = run_records(rt.store, sid)
    assert run.to_json()["options"] == {
        "agent": "build",
        "model": f"scripted:{script}",
        "max_steps": 7,
        "max_output_tokens": 1234,
        "max_retries": 2,
        "budget_tokens": 1_000_000,
        "budget_usd": None,
    }
    await rt.aclose()
