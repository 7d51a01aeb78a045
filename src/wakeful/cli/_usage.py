"""`wakeful usage`: tokens (input, output, cache read, cache write) and cost, grouped by root
session, agent, model, UTC day or user, as a table, JSON or CSV (`docs/spend.md`).

Every request's recorded usage counts once (`wakeful.store.usage_report`); a group with a
request whose model had no known price shows its cost as unknown, never as zero.

`wakeful usage --limits [--agent NAME] [--user NAME]`: the agent and user budgets of this
directory's configuration and what each spent in its period (`wakeful.execution.budget_limits`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import UsageError
from ..runner import format_cost
from ..store import USAGE_BY, UsageReport, since_ms, usage_report
from ._common import db_option, format_option, local_runtime, no_default_store, print_json

if TYPE_CHECKING:
    from ..execution import BudgetLimit

_COLUMNS = (
    "key",
    "requests",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "priced_cost_usd",
    "unpriced_requests",
)


def _csv(report: UsageReport) -> None:
    import csv
    import sys

    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow([report.by if c == "key" else c for c in _COLUMNS])
    for group in (*report.groups, report.total):
        data = group.to_json()
        out.writerow(["" if data[c] is None else data[c] for c in _COLUMNS])


def _table(report: UsageReport) -> None:
    width = max([len(report.by), 5, *(len(g.key) for g in report.groups)])
    click.echo(
        f"{report.by:<{width}} {'requests':>8} {'input':>12} {'output':>10} "
        f"{'cache read':>12} {'cache write':>11}  cost"
    )
    for g in (*report.groups, report.total):
        cost = format_cost(None if g.unpriced and not g.priced_usd else g.priced_usd, 4, g.unpriced)
        click.echo(
            f"{g.key:<{width}} {g.requests:>8} {g.input_tokens:>12} "
            f"{g.output_tokens:>10} {g.cache_read_tokens:>12} "
            f"{g.cache_write_tokens:>11}  {cost}"
        )


def _limit_rows(limits: Sequence[BudgetLimit], fmt: str) -> None:
    """The agent and user limits with what each spent (`--limits`), as `fmt`."""
    rows = [limit.to_json() for limit in limits]
    if fmt == "json":
        print_json({"limits": rows})
        return
    if fmt == "csv":
        import csv
        import sys

        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(_LIMIT_COLUMNS)
        for row in rows:
            out.writerow(["" if row[c] is None else row[c] for c in _LIMIT_COLUMNS])
        return
    if not rows:
        click.echo("no agent or user limit applies ([budgets.agents], [budgets.users])")
        return
    width = max(len(f"{x.kind} {x.name}") for x in limits)
    for x in limits:
        lim = x.limit
        tokens = f"{lim.tokens:,}" + (f" of {lim.max_tokens:,}" if lim.max_tokens else "")
        usd = f"${lim.usd:.4f}" + (f" of ${lim.max_usd:.4f}" if lim.max_usd else "")
        period = f"on {x.day}" if x.day else "in total"
        state = f"  REACHED ({lim.reached})" if lim.reached else ""
        click.echo(
            f"{x.kind + ' ' + x.name:<{width}}  {period:<13}  {tokens} tokens, {usd}  "
            f"{lim.where}{state}"
        )


_LIMIT_COLUMNS = (
    "kind",
    "name",
    "entry",
    "period",
    "day",
    "tokens",
    "max_tokens",
    "usd",
    "max_usd",
    "reached",
)


def _limits(db: str | None, agent: str | None, user: str | None) -> list[BudgetLimit]:
    """The limits of this directory's configuration and what each spent in the store (no
    store yet: nothing spent, and nothing is created)."""
    from ..execution import budget_limits, budget_limits_in

    if no_default_store(db):
        from ..config import load_config
        from ..store import memory_store

        budgets = load_config(Path.cwd()).budgets
        return budget_limits_in(memory_store(), budgets, agent=agent, user=user)
    rt = local_runtime(db, "wakeful usage --limits")
    try:
        return budget_limits(rt, agent=agent, user=user)
    finally:
        rt.close()


@click.command("usage")
@click.option(
    "--by",
    type=click.Choice(USAGE_BY),
    default=None,
    help="Group by root session (children counted in; the default), agent, model, UTC day or user.",
)
@click.option(
    "--since",
    "since",
    metavar="WHEN",
    help="Only requests since an age (30m, 24h, 7d, 2w) or an ISO date (UTC).",
)
@click.option(
    "--limits",
    is_flag=True,
    help="The agent and user budgets in force ([budgets.agents], [budgets.users]) and what "
    "each spent in its period, instead of the report.",
)
@click.option("--agent", metavar="NAME", help="With --limits: only this agent's limit.")
@click.option("--user", metavar="NAME", help="With --limits: only this user's limit.")
@format_option("text", "json", "csv")
@db_option
def usage(
    by: str | None,
    since: str | None,
    limits: bool,
    agent: str | None,
    user: str | None,
    fmt: str,
    db: str | None,
) -> None:
    """Tokens and cost of the recorded requests, grouped, with their total; or, with
    --limits, the agent and user budgets and what each spent."""
    from ..clock import SystemClock

    if limits:
        if by is not None or since is not None:
            raise UsageError("--limits shows each limit's own period: leave out --by and --since")
        _limit_rows(_limits(db, agent, user), fmt)
        return
    if agent is not None or user is not None:
        raise UsageError("--agent and --user pick a limit: use them with --limits")
    by = by or "session"
    start = None if since is None else since_ms(since, SystemClock().now_ms())
    if no_default_store(db):  # before the first run: nothing was spent, and nothing is created
        report = usage_report([], by, start)
    else:
        rt = local_runtime(db, "wakeful usage")
        try:
            report = usage_report(rt.reads.usage_records(start), by, start)
        finally:
            rt.close()
    if fmt == "json":
        print_json(report.to_json())
    elif fmt == "csv":
        _csv(report)
    else:
        _table(report)
