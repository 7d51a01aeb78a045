"""Budgets: a session whose root has spent its `[budgets]` limit pauses with reason `budget`
before the next request (counted from the recorded usage: the provider's request count and
the log agree), and a raised limit lets it continue."""

from __future__ import annotations

import json
from pathlib import Path

from wakeful.config import BudgetConfig, Config, PriceConfig
from wakeful.events import BudgetNoticed, ReceiptRecorded, UsageRecorded
from wakeful.execution import Runtime, raise_budget


def _model(tmp_path: Path) -> str:
    calls = [
        {"tool_calls": [{"name": "goal_set", "input": {"goal": f"goal {i}"}}]} for i in range(30)
    ]
    path = tmp_path / "spend.json"
    path.write_text(
        json.dumps(
            {
                "rules": [
                    {"match": "finish", "replies": [{"text": "finished"}]},
                    {"match": ".", "replies": [*calls, {"text": "done"}]},
                ]
            }
        )
    )
    return f"scripted:{path}"


def _used(rt: Runtime, sid: str) -> tuple[int, list[int]]:
    """The session's receipts (requests asked) and each request's tokens, from the log."""
    events = rt.store.events(sid)
    receipts = sum(isinstance(e.event, ReceiptRecorded) for e in events)
    usage = [
        e.event.input_tokens + e.event.output_tokens
        for e in events
        if isinstance(e.event, UsageRecorded)
    ]
    return receipts, usage


async def test_a_token_budget_pauses_before_the_request_past_it(tmp_path: Path) -> None:
    model, db = _model(tmp_path), str(tmp_path / "s.db")
    limit = 4_000
    rt = Runtime(
        db,
        model=model,
        workspace=tmp_path,
        config=Config(budgets=BudgetConfig(session_tokens=limit)),
    )
    try:
        [turn] = await rt.run("work")
        assert (turn.outcome, turn.error_kind) == ("paused", "budget")
        assert "of its 4,000 tokens" in (turn.error or "")
        row = rt.store.latest_session()
        assert row is not None and row.status == "paused"
        receipts, usage = _used(rt, row.id)
        # Every request asked has its usage; a read-only step's boundary may have written the
        # next receipt ahead, a request the budget then did not send (docs/spend.md).
        assert len(usage) >= 2 and receipts - len(usage) in (0, 1)
        assert sum(usage) >= limit > sum(usage[:-1])  # paused right after crossing, not later
        assert rt.store.spend.root(row.id)[0] == sum(usage)  # counted once per request
    finally:
        await rt.aclose()
    # Raised, the session continues where it stopped.
    raised = Config(budgets=BudgetConfig(session_tokens=10 * limit))
    rt = Runtime(db, model=model, workspace=tmp_path, config=raised)
    try:
        [turn] = await rt.run("finish", session_id=row.id)
        assert turn.outcome == "completed" and turn.final_text == "finished"
    finally:
        await rt.aclose()


async def test_a_cost_budget_counts_priced_usage(tmp_path: Path) -> None:
    model = _model(tmp_path)
    config = Config(
        prices={model: PriceConfig(input=100.0, output=100.0)},
        budgets=BudgetConfig(session_usd=0.5),
    )
    rt = Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config)
    try:
        [turn] = await rt.run("work")
        assert (turn.outcome, turn.error_kind) == ("paused", "budget")
        assert "of its $0.5000" in (turn.error or "")
        row = rt.store.latest_session()
        assert row is not None and row.cost_usd >= 0.5
    finally:
        await rt.aclose()


async def test_no_budget_no_pause(tmp_path: Path) -> None:
    rt = Runtime(
        str(tmp_path / "s.db"),
        model=_model(tmp_path),
        workspace=tmp_path,
        config=Config(loop_guard={"enabled": False}),
    )
    try:
        [turn] = await rt.run("work")
        assert turn.outcome == "completed" and turn.final_text == "done"
    finally:
        await rt.aclose()


async def test_the_notice_share_writes_one_notice_per_limit(tmp_path: Path) -> None:
    model, db = _model(tmp_path), str(tmp_path / "s.db")
    config = Config(budgets=BudgetConfig(session_tokens=4_000, notice_percent=50))
    rt = Runtime(db, model=model, workspace=tmp_path, config=config)
    shown: list[str] = []
    rt.listener = lambda ev: shown.append(str(ev.data["text"])) if ev.kind == "notice" else None
    try:
        [turn] = await rt.run("work")
        assert (turn.outcome, turn.error_kind) == ("paused", "budget")
        row = rt.store.latest_session()
        assert row is not None
        events = rt.store.events(row.id)
        notices = [e for e in events if isinstance(e.event, BudgetNoticed)]
        assert len(notices) == 1 and shown == [notices[0].event.text]  # once, and shown
        notice = notices[0].event
        assert (notice.limit_kind, notice.limit, notice.percent) == ("tokens", 4000, 50)
        assert "of its 4,000 tokens" in notice.text and "notice at 50%" in notice.text
        # Written before the request past the share: the usage before it was under it.
        before = [
            e.event.input_tokens + e.event.output_tokens
            for e in events
            if isinstance(e.event, UsageRecorded) and e.seq < notices[0].seq
        ]
        assert sum(before) >= 2_000 > sum(before[:-1]) and notice.used == sum(before)
    finally:
        await rt.aclose()
    # Raised, the new limit gets its own notice (the old one's does not count for it).
    rt = Runtime(db, model=model, workspace=tmp_path, config=config)
    try:
        raise_budget(rt, row.id, "+100000tokens", resume=False)
        [turn] = await rt.run("finish", session_id=row.id)
        assert turn.outcome == "completed"
        limits = [e.event.limit for e in rt.store.events(row.id, types=("budget.noticed",))]
        assert limits == [4000]  # 104,000 tokens: its notice share not reached
    finally:
        await rt.aclose()


async def test_no_notice_when_turned_off(tmp_path: Path) -> None:
    budgets = BudgetConfig(session_tokens=4_000, notice_percent=None)
    rt = Runtime(
        str(tmp_path / "s.db"),
        model=_model(tmp_path),
        workspace=tmp_path,
        config=Config(budgets=budgets),
    )
    try:
        [turn] = await rt.run("work")
        assert turn.error_kind == "budget"
        row = rt.store.latest_session()
        assert row is not None and not rt.store.events(row.id, types=("budget.noticed",))
    finally:
        await rt.aclose()
