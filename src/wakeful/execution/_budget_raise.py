"""Raising one session's budget durably (`wakeful approve SESSION --budget`, the
API's `POST /sessions/{id}/budget`), and continuing the turn its budget paused.

The raise is a `budget.raised` event in the root session's log, so every host's budget check
reads it (`runner._budget_gate.limits`); a session that paused with reason `budget` then gets
a `continue` prompt, as an approval's decision is the input that continues a paused turn.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..events import BudgetRaised
from ..runner import BUDGET_KIND
from ..store import LocalStore

if TYPE_CHECKING:
    from ._runtime import Runtime, SendResult

CONTINUE_TEXT = "continue (the budget was raised)"  # the prompt a raise continues a pause with

_AMOUNT = re.compile(r"(\+?)(\d+(?:\.\d+)?)\s*(usd|tokens?)", re.IGNORECASE)


def parse_budget_raise(amount: str) -> BudgetRaised:
    """`+5usd`, `+20000tokens` (added to the limit in force) or `5usd`, `20000tokens` (the new
    limit) as a `budget.raised` event; `UsageError` for anything else."""
    m = _AMOUNT.fullmatch(amount.strip())
    if m is None:
        raise UsageError(
            f"budget amount must look like +5usd, +20000tokens, 5usd or 20000tokens, not {amount!r}"
        )
    add, number, unit = m.group(1) == "+", m.group(2), m.group(3).lower()
    if unit.startswith("token"):
        if "." in number:
            raise UsageError(f"a token budget is a whole number, not {number}")
        tokens = int(number)
        return BudgetRaised(add_tokens=tokens) if add else BudgetRaised(set_tokens=tokens)
    usd = float(number)
    return BudgetRaised(add_usd=usd) if add else BudgetRaised(set_usd=usd)


def paused_for_budget(store: LocalStore, session_id: str) -> bool:
    """Whether the session's last turn paused because a budget was spent."""
    ended = store.events(session_id, types=("turn.ended",))
    last = ended[-1].event if ended else None
    return (
        getattr(last, "outcome", None) == "paused"
        and getattr(last, "error_kind", None) == BUDGET_KIND
    )


def raise_budget(
    rt: Runtime, session_id: str, amount: str, *, resume: bool = True, actor: str | None = None
) -> tuple[BudgetRaised, SendResult | None]:
    """Record `amount` (`parse_budget_raise`), raised by `actor` (default `rt.actor`), in the
    log of the session's root; when the session paused for its budget, send it
    `CONTINUE_TEXT` (with `resume`, waking its drain) as `actor`'s and return that admission
    too. `NotFoundError` for an unknown session; a bad amount is a `UsageError` and writes
    nothing."""
    actor = actor or rt.actor
    raised = parse_budget_raise(amount).model_copy(update={"actor": actor})
    row = rt.store.get_session(session_id)
    rt.store.append(row.root_id, [raised])
    if not paused_for_budget(rt.store, session_id):
        return raised, None
    return raised, rt.send(CONTINUE_TEXT, session_id=session_id, resume=resume, actor=actor)
