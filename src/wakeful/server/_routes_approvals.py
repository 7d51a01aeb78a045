"""Approval endpoints: list what a session waits on, decide one call.

A decision is admitted like any input (durable before anything runs); with `resume`, this
process's coordinator is woken and the call runs once, or the model is told it was denied.
"""

from __future__ import annotations

from typing import Any

from ..execution import off_loop, pending_approvals
from ._api import Call, Registry
from ._models import AdmissionOut, ApprovalOut, ApprovalsOut, DecisionIn
from ._state import ServerState

ops = Registry()


@ops.op("GET", "/sessions/{session_id}/approvals", tag="inputs", response=ApprovalsOut,
        errors=(401, 404))  # fmt: skip
async def approvals(call: Call[Any, Any]) -> ApprovalsOut:
    """The calls waiting for a decision, each with its command or diff."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    row = await off_loop(state.reads.get_session, sid)
    waiting = await off_loop(pending_approvals, state.reads, sid)
    return ApprovalsOut(
        session_id=sid, status=row.status,
        approvals=[ApprovalOut(call_id=r.call_id, name=r.name, input=r.input, preview=r.preview)
                   for r in waiting],
    )  # fmt: skip


@ops.op("POST", "/sessions/{session_id}/approvals/{call_id}", tag="inputs", body=DecisionIn,
        status=202, response=AdmissionOut, errors=(400, 401, 404, 409, 413, 422))  # fmt: skip
async def decide(call: Call[Any, DecisionIn]) -> AdmissionOut:
    """Decide on a waiting call (allow, always or deny); with `resume` wake the session."""
    state: ServerState = call.state
    sid, call_id = call.path["session_id"], call.path["call_id"]
    sent = await off_loop(state.runtime.approve, sid, call_id, call.body.decision, resume=False)
    if call.body.resume:
        state.wake(sid)
    else:
        state.hub.nudge()
    return AdmissionOut(session_id=sid, input_id=sent.input_id, created=sent.created,
                        status=sent.status)  # fmt: skip
