"""Which `[budgets.agents]` and `[budgets.users]` limits apply to a session, read with what
their sessions spent (`docs/spend.md`, "Budgets per agent and per user").

An agent's limit counts every session run by that agent (a child counts under its own
agent); a user's counts every session whose root belongs to that user (its owner, else its
metadata's `user`: the same user the usage report groups by). A named entry applies to that name; `"*"` applies to each other
name apart (every agent, or every user, its own limit). `period = "day"` counts the current
UTC day's requests, `total` everything recorded.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from ..clock import Clock
from ..config import DAY_MS, BudgetConfig, ScopeBudget
from ..runner import ScopeLimit, Scopes
from ..store import ScopeAsk
from ._off_loop import off_loop

if TYPE_CHECKING:
    from ..store import Spend


def rule_of(table: dict[str, ScopeBudget], name: str | None) -> tuple[str, ScopeBudget] | None:
    """The entry of `table` for `name`: its own, else `"*"`; None without a name or entry."""
    if name is None:
        return None
    if name in table:
        return name, table[name]
    return ("*", table["*"]) if "*" in table else None


def day_of(since_ms: int) -> str:
    """The UTC date a day's limit counts (`2026-12-07`)."""
    return datetime.fromtimestamp(since_ms / 1000, tz=UTC).date().isoformat()


class SpendStore(Protocol):
    """What the agent and user limits read of the store."""

    @property
    def clock(self) -> Clock:
        """The store's clock."""
        ...

    @property
    def spend(self) -> Spend:
        """What a budget counts (`store.spend`, `store/_usage.py`)."""
        ...


def since_of(rule: ScopeBudget, now: int) -> int | None:
    """Since when `rule` counts: the start of the current UTC day, or None (ever)."""
    return now - now % DAY_MS if rule.period == "day" else None


def limit_of(ask: ScopeAsk, key: str, rule: ScopeBudget, tokens: int, usd: float) -> ScopeLimit:
    """What the scope `ask` spent against the entry `key` of its table (`rule`)."""
    kind, name, since = ask
    label = f"{kind} {name}" + (" today" if since is not None else "")
    where = f"[budgets.{kind}s.{key if key != '*' else chr(34) + '*' + chr(34)}]"
    scope = f"{kind} {name}" + (f" on {day_of(since)}" if since is not None else "")
    return ScopeLimit(label, where, scope, tokens, usd, rule.tokens, rule.usd)


def scope_limits(
    store: SpendStore, budgets: BudgetConfig, root_id: str, agent: str
) -> Scopes | None:
    """The session's `Scopes` (None when no agent or user limit is configured)."""
    if not budgets.agents and not budgets.users:
        return None
    read, now_ms = store.spend.scopes, store.clock.now_ms

    def limits() -> list[ScopeLimit]:
        now = now_ms()
        rules: dict[ScopeAsk, tuple[str, ScopeBudget]] = {}

        def asks(user: str | None) -> list[ScopeAsk]:
            for kind, table, name in (
                ("agent", budgets.agents, agent),
                ("user", budgets.users, user),
            ):
                found = rule_of(table, name)
                if found is not None and name is not None:
                    rules[(kind, name, since_of(found[1], now))] = found  # type: ignore[index]
            return list(rules)

        return [limit_of(ask, *rules[ask], tokens, usd) for ask, tokens, usd in read(root_id, asks)]

    async def read_limits() -> list[ScopeLimit]:
        return await off_loop(limits)

    return read_limits
