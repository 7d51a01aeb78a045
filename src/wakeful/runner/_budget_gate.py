"""Budgets: before a step's request, a turn whose root session (its children counted in) has
spent its `[budgets]` limit pauses with reason `budget` instead of asking (`docs/spend.md`).

What is spent is read from the session rows, where each `usage.recorded` is counted once, in
the transaction that records its reply (`store/_usage.Spend.root`): never twice after a
recovery, never lost by a kill, the same for every host reading the store. The limits are the
configuration's, changed by the `budget.raised` events of the root's log (`limits`), which
every host reads the same way. Past `notice_percent` of a limit, the check returns a
`budget.noticed` for the turn to write and show, once per limit in force (the log says whether
it was written).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..config import BudgetConfig
from ..events import BudgetNoticed, BudgetRaised

BUDGET_KIND = "budget"  # the `error_kind` of a turn a budget paused

Marks: TypeAlias = Sequence[BudgetRaised | BudgetNoticed]
Spend: TypeAlias = Callable[[], Awaitable[tuple[int, float, Marks]]]
"""What the session's root has spent so far (tokens, input + output; priced USD), and the
`budget.raised` events of its log and the `budget.noticed` of its and the session's, in order."""


@dataclass(frozen=True, slots=True)
class ScopeLimit:
    """What an agent's or a user's sessions spent together (`label`: `agent build today`),
    against its `[budgets.agents]` / `[budgets.users]` limits (`where`: that table)."""

    label: str
    where: str
    scope: str  # what a notice names: `agent build on 2026-12-07` for a day's limit
    tokens: int
    usd: float
    max_tokens: int | None
    max_usd: float | None

    @property
    def reached(self) -> Literal["tokens", "usd"] | None:
        """Which limit what was spent reached (at or past it; tokens first), None: neither:
        a request that would start now pauses when it is not None."""
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return "tokens"
        if self.max_usd is not None and self.usd >= self.max_usd:
            return "usd"
        return None


Scopes: TypeAlias = Callable[[], Awaitable[Sequence[ScopeLimit]]]
"""The agent and user limits that apply to a session, with what their sessions spent."""


class BudgetExceeded(Exception):
    """Raised inside a turn before a request that would start at or past a limit."""


def limits(config: BudgetConfig, raises: Sequence[BudgetRaised]) -> tuple[int | None, float | None]:
    """The (tokens, USD) limits in force: `config`'s, then each raise in log order (a `set_*`
    replaces a limit, an `add_*` adds to one that is set). None: no limit."""
    tokens, usd = config.session_tokens, config.session_usd
    for r in raises:
        tokens = r.set_tokens if r.set_tokens is not None else tokens
        usd = r.set_usd if r.set_usd is not None else usd
        tokens = tokens + r.add_tokens if tokens is not None else None
        usd = usd + r.add_usd if usd is not None else None
    return tokens, usd


async def check_scopes(
    scopes: Scopes | None, percent: int | None, spend: Spend | None
) -> BudgetNoticed | None:
    """`BudgetExceeded` when an agent's or a user's sessions spent a limit that applies; else
    the notice to write when one of them reached `percent` of a limit and this session (or its
    root) wrote none for it yet (`spend`'s marks, read only when a notice may be due)."""
    found = await scopes() if scopes is not None else ()
    for s in found:
        hint = f" (to raise it: {s.where} in wakeful.toml)"
        if s.reached == "tokens":
            raise BudgetExceeded(
                f"budget: {s.label} used {s.tokens:,} of its {s.max_tokens:,} tokens" + hint
            )
        if s.reached == "usd":
            raise BudgetExceeded(
                f"budget: {s.label} spent ${s.usd:.4f} of its ${s.max_usd:.4f}" + hint
            )
    due = [s for s in found if _notice(percent, (), _spent(s), s.scope) is not None]
    if not due or spend is None:
        return None
    _tokens, _usd, marks = await spend()
    for s in due:
        if (notice := _notice(percent, marks, _spent(s), s.scope)) is not None:
            return notice
    return None


def _spent(s: ScopeLimit) -> Sequence[tuple[Literal["tokens", "usd"], float, float | None]]:
    return (("tokens", s.tokens, s.max_tokens), ("usd", s.usd, s.max_usd))


async def check_budget(config: BudgetConfig, spend: Spend | None) -> BudgetNoticed | None:
    """`BudgetExceeded` when the root session has spent a limit in force (`limits`); else the
    notice to write when it reached `notice_percent` of one and none was written for that limit
    yet. Nothing to read when `config` sets no limit."""
    if spend is None or (config.session_tokens is None and config.session_usd is None):
        return None
    tokens, usd, marks = await spend()
    max_tokens, max_usd = limits(config, [m for m in marks if isinstance(m, BudgetRaised)])
    hint = " (to raise it: wakeful approve SESSION --budget +{})"
    if max_tokens is not None and tokens >= max_tokens:
        raise BudgetExceeded(
            f"budget: the session used {tokens:,} of its {max_tokens:,} tokens"
            + hint.format("20000tokens")
        )
    if max_usd is not None and usd >= max_usd:
        raise BudgetExceeded(
            f"budget: the session spent ${usd:.4f} of its ${max_usd:.4f}" + hint.format("5usd")
        )
    return _notice(
        config.notice_percent, marks, (("tokens", tokens, max_tokens), ("usd", usd, max_usd))
    )


def _notice(
    percent: int | None,
    marks: Marks,
    spent: Sequence[tuple[Literal["tokens", "usd"], float, float | None]],
    scope: str | None = None,
) -> BudgetNoticed | None:
    """The first limit (of `scope`; None: the session's) whose notice share is reached and not
    noticed yet, as a notice."""
    if percent is None:
        return None
    done = {
        (m.limit_kind, m.limit) for m in marks if isinstance(m, BudgetNoticed) and m.scope == scope
    }
    for kind, used, limit in spent:
        if limit is not None and used * 100 >= limit * percent and (kind, limit) not in done:
            return BudgetNoticed(
                limit_kind=kind, used=used, limit=limit, percent=percent, scope=scope
            )
    return None
