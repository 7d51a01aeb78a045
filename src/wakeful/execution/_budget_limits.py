"""Reading the agent and user budgets in force and what each spent (`wakeful usage --limits`,
`GET /budgets`; `docs/spend.md`, "Reading the limits"): the same entries, periods and sums a
turn's check reads (`_scope_budgets.py`), for a person or a dashboard rather than a turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import JsonValue

from ..config import BudgetConfig, ScopeBudget
from ..runner import ScopeLimit
from ..store import ScopeAsk
from ._scope_budgets import SpendStore, day_of, limit_of, rule_of, since_of

if TYPE_CHECKING:
    from ._runtime import Runtime


@dataclass(frozen=True, slots=True)
class BudgetLimit:
    """One agent's or user's limit in force (`entry`: the key of `[budgets.agents]` or
    `[budgets.users]` that applies, its name or `"*"`) and what its sessions spent in its
    period (`since_ms`: the UTC day's start for `day`, None for `total`)."""

    kind: Literal["agent", "user"]
    name: str
    entry: str
    period: Literal["day", "total"]
    since_ms: int | None
    limit: ScopeLimit

    @property
    def day(self) -> str | None:
        """The UTC date a day's limit counts (`2026-12-07`); None for `total`."""
        return None if self.since_ms is None else day_of(self.since_ms)

    def to_json(self) -> dict[str, JsonValue]:
        """The limit as JSON (the CLI's `--format json` and `GET /budgets` contract)."""
        lim = self.limit
        return {
            "kind": self.kind,
            "name": self.name,
            "entry": self.entry,
            "where": lim.where,
            "period": self.period,
            "day": self.day,
            "since_ms": self.since_ms,
            "tokens": lim.tokens,
            "max_tokens": lim.max_tokens,
            "usd": round(lim.usd, 8),
            "max_usd": lim.max_usd,
            "reached": lim.reached,
        }


def budget_limits(
    rt: Runtime, *, agent: str | None = None, user: str | None = None
) -> list[BudgetLimit]:
    """The agent and user limits of `rt`'s configuration (`[budgets.agents]`,
    `[budgets.users]`) with what each spent now, agents first, then users, each by name: those
    of `agent` and of `user` when either is given (a name no entry applies to has none), else
    every named entry and, for a `"*"` entry, each other agent or user whose sessions recorded
    usage in its period. A blocking read of the runtime's store: on an event loop, call it
    through `off_loop`."""
    return budget_limits_in(rt.store, rt.config.budgets, agent=agent, user=user)


def budget_limits_in(
    store: SpendStore,
    budgets: BudgetConfig,
    *,
    agent: str | None = None,
    user: str | None = None,
) -> list[BudgetLimit]:
    """`budget_limits` over `store` and `budgets`: two reads, who recorded usage (only for a
    `"*"` entry, `Spend.names`) and what each scope spent (`Spend.of`)."""
    now = store.clock.now_ms()
    picked = agent is not None or user is not None
    rules: dict[ScopeAsk, tuple[str, ScopeBudget]] = {}
    for kind, table, asked in (("agent", budgets.agents, agent), ("user", budgets.users, user)):
        names = [asked] if asked is not None else [] if picked else sorted(set(table) - {"*"})
        if not picked and "*" in table:
            agents, users = store.spend.names(since_of(table["*"], now))
            seen = agents if kind == "agent" else users
            names = sorted({*names, *(n for n in seen if n not in table)})
        for name in names:
            found = rule_of(table, name)
            if found is not None:
                rules[(kind, name, since_of(found[1], now))] = found  # type: ignore[index]
    return [
        BudgetLimit(
            ask[0],
            ask[1],
            rules[ask][0],
            rules[ask][1].period,
            ask[2],
            limit_of(ask, *rules[ask], t, u),
        )
        for ask, t, u in (store.spend.of(list(rules)) if rules else [])
    ]
