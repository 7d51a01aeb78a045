"""Reading the agent and user budgets and what each spent (`docs/spend.md`, "Reading the
limits"): the library (`budget_limits`), `wakeful usage --limits` and `GET /budgets`, each
checked against what the log recorded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.cli.conftest import write_script
from tests.server.conftest import TOKEN, MakeServer, script
from wakeful.client import AsyncClient, Client
from wakeful.clock import FakeClock
from wakeful.config import DAY_MS, BudgetConfig, Config, ScopeBudget
from wakeful.events import UsageRecorded
from wakeful.execution import Runtime, budget_limits, budget_limits_in
from wakeful.store import SqlStore

CALLS = [{"tool_calls": [{"name": "goal_set", "input": {"goal": f"g{i}"}}]} for i in range(30)]
RULES = [{"match": ".", "replies": [*CALLS, {"text": "done"}]}]


def _logged_tokens(rt: Runtime, sid: str) -> int:
    """The input + output tokens of the session's `usage.recorded` events."""
    used = [e.event for e in rt.store.events(sid, types=("usage.recorded",))]
    return sum(e.input_tokens + e.output_tokens for e in used if isinstance(e, UsageRecorded))


def test_limits_name_each_agent_and_user_with_what_each_spent(
    store: SqlStore, clock: FakeClock
) -> None:
    alice = store.create_session(agent="build", metadata={"user": "alice"})
    child = store.create_session(agent="explore", parent_id=alice.id, root_id=alice.id)
    bob = store.create_session(agent="plan", metadata={"user": "bob"})
    store.create_session(agent="idle", metadata={"user": "carol"})  # nothing recorded
    store.append(alice.id, [UsageRecorded(input_tokens=100, output_tokens=10, cost_usd=0.5)])
    clock.advance(DAY_MS)  # the rest today
    store.append(child.id, [UsageRecorded(input_tokens=20, output_tokens=2, cost_usd=0.25)])
    store.append(bob.id, [UsageRecorded(input_tokens=7, output_tokens=1)])  # unpriced
    budgets = BudgetConfig(
        agents={"build": ScopeBudget(tokens=100), "*": ScopeBudget(tokens=1000, period="day")},
        users={"alice": ScopeBudget(usd=0.7), "*": ScopeBudget(usd=1.0, period="day")},
    )

    def rows(**who: str) -> list[tuple[object, ...]]:
        return [
            (x.kind, x.name, x.entry, x.period, x.limit.tokens, x.limit.usd, x.limit.reached)
            for x in budget_limits_in(store, budgets, **who)
        ]

    # Named entries, and under "*" each other agent or user that recorded usage in its
    # period (today: not `build`'s yesterday, not carol who recorded nothing).
    assert rows() == [
        ("agent", "build", "build", "total", 110, 0.5, "tokens"),
        ("agent", "explore", "*", "day", 22, 0.25, None),
        ("agent", "plan", "*", "day", 8, 0.0, None),
        ("user", "alice", "alice", "total", 132, 0.75, "usd"),
        ("user", "bob", "*", "day", 8, 0.0, None),
    ]
    assert rows(agent="idle") == [("agent", "idle", "*", "day", 0, 0.0, None)]
    assert rows(agent="build", user="carol") == [
        ("agent", "build", "build", "total", 110, 0.5, "tokens"),
        ("user", "carol", "*", "day", 0, 0.0, None),
    ]
    [today] = budget_limits_in(store, budgets, user="bob")
    assert today.day is not None and today.since_ms == clock.now_ms() - clock.now_ms() % DAY_MS
    assert today.to_json()["where"] == '[budgets.users."*"]'
    assert budget_limits_in(store, BudgetConfig(), agent="build") == []
    assert budget_limits_in(store, BudgetConfig(users={"dana": ScopeBudget(tokens=5)})) != []


async def test_the_library_reads_a_runtimes_limits_against_the_log(tmp_path: Path) -> None:
    budgets = BudgetConfig(
        agents={"build": ScopeBudget(tokens=5_000)}, users={"*": ScopeBudget(tokens=10**9)}
    )
    path = tmp_path / "spend.json"
    path.write_text(json.dumps({"rules": RULES}))
    rt = Runtime(
        str(tmp_path / "s.db"),
        model=f"scripted:{path}",
        workspace=tmp_path,
        config=Config(budgets=budgets),
    )
    try:
        sent = rt.send("work", resume=False)
        rt.update_metadata(sent.session_id, {"user": "alice"})
        [turn] = await rt.drive_input(sent.session_id, sent.input_id)
        assert turn.error_kind == "budget"
        spent = _logged_tokens(rt, sent.session_id)
        agent, user = budget_limits(rt)
    finally:
        await rt.aclose()
    assert (agent.kind, agent.name, agent.limit.tokens, agent.limit.reached) == (
        "agent",
        "build",
        spent,
        "tokens",
    )
    assert (user.kind, user.name, user.entry, user.limit.tokens, user.limit.reached) == (
        "user",
        "alice",
        "*",
        spent,
        None,
    )


def test_usage_limits_on_the_command_line(wk, workdir: Path) -> None:
    toml = '[budgets.agents.build]\ntokens = 3000\n[budgets.users."*"]\nusd = 5.0\nperiod = "day"\n'
    (workdir / "wakeful.toml").write_text(toml)
    model = write_script(workdir, RULES)
    done = wk("run", "--model", model, "work", check=False)
    assert done.returncode == 4, done.stderr  # paused: the agent's budget
    report = json.loads(wk("usage", "--by", "agent", "--format", "json").stdout)
    logged = report["total"]["input_tokens"] + report["total"]["output_tokens"]
    out = json.loads(wk("usage", "--limits", "--format", "json").stdout)["limits"]
    assert [(x["kind"], x["name"], x["tokens"], x["reached"]) for x in out] == [
        ("agent", "build", logged, "tokens"),
    ]  # the session has no user: no user limit is in use
    text = wk("usage", "--limits", "--agent", "build").stdout
    assert "agent build" in text and f"{logged:,} of 3,000 tokens" in text
    assert "REACHED (tokens)" in text and "[budgets.agents.build]" in text
    csv = wk("usage", "--limits", "--user", "alice", "--format", "csv").stdout.splitlines()
    assert csv[0].startswith("kind,name,entry,period,day") and csv[1].startswith("user,alice,*,day")
    for bad in (("--limits", "--by", "agent"), ("--agent", "build")):
        got = wk("usage", *bad, check=False)
        assert got.returncode == 2 and len(got.stderr.strip().splitlines()) == 1, got.stderr
        assert "Traceback" not in got.stderr


def test_get_budgets_for_an_admin_and_for_a_user(make_server: MakeServer, tmp_path: Path) -> None:
    served = make_server(model=script(tmp_path, [{"match": ".", "replies": [{"text": "hi"}]}]))
    budgets = BudgetConfig(
        agents={"*": ScopeBudget(tokens=10**6)}, users={"*": ScopeBudget(tokens=10**6)}
    )
    served.runtime.config = served.runtime.config.model_copy(update={"budgets": budgets})
    admin = served.client()
    secret = admin.post("/admin/tokens", json={"user": "alice", "scopes": ["read", "drive"]})
    alice = served.client(secret.json()["secret"])
    made = alice.post("/sessions", json={"prompt": {"text": "go", "wait": True}})
    assert made.status_code == 201, made.text
    spent = _logged_tokens(served.runtime, made.json()["session"]["id"])
    assert spent > 0
    every = admin.get("/budgets").json()["limits"]
    assert [(x["kind"], x["name"], x["entry"], x["tokens"]) for x in every] == [
        ("agent", served.runtime.agent_name, "*", spent),
        ("user", "alice", "*", spent),
    ]
    own = alice.get("/budgets").json()["limits"]  # a user's token: its own user's only
    assert [(x["kind"], x["name"], x["tokens"]) for x in own] == [("user", "alice", spent)]
    for query in ({"agent": "build"}, {"user": "bob"}):
        refused = alice.get("/budgets", params=query)
        assert refused.status_code == 403 and "own user's" in refused.json()["reason"]
    with Client(served.url, token=TOKEN) as client:
        [read] = client.budget_limits(user="alice")["limits"]
    assert (read["name"], read["tokens"], read["reached"]) == ("alice", spent, None)

    async def read_async() -> dict[str, Any]:
        async with AsyncClient(served.url, TOKEN) as c:
            return await c.budget_limits(agent=served.runtime.agent_name)

    [agent] = asyncio.run(read_async())["limits"]
    assert (agent["kind"], agent["tokens"]) == ("agent", spent)
