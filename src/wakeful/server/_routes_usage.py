"""The usage report over the API: `GET /usage` (`docs/spend.md`); the same data as
`wakeful usage --format json`. The agent and user budgets and what each spent: `GET /budgets`,
as `wakeful usage --limits --format json`."""

from __future__ import annotations

from typing import Any

from ..clock import SystemClock
from ..execution import budget_limits, off_loop
from ..store import UsageReport, since_ms, usage_report
from ._api import ApiError, Call, Registry
from ._auth import Principal
from ._models_usage import BudgetLimitsOut, BudgetQuery, UsageQuery, UsageReportOut
from ._owned import owned_roots
from ._state import ServerState

ops = Registry()


async def report_for(
    state: ServerState, by: str, since: str | None, principal: Principal | None = None
) -> UsageReport:
    """The usage report of the server's store, grouped by `by`, since `since` (an age or an
    ISO date; `UsageError` otherwise); of the sessions a non-admin `principal` owns only."""
    start = None if since is None else since_ms(since, SystemClock().now_ms())
    records = await off_loop(state.reads.usage_records, start)
    if principal is not None and not principal.admin:
        owned = await owned_roots(state, principal.user)
        records = [r for r in records if r.root_id in owned]
    return usage_report(records, by, start)


@ops.op("GET", "/usage", tag="reads", query=UsageQuery, response=UsageReportOut, errors=(401, 422))
async def usage_totals(call: Call[UsageQuery, Any]) -> UsageReportOut:
    """Tokens (input, output, cache read, cache write) and cost of every recorded request,
    grouped by root session, agent, model, UTC day or user, with their total."""
    report = await report_for(call.state, call.query.by, call.query.since, call.principal)
    return UsageReportOut.model_validate(report.to_json())


@ops.op(
    "GET",
    "/budgets",
    tag="reads",
    query=BudgetQuery,
    response=BudgetLimitsOut,
    errors=(401, 403, 422),
)
async def budgets(call: Call[BudgetQuery, Any]) -> BudgetLimitsOut:
    """The agent and user budgets of the server's configuration and what each spent in its
    period (the UTC day, or in total); a token without the admin scope reads only its own
    user's (403 for an agent's or another user's)."""
    principal, agent, user = call.principal, call.query.agent, call.query.user
    if not principal.admin:
        if principal.user is None or agent is not None or user not in (None, principal.user):
            raise ApiError(
                403, "forbidden", "without the admin scope a token reads only its own user's limits"
            )
        user = principal.user
    limits = await off_loop(budget_limits, call.state.runtime, agent=agent, user=user)
    return BudgetLimitsOut.model_validate({"limits": [x.to_json() for x in limits]})
