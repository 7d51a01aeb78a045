"""Budgets per agent and per user (`[budgets.agents]`, `[budgets.users]`, docs/spend.md):
every session of the agent, or of the user (the root's owner, else its metadata `user`),
counted together, in total or per UTC day; a session starting past one pauses before its first
request."""

from __future__ import annotations

import json
import re
from pathlib import Path

from wakeful.clock import FakeClock
from wakeful.config import DAY_MS, BudgetConfig, Config, ScopeBudget
from wakeful.events import BudgetNoticed, UsageRecorded
from wakeful.execution import Runtime
from wakeful.runner import TurnResult
from wakeful.store import SqlStore
from wakeful.store._usage import ScopeAsk


def _model(tmp_path: Path) -> str:
    calls = [{"tool_calls": [{"name": "goal_set", "input": {"goal": f"g{i}"}}]} for i in range(30)]
    path = tmp_path / "spend.json"
    path.write_text(json.dumps({"rules": [{"match": ".", "replies": [*calls, {"text": "done"}]}]}))
    return f"scripted:{path}"


def _requests(rt: Runtime, sid: str) -> int:
    return sum(isinstance(e.event, UsageRecorded) for e in rt.store.events(sid))


async def _run_as(rt: Runtime, user: str | None) -> tuple[str, TurnResult]:
    sent = rt.send("work", resume=False)
    if user is not None:
        rt.update_metadata(sent.session_id, {"user": user})
    [turn] = await rt.drive_input(sent.session_id, sent.input_id)
    return sent.session_id, turn


async def test_an_agent_budget_counts_every_session_of_the_agent(tmp_path: Path) -> None:
    budgets = BudgetConfig(agents={"build": ScopeBudget(tokens=5_000)})
    rt = Runtime(
        str(tmp_path / "s.db"),
        model=_model(tmp_path),
        workspace=tmp_path,
        config=Config(budgets=budgets),
    )
    try:
        first, turn = await _run_as(rt, None)
        assert (turn.outcome, turn.error_kind) == ("paused", "budget")
        assert "agent build used" in (turn.error or "") and "of its 5,000 tokens" in (
            turn.error or ""
        )
        assert "[budgets.agents.build] in wakeful.toml" in (turn.error or "")
        assert _requests(rt, first) >= 2
        second, turn = await _run_as(rt, None)  # the agent spent it: no request at all
        assert (turn.outcome, turn.error_kind) == ("paused", "budget")
        assert _requests(rt, second) == 0
    finally:
        await rt.aclose()


async def test_a_daily_user_budget_is_each_users_own(tmp_path: Path) -> None:
    budgets = BudgetConfig(users={"*": ScopeBudget(tokens=5_000, period="day")})
    rt = Runtime(
        str(tmp_path / "s.db"),
        model=_model(tmp_path),
        workspace=tmp_path,
        config=Config(budgets=budgets),
    )
    try:
        alice, turn = await _run_as(rt, "alice")
        assert turn.error_kind == "budget" and "user alice today used" in (turn.error or "")
        assert '[budgets.users."*"]' in (turn.error or "")
        again, turn = await _run_as(rt, "alice")
        assert turn.error_kind == "budget" and _requests(rt, again) == 0
        bob, turn = await _run_as(rt, "bob")  # bob's day is his own
        assert turn.error_kind == "budget" and "user bob today" in (turn.error or "")
        assert _requests(rt, bob) >= 2
        nobody, turn = await _run_as(rt, None)  # no user: no user limit applies
        assert turn.outcome == "completed"
        assert rt.store.spend.scopes(alice, lambda user: [("user", "alice", 0)])[0][1] >= 5_000
    finally:
        await rt.aclose()


def test_scope_spend_reads_agents_and_users_by_day_or_in_total(
    store: SqlStore, clock: FakeClock
) -> None:
    alice = store.create_session(agent="build", metadata={"user": "alice"})
    child = store.create_session(agent="explore", parent_id=alice.id, root_id=alice.id)
    other = store.create_session(agent="build", metadata={"user": "bob"})
    store.append(alice.id, [UsageRecorded(input_tokens=100, output_tokens=10, cost_usd=0.5)])
    clock.advance(DAY_MS)
    today = clock.now_ms() - clock.now_ms() % DAY_MS
    store.append(child.id, [UsageRecorded(input_tokens=20, output_tokens=2, cost_usd=0.25)])
    store.append(other.id, [UsageRecorded(input_tokens=7, output_tokens=1)])  # unpriced

    def spent(*asks: ScopeAsk) -> list[tuple[int, float]]:
        return [(t, u) for _ask, t, u in store.spend.scopes(alice.id, lambda _user: list(asks))]

    assert spent(("agent", "build", None), ("agent", "build", today)) == [(118, 0.5), (8, 0.0)]
    assert spent(("user", "alice", None), ("user", "alice", today)) == [(132, 0.75), (22, 0.25)]
    assert spent(("user", "carol", None), ("agent", "explore", None)) == [(0, 0.0), (22, 0.25)]
    seen: list[str | None] = []

    def note(user: str | None) -> list[ScopeAsk]:
        seen.append(user)
        return []

    store.spend.scopes(child.id, note)
    store.spend.scopes(alice.id, note)
    assert seen == [None, "alice"]  # the user is the root's (a child is asked by its root)


def test_a_sessions_owner_is_its_user_before_its_metadata(store: SqlStore) -> None:
    owned = store.create_session(agent="build", metadata={"user": "mallory"})
    child = store.create_session(agent="explore", parent_id=owned.id, root_id=owned.id)
    named = store.create_session(agent="build", metadata={"user": "alice"})
    store.access.set_owner(owned.id, "alice")  # a server with users recorded its creator
    store.append(child.id, [UsageRecorded(input_tokens=30, output_tokens=3)])
    store.append(named.id, [UsageRecorded(input_tokens=5, output_tokens=1)])

    def spent(user: str) -> int:
        [(_ask, tokens, _usd)] = store.spend.scopes(named.id, lambda _u: [("user", user, None)])
        return tokens

    assert (spent("alice"), spent("mallory")) == (39, 0)  # the owner's, and the metadata's
    seen: list[str | None] = []
    store.spend.scopes(owned.id, lambda user: seen.append(user) or [])
    assert seen == ["alice"]
    assert {r.root_id: r.user for r in store.usage_records()} == {
        owned.id: "alice",
        named.id: "alice",
    }


async def test_an_agent_or_user_budget_writes_its_notice_once(tmp_path: Path) -> None:
    budgets = BudgetConfig(
        agents={"build": ScopeBudget(tokens=5_000)},
        users={"alice": ScopeBudget(tokens=9_000, period="day")},
        notice_percent=50,
    )
    rt = Runtime(
        str(tmp_path / "s.db"),
        model=_model(tmp_path),
        workspace=tmp_path,
        config=Config(budgets=budgets),
    )
    shown: list[str] = []
    rt.listener = lambda ev: shown.append(str(ev.data["text"])) if ev.kind == "notice" else None
    try:
        sid, turn = await _run_as(rt, "alice")
        assert turn.error_kind == "budget"
        notices = [e.event for e in rt.store.events(sid, types=("budget.noticed",))]
        scopes = [n.scope for n in notices if isinstance(n, BudgetNoticed)]
        assert scopes[0] == "agent build" and len(scopes) == len(set(scopes))  # once each
        day = re.compile(r"user alice on \d{4}-\d\d-\d\d")
        assert all(s == "agent build" or day.fullmatch(s or "") for s in scopes)
        assert shown == [n.text for n in notices if isinstance(n, BudgetNoticed)]
        assert "budget: agent build used" in shown[0] and "of its 5,000 tokens" in shown[0]
    finally:
        await rt.aclose()
