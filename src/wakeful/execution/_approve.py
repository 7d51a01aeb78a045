"""Deciding on calls that wait for approval, from outside the turn (CLI, API, inspector).

A decision is admitted like any input (an `approval` inbox item, idempotent per call), so
whichever process drives the session next delivers it, records `approval.decided` and runs
the call once, or answers the model with a denial.
"""

from __future__ import annotations

from pydantic import JsonValue

from ..errors import ConflictError, NotFoundError, UsageError
from ..events import ApprovalRequested, Decision
from ..runner import read_approvals
from ..store import Admission, LocalStore, Store

DECISIONS: tuple[Decision, ...] = ("allow", "deny", "always")


def pending_approvals(store: Store, session_id: str) -> list[ApprovalRequested]:
    """The calls of the session waiting for a decision, in call order (empty when none)."""
    step = read_approvals(store, session_id).step
    return [] if step is None else list(step.pending)


def approval_input_id(call_id: str) -> str:
    """The inbox id of a decision on `call_id`: one decision per call, resending is a no-op."""
    return f"approval_{call_id}"


def admit_decision(
    store: LocalStore, session_id: str, call_id: str, decision: str, actor: str | None = None
) -> tuple[ApprovalRequested, Admission]:
    """Admit `actor`'s decision on a waiting call (who decided is in its `inbox.enqueued`);
    return the request and the admission.

    `UsageError` for an unknown decision, `NotFoundError` when no such call waits (a unique
    prefix of its id is enough), `ConflictError` when the call was already decided otherwise.
    """
    if decision not in DECISIONS:
        raise UsageError(f"decision must be allow, deny or always, not {decision!r}")
    waiting = pending_approvals(store, session_id)
    matches = [r for r in waiting if r.call_id == call_id] or [
        r for r in waiting if r.call_id.startswith(call_id)
    ]
    if not matches:
        ids = ", ".join(r.call_id for r in waiting) or "none"
        raise NotFoundError(f"no call {call_id!r} awaits approval in {session_id} (waiting: {ids})")
    if len(matches) > 1:
        raise UsageError(f"call id prefix {call_id!r} is ambiguous in {session_id}")
    request = matches[0]
    payload: dict[str, JsonValue] = {"call_id": request.call_id, "decision": decision}
    try:
        admission = store.admit(
            session_id,
            approval_input_id(request.call_id),
            "approval",
            payload,
            "steer",
            actor=actor,
        )
    except ConflictError:
        raise ConflictError(
            f"call {request.call_id} in {session_id} was already decided otherwise"
        ) from None
    return request, admission
