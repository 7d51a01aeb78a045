"""Raising one session's budget: a `budget.raised` event in its root's log, read by every
budget check (any host, any process), and the `continue` prompt that resumes a session its
budget paused (`wakeful.execution.raise_budget`, docs/spend.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wakeful.config import BudgetConfig, Config
from wakeful.errors import UsageError
from wakeful.events import BudgetRaised, UsageRecorded
from wakeful.execution import Runtime, parse_budget_raise, raise_budget
from wakeful.runner._budget_gate import limits


def _model(tmp_path: Path) -> str:
    calls = [
        {"tool_calls": [{"name": "goal_set", "input": {"goal": f"goal {i}"}}]} for i in range(40)
    ]
    path = tmp_path / "spend.json"
    path.write_text(json.dumps({"rules": [{"match": ".", "replies": [*calls, {"text": "done"}]}]}))
    return f"scripted:{path}"


def _tokens(rt: Runtime, sid: str) -> int:
    return sum(
        e.event.input_tokens + e.event.output_tokens
        for e in rt.store.events(sid)
        if isinstance(e.event, UsageRecorded)
    )


async def test_a_raise_continues_the_paused_turn_until_the_new_limit(tmp_path: Path) -> None:
    model, db, limit = _model(tmp_path), str(tmp_path / "s.db"), 3_000
    config = Config(budgets=BudgetConfig(session_tokens=limit))
    rt = Runtime(db, model=model, workspace=tmp_path, config=config)
    try:
        [turn] = await rt.run("work")
        assert (turn.outcome, turn.error_kind) == ("paused", "budget")
        row = rt.store.latest_session()
        assert row is not None
        first = _tokens(rt, row.id)
    finally:
        await rt.aclose()
    # Another process (same config) raises it: durable, and the paused session continues.
    rt = Runtime(db, model=model, workspace=tmp_path, config=config)
    try:
        raised, sent = raise_budget(rt, row.id, "+3000tokens", resume=False)
        assert raised == BudgetRaised(add_tokens=3_000, actor=rt.actor) and sent is not None
        turns = await rt.drive_input(row.id, sent.input_id)
        assert (turns[-1].outcome, turns[-1].error_kind) == ("paused", "budget")
        assert "of its 6,000 tokens" in (turns[-1].error or "")
        second = _tokens(rt, row.id)
        assert second > first and second >= 2 * limit  # ran on, then paused at the new limit
        [ev] = [e.event for e in rt.store.events(row.id, types=("budget.raised",))]
        assert ev == raised  # in the log
        # An absolute limit replaces the one in force.
        _, sent = raise_budget(rt, row.id, "100000tokens", resume=False)
        assert sent is not None
        turns = await rt.drive_input(row.id, sent.input_id)
        assert turns[-1].outcome == "completed" and turns[-1].final_text == "done"
        # A session its budget did not pause is only raised: nothing is sent.
        assert raise_budget(rt, row.id, "+1usd")[1] is None
    finally:
        await rt.aclose()


async def test_a_bad_amount_writes_nothing(tmp_path: Path) -> None:
    rt = Runtime(str(tmp_path / "s.db"), model=_model(tmp_path), workspace=tmp_path)
    try:
        sent = rt.send("hi", resume=False)
        before = rt.store.high_water(sent.session_id)
        for bad in ("5", "+5eur", "-5usd", "1.5tokens", ""):
            with pytest.raises(UsageError):
                raise_budget(rt, sent.session_id, bad)
        assert rt.store.high_water(sent.session_id) == before
    finally:
        rt.close()


def test_limits_fold_the_raises_in_log_order() -> None:
    config = BudgetConfig(session_tokens=1_000, session_usd=1.0)
    raises = [parse_budget_raise(a) for a in ("+500tokens", "+2usd", "10000tokens", "+1.5usd")]
    assert limits(config, raises) == (10_000, 4.5)
    assert limits(BudgetConfig(), [parse_budget_raise("+5usd")]) == (None, None)  # no limit
    assert limits(BudgetConfig(), [parse_budget_raise("5usd")]) == (None, 5.0)
