"""The usage report over the API: `GET /usage` (`docs/spend.md`); the same data as
`wakeful usage --format json`."""

from __future__ import annotations

from typing import Any

from ..clock import SystemClock
from ..execution import off_loop
from ..store import UsageReport, since_ms, usage_report
from ._api import Call, Registry
from ._auth import Principal
from ._models_usage import UsageQuery, UsageReportOut
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
