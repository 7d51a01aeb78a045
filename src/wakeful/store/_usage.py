"""The usage report's read: every request's recorded usage (`usage.recorded`), one
`UsageRecord` each, with what a report groups it by: its root session, agent, model, day and
user. Read as plain JSON, no event model built (a cold-start path like listing, `docs/cli.md`).

Invariant: one record per `usage.recorded` event, so a report's totals are the sum of the
receipts' usage exactly (a request is counted once, whichever group it falls in). The model is
the one its receipt names (the compaction model for a summary), else the session's; the user is
the root session's owner (`docs/access.md`), else the `user` key of its metadata (`docs/spend.md`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..errors import UsageError
from ._access import owned_roots_in, owners_in
from ._backend import Tx, iter_chunks
from ._cipher import opened

if TYPE_CHECKING:
    from ..events import BudgetNoticed, BudgetRaised
    from ._backend import Backend

ScopeAsk: TypeAlias = tuple[Literal["agent", "user"], str, int | None]
"""A budget scope asked about: agent or user, its name, and since when (None: ever)."""

_USAGE_ROWS = (
    "SELECT e.session_id, e.at_ms, e.data, s.root_id, s.agent, s.model FROM events e "
    "JOIN sessions s ON s.id = e.session_id WHERE e.type = 'usage.recorded'"
)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One request's recorded usage and what it is grouped by. `cost_usd` is None when the
    request's model had no known price."""

    session_id: str
    root_id: str
    agent: str | None
    model: str | None
    user: str | None
    at_ms: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None


def usage_records_in(tx: Tx, since_ms: int | None = None) -> list[UsageRecord]:
    """Every `usage.recorded` event (at or after `since_ms`, when given) as a `UsageRecord`,
    in the instance-wide log's order."""
    from ..events import event_data

    sql, params = _USAGE_ROWS, list[int]()
    if since_ms is not None:
        sql, params = sql + " AND e.at_ms >= ?", [since_ms]
    rows = tx.all(sql + " ORDER BY e.id", params)
    bodies = [event_data(r[2]) for r in rows]
    sessions = sorted({str(r[0]) for r in rows})
    models = _receipt_models(tx, sessions)
    users = _users(tx, sorted({str(r[3]) for r in rows}))
    return [
        UsageRecord(
            session_id=str(r[0]),
            root_id=str(r[3]),
            agent=r[4],
            model=models.get((str(r[0]), str(b.get("receipt_id"))), r[5]),
            user=users.get(str(r[3])),
            at_ms=int(r[1]),
            input_tokens=int(b.get("input_tokens", 0)),
            output_tokens=int(b.get("output_tokens", 0)),
            cache_read_tokens=int(b.get("cache_read_tokens", 0)),
            cache_write_tokens=int(b.get("cache_write_tokens", 0)),
            cost_usd=None if b.get("cost_usd") is None else float(b["cost_usd"]),
        )
        for r, b in zip(rows, bodies, strict=True)
    ]


def _receipt_models(tx: Tx, sessions: Sequence[str]) -> dict[tuple[str, str], str]:
    """(session, receipt id) -> the model the receipt names, for every receipt of `sessions`."""
    out: dict[tuple[str, str], str] = {}
    for chunk in iter_chunks(list(sessions), 500):
        marks = ", ".join("?" for _ in chunk)
        for sid, rid, body in tx.all(
            "SELECT r.session_id, r.receipt_id, e.data FROM receipts r JOIN events e "
            "ON e.session_id = r.session_id AND e.seq = r.seq "
            f"WHERE r.session_id IN ({marks})",
            list(chunk),
        ):
            model = _model_of(body)
            if model is not None:
                out[(str(sid), str(rid))] = model
    return out


def _model_of(body: str | bytes) -> str | None:
    data: Any = json.loads(opened(body) if isinstance(body, str) else body)
    model = data.get("model") if isinstance(data, dict) else None
    return model if isinstance(model, str) else None


def _users(tx: Tx, roots: Sequence[str]) -> dict[str, str]:
    """Root session -> its user, for the roots that have one: the owner the server recorded
    (`session_owners`, `docs/access.md`), else the `user` of the root's metadata."""
    out: dict[str, str] = {}
    for chunk in iter_chunks(list(roots), 500):
        marks = ", ".join("?" for _ in chunk)
        for sid, meta in tx.all(
            f"SELECT id, metadata FROM sessions WHERE id IN ({marks}) AND metadata IS NOT NULL",
            list(chunk),
        ):
            user = _meta_user(meta)
            if user is not None:
                out[str(sid)] = user
        out.update(owners_in(tx, chunk))
    return out


def root_spend_in(tx: Tx, root_id: str) -> tuple[int, float]:
    """The tokens (input + output) and priced cost of a root session and its children, summed
    from the session rows (each `usage.recorded` counted once, in its reply's transaction)."""
    row = tx.one(
        "SELECT COALESCE(SUM(input_tokens + output_tokens), 0), COALESCE(SUM(cost_usd), 0) "
        "FROM sessions WHERE root_id = ?",
        (root_id,),
    )
    return (0, 0.0) if row is None else (int(row[0]), float(row[1]))


_DAY_USAGE = (  # through migration 24's index (`_usage_index.py`)
    "SELECT s.agent, s.root_id, e.data FROM events e JOIN sessions s ON s.id = e.session_id "
    "WHERE e.type = 'usage.recorded' AND e.at_ms >= ?"
)


def _spent(bodies: Sequence[str | bytes]) -> tuple[int, float]:
    """The tokens (input + output) and priced USD of `usage.recorded` bodies."""
    from ..events import event_data

    data = [event_data(b) for b in bodies]
    tokens = sum(int(d.get("input_tokens", 0)) + int(d.get("output_tokens", 0)) for d in data)
    return tokens, sum(float(d.get("cost_usd") or 0.0) for d in data)


def _user_roots(tx: Tx, user: str) -> list[str]:
    """The root sessions of `user` (as `_users` names them): those it owns, and those with no
    owner whose metadata names it (a scan of such roots with metadata, which may be sealed: no
    text match in SQL)."""
    rows = tx.all(
        "SELECT s.id, s.metadata FROM sessions s LEFT JOIN session_owners o ON o.root_id = s.id "
        "WHERE s.parent_id IS NULL AND s.metadata IS NOT NULL AND o.root_id IS NULL"
    )
    named = {str(r[0]) for r in rows if _meta_user(r[1]) == user}
    return sorted(named | owned_roots_in(tx, user))


def _meta_user(meta: str | None) -> str | None:
    loaded: Any = json.loads(opened(meta)) if meta else None
    user = loaded.get("user") if isinstance(loaded, dict) else None
    return str(user) if isinstance(user, str | int) else None


def agent_spend_in(tx: Tx, agent: str, since_ms: int | None) -> tuple[int, float]:
    """What every session of `agent` spent (since `since_ms`, when given)."""
    if since_ms is None:
        row = tx.one(
            "SELECT COALESCE(SUM(input_tokens + output_tokens), 0), COALESCE(SUM(cost_usd), 0) "
            "FROM sessions WHERE agent = ?",
            (agent,),
        )
        return (0, 0.0) if row is None else (int(row[0]), float(row[1]))
    return _spent([r[2] for r in tx.all(_DAY_USAGE + " AND s.agent = ?", (since_ms, agent))])


def user_spend_in(tx: Tx, user: str, since_ms: int | None) -> tuple[int, float]:
    """What every session of `user` (its root's owner or metadata) spent (since `since_ms`)."""
    roots = set(_user_roots(tx, user))
    if since_ms is not None:
        return _spent([r[2] for r in tx.all(_DAY_USAGE, (since_ms,)) if str(r[1]) in roots])
    tokens, usd = 0, 0.0
    for root in sorted(roots):
        t, u = root_spend_in(tx, root)
        tokens, usd = tokens + t, usd + u
    return tokens, usd


class Spend:
    """What a budget counts (`store.spend`, an aggregate of `SqlStore` as `claims` is): a root
    session's spend, with its budget marks, and the spend of the agent and user scopes. Every
    read is one read transaction."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def root(self, root_id: str) -> tuple[int, float]:
        """What a root session and its children spent: tokens (input + output), priced USD."""
        with self.backend.transaction(write=False) as tx:
            return root_spend_in(tx, root_id)

    def budget(
        self, root_id: str, session_id: str | None = None
    ) -> tuple[int, float, list[BudgetRaised | BudgetNoticed]]:
        """`root`, and the `budget.raised` and `budget.noticed` events of the root's log
        (and the notices of `session_id`'s, a child's), in order, read in one transaction:
        what a budget check compares (`runner._budget_gate`)."""
        from ..events import BudgetNoticed, BudgetRaised  # not on the report's cold path
        from ._reads import events_in

        with self.backend.transaction(write=False) as tx:
            tokens, usd = root_spend_in(tx, root_id)
            marks = events_in(tx, root_id, 0, None, ("budget.raised", "budget.noticed"))
            if session_id is not None and session_id != root_id:
                marks += events_in(tx, session_id, 0, None, ("budget.noticed",))
        kinds = (BudgetRaised, BudgetNoticed)
        return tokens, usd, [e.event for e in marks if isinstance(e.event, kinds)]

    def scopes(
        self, root_id: str, scopes: Callable[[str | None], Sequence[ScopeAsk]]
    ) -> list[tuple[ScopeAsk, int, float]]:
        """In one read: the user of `root_id` (its owner, else its metadata's `user`), the
        scopes `scopes` asks about for it (agent or user, a name, since when), and what each
        spent."""
        with self.backend.transaction(write=False) as tx:
            return _scopes_in(tx, scopes(_users(tx, [root_id]).get(root_id)))

    def of(self, asks: Sequence[ScopeAsk]) -> list[tuple[ScopeAsk, int, float]]:
        """What each scope of `asks` (agent or user, a name, since when) spent, in one read:
        the spend `wakeful usage --limits` and `GET /budgets` show beside each limit."""
        with self.backend.transaction(write=False) as tx:
            return _scopes_in(tx, asks)

    def names(self, since_ms: int | None) -> tuple[list[str], list[str]]:
        """The agents and the users (as `_users` names them) whose sessions recorded usage
        (since `since_ms`, when given; through migration 24's index), sorted: whom a `"*"`
        limit applies to. Ever: a scan of the session rows."""
        with self.backend.transaction(write=False) as tx:
            if since_ms is None:
                rows = tx.all(
                    "SELECT DISTINCT agent, root_id FROM sessions "
                    "WHERE input_tokens + output_tokens > 0 OR cost_usd > 0"
                )
            else:
                rows = tx.all(_DAY_USAGE, (since_ms,))
            users = _users(tx, sorted({str(r[1]) for r in rows}))
        agents = {str(r[0]) for r in rows if r[0] is not None}
        return sorted(agents), sorted(set(users.values()))


def _scopes_in(tx: Tx, asks: Sequence[ScopeAsk]) -> list[tuple[ScopeAsk, int, float]]:
    """Each scope of `asks` with what it spent (tokens, priced USD)."""
    out: list[tuple[ScopeAsk, int, float]] = []
    for ask in asks:
        kind, name, since = ask
        read = agent_spend_in if kind == "agent" else user_spend_in
        out.append((ask, *read(tx, name, since)))
    return out


class UsageMixin:
    """The usage report's read of `SqlStore`."""

    backend: Backend

    def usage_records(self, since_ms: int | None = None) -> list[UsageRecord]:
        """Every request's recorded usage (at or after `since_ms`, when given), one record per
        `usage.recorded` event, in the instance-wide log's order."""
        with self.backend.transaction(write=False) as tx:
            return usage_records_in(tx, since_ms)


USAGE_BY = ("session", "agent", "model", "day", "user")
"""What a usage report groups by: the root session (its children counted into it), the
session's agent, the request's model, the UTC day, the root session's user."""

UNSET = "-"  # the group of records without the key (no agent, no user)


@dataclass(frozen=True, slots=True)
class UsageGroup:
    """The summed usage of one group: requests, tokens by kind, and cost; `priced_usd` sums
    the priced requests, `unpriced` counts the others (`cost_usd` is None when there are any:
    the group's cost is unknown, never shown as zero)."""

    key: str
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    priced_usd: float = 0.0
    unpriced: int = 0

    @property
    def cost_usd(self) -> float | None:
        """The group's cost, None when a request in it had no known price."""
        return None if self.unpriced else self.priced_usd

    def add(self, r: UsageRecord) -> UsageGroup:
        """This group with one more request."""
        return UsageGroup(
            self.key,
            self.requests + 1,
            self.input_tokens + r.input_tokens,
            self.output_tokens + r.output_tokens,
            self.cache_read_tokens + r.cache_read_tokens,
            self.cache_write_tokens + r.cache_write_tokens,
            self.priced_usd + (r.cost_usd or 0.0),
            self.unpriced + (r.cost_usd is None),
        )

    def to_json(self) -> dict[str, object]:
        """The group as JSON (the CLI, API and CSV contract)."""
        cost = self.cost_usd
        return {
            "key": self.key,
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cost_usd": None if cost is None else round(cost, 8),
            "priced_cost_usd": round(self.priced_usd, 8),
            "unpriced_requests": self.unpriced,
        }


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Usage grouped by one key (`USAGE_BY`), groups in key order, and the total."""

    by: str
    since_ms: int | None
    groups: tuple[UsageGroup, ...]
    total: UsageGroup

    def to_json(self) -> dict[str, object]:
        """The report as JSON (the CLI and API contract)."""
        return {
            "by": self.by,
            "since_ms": self.since_ms,
            "groups": [g.to_json() for g in self.groups],
            "total": self.total.to_json(),
        }


def _day(at_ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(at_ms / 1000, tz=UTC).date().isoformat()


def _key(r: UsageRecord, by: str) -> str:
    value = {"session": r.root_id, "agent": r.agent, "model": r.model, "user": r.user}.get(by)
    if by == "day":
        value = _day(r.at_ms)
    return value or UNSET


def usage_report(
    records: Sequence[UsageRecord], by: str = "session", since_ms: int | None = None
) -> UsageReport:
    """`records` grouped by `by` (one of `USAGE_BY`; `UsageError` otherwise), each request in
    exactly one group, and their total."""
    if by not in USAGE_BY:
        raise UsageError(f"usage by {by!r}: expected one of {', '.join(USAGE_BY)}")
    groups: dict[str, UsageGroup] = {}
    total = UsageGroup("total")
    for r in records:
        key = _key(r, by)
        groups[key] = groups.get(key, UsageGroup(key)).add(r)
        total = total.add(r)
    return UsageReport(by, since_ms, tuple(groups[k] for k in sorted(groups)), total)


_AGO = re.compile(r"^(\d+)([mhdw])$")
_UNIT_MS = {"m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}


def since_ms(value: str, now_ms: int) -> int:
    """`--since` as epoch milliseconds: an age (`30m`, `24h`, `7d`, `2w`) before `now_ms`, or
    an ISO date or date-time (UTC unless it names an offset). `UsageError` otherwise."""
    if match := _AGO.match(value.strip()):
        return now_ms - int(match[1]) * _UNIT_MS[match[2]]
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise UsageError(
            f"since {value!r}: expected an age (30m, 24h, 7d, 2w) or an ISO date"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)
