"""Approval endpoints: list what a session waits on, decide one call, raise a budget.

A decision is admitted like any input (durable before anything runs); with `resume`, this
process's coordinator is woken and the call runs once, or the model is told it was denied.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..execution import off_loop, pending_approvals, raise_budget
from ._api import Call, Registry
from ._models import AdmissionOut, ApprovalOut, ApprovalsOut, DecisionIn, _In, _Out
from ._state import ServerState

ops = Registry()


@ops.op(
    "GET",
    "/sessions/{session_id}/approvals",
    tag="inputs",
    response=ApprovalsOut,
    errors=(401, 404),
)
async def approvals(call: Call[Any, Any]) -> ApprovalsOut:
    """The calls waiting for a decision, each with its command or diff."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    row = await off_loop(state.reads.get_session, sid)
    waiting = await off_loop(pending_approvals, state.reads, sid)
    return ApprovalsOut(
        session_id=sid,
        status=row.status,
        approvals=[
            ApprovalOut(call_id=r.call_id, name=r.name, input=r.input, preview=r.preview)
            for r in waiting
        ],
    )


@ops.op(
    "POST",
    "/sessions/{session_id}/approvals/{call_id}",
    tag="inputs",
    body=DecisionIn,
    status=202,
    response=AdmissionOut,
    errors=(400, 401, 404, 409, 413, 422),
    scope="approve",
)
async def decide(call: Call[Any, DecisionIn]) -> AdmissionOut:
    """Decide on a waiting call (allow, always or deny); with `resume` wake the session."""
    state: ServerState = call.state
    sid, call_id = call.path["session_id"], call.path["call_id"]
    sent = await off_loop(
        state.runtime.approve,
        sid,
        call_id,
        call.body.decision,
        resume=False,
        actor=call.principal.name,
    )
    if call.body.resume:
        state.wake(sid)
    else:
        state.hub.nudge()
    return AdmissionOut(
        session_id=sid, input_id=sent.input_id, created=sent.created, status=sent.status
    )


class BudgetIn(_In):
    """A raise of one session's budget (docs/spend.md)."""

    amount: str = Field(
        description="+5usd or +20000tokens: added to the limit in force; 5usd or 20000tokens: "
        "the new limit.",
        max_length=64,
    )
    resume: bool = True


class BudgetOut(_Out):
    """A recorded raise, and the input that continues a session its budget paused."""

    session_id: str
    add_tokens: int
    add_usd: float
    set_tokens: int | None
    set_usd: float | None
    input_id: str | None = Field(
        description="The `continue` prompt sent because the session paused for its budget; "
        "null when it had not."
    )


@ops.op(
    "POST",
    "/sessions/{session_id}/budget",
    tag="inputs",
    body=BudgetIn,
    status=202,
    response=BudgetOut,
    errors=(400, 401, 404, 413, 422),
    scope="approve",
)
async def budget(call: Call[Any, BudgetIn]) -> BudgetOut:
    """Raise the session's budget durably (a `budget.raised` event in its root's log, counted
    by every host); a session its budget paused is sent `continue` (with `resume`, woken)."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    raised, sent = await off_loop(
        raise_budget,
        state.runtime,
        sid,
        call.body.amount,
        resume=False,
        actor=call.principal.name,
    )
    if sent is not None and call.body.resume:
        state.wake(sid)
    elif sent is not None:
        state.hub.nudge()
    return BudgetOut(
        session_id=sid,
        add_tokens=raised.add_tokens,
        add_usd=raised.add_usd,
        set_tokens=raised.set_tokens,
        set_usd=raised.set_usd,
        input_id=None if sent is None else sent.input_id,
    )
