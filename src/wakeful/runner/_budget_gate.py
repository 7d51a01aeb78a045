"""Budgets: before a step's request, a turn whose root session (its children counted in) has
spent its `[budgets]` limit pauses with reason `budget` instead of asking (`docs/spend.md`).

What is spent is read from the session rows, where each `usage.recorded` is counted once, in
the transaction that records its reply (`store/_usage.root_spend`): never twice after a
recovery, never lost by a kill, the same for every host reading the store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias

from ..config import BudgetConfig

BUDGET_KIND = "budget"  # the `error_kind` of a turn a budget paused

Spend: TypeAlias = Callable[[], Awaitable[tuple[int, float]]]
"""What the session's root has spent so far: (tokens, input + output; priced USD)."""


class BudgetExceeded(Exception):
    """Raised inside a turn before a request that would start at or past a limit."""


async def check_budget(config: BudgetConfig, spend: Spend | None) -> None:
    """`BudgetExceeded` when the root session has spent a limit of `config`; nothing to read
    when no limit is set."""
    if spend is None or (config.session_tokens is None and config.session_usd is None):
        return
    tokens, usd = await spend()
    if config.session_tokens is not None and tokens >= config.session_tokens:
        raise BudgetExceeded(
            f"budget: the session used {tokens:,} of its {config.session_tokens:,} tokens "
            "([budgets] session_tokens)"
        )
    if config.session_usd is not None and usd >= config.session_usd:
        raise BudgetExceeded(
            f"budget: the session spent ${usd:.4f} of its ${config.session_usd:.4f} "
            "([budgets] session_usd)"
        )
