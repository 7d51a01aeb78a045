"""`wakeful usage`: tokens (input, output, cache read, cache write) and cost, grouped by root
session, agent, model, UTC day or user, as a table, JSON or CSV (`docs/spend.md`).

Every request's recorded usage counts once (`wakeful.store.usage_report`); a group with a
request whose model had no known price shows its cost as unknown, never as zero.
"""

from __future__ import annotations

import click

from ..runner import format_cost
from ..store import USAGE_BY, UsageReport, since_ms, usage_report
from ._common import db_option, format_option, local_runtime, no_default_store, print_json

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


@click.command("usage")
@click.option(
    "--by",
    type=click.Choice(USAGE_BY),
    default="session",
    show_default=True,
    help="Group by root session (children counted in), agent, model, UTC day or user.",
)
@click.option(
    "--since",
    "since",
    metavar="WHEN",
    help="Only requests since an age (30m, 24h, 7d, 2w) or an ISO date (UTC).",
)
@format_option("text", "json", "csv")
@db_option
def usage(by: str, since: str | None, fmt: str, db: str | None) -> None:
    """Tokens and cost of the recorded requests, grouped, with their total."""
    from ..clock import SystemClock

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
