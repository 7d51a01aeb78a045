"""The API shapes of the usage report (`GET /usage`) and the budgets read (`GET /budgets`),
`_routes_usage`. Split from `_models` by
concern; the same rules hold (single source of the OpenAPI document)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ._models import _In, _Out


class UsageQuery(_In):
    """What to group by, and from when."""

    by: Literal["session", "agent", "model", "day", "user"] = Field(
        "session",
        description="Root session (its children counted in), agent, model, UTC day, or the "
        "root session's `user` metadata.",
    )
    since: str | None = Field(
        None, max_length=40, description="An age (30m, 24h, 7d, 2w) or an ISO date (UTC)."
    )


class UsageGroupOut(_Out):
    """One group's requests, tokens by kind, and cost."""

    key: str = Field(description="The group's session id, agent, model, day or user ('-': none).")
    requests: int
    input_tokens: int = Field(description="Every input token, the cached ones included.")
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None = Field(description="null: a request's model had no known price.")
    priced_cost_usd: float = Field(description="The cost of the requests that were priced.")
    unpriced_requests: int = Field(description="Requests whose model had no known price.")


class UsageReportOut(_Out):
    """Usage grouped by one key, groups in key order, and the total of every request."""

    by: str
    since_ms: int | None
    groups: list[UsageGroupOut]
    total: UsageGroupOut


class BudgetQuery(_In):
    """Whose limits: an agent's, a user's (neither: every limit a caller may read)."""

    agent: str | None = Field(None, min_length=1, max_length=200, description="An agent name.")
    user: str | None = Field(None, min_length=1, max_length=200, description="A user name.")


class BudgetLimitOut(_Out):
    """One agent's or user's limit in force and what its sessions spent in its period."""

    kind: Literal["agent", "user"]
    name: str
    entry: str = Field(description="The key of [budgets.agents] or [budgets.users]: the name or *.")
    where: str = Field(description="The configuration table to raise it in.")
    period: Literal["day", "total"]
    day: str | None = Field(description="The UTC date a day's limit counts; null: in total.")
    since_ms: int | None
    tokens: int = Field(description="Input and output tokens spent in the period.")
    max_tokens: int | None
    usd: float = Field(description="USD of the priced requests in the period.")
    max_usd: float | None
    reached: Literal["tokens", "usd"] | None = Field(
        description="The limit spent (a session's next request pauses); null: neither."
    )


class BudgetLimitsOut(_Out):
    """The agent limits, then the user limits, each by name."""

    limits: list[BudgetLimitOut]
