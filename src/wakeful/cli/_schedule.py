"""`wakeful schedule add|list|show|pause|resume|rm`: recurring prompts fired by every running
`wakeful worker` (docs/schedules.md). Each command calls one public `Runtime` method."""

from __future__ import annotations

import click

from ..execution import Runtime, describe_schedule, parse_interval, schedule_time
from ..store import Schedule
from ._common import (
    ID,
    TEXT,
    check_text,
    db_option,
    format_option,
    no_default_store,
    print_json,
    printable,
    require_store,
)
from ._grammar import resolve_prefix


@click.group()
def schedule() -> None:
    """Recurring and one-shot prompts, fired once each by any running worker."""


def _grace(text: str) -> int:
    return 0 if text.strip() in ("0", "0s", "0ms") else parse_interval(text)


@schedule.command("add")
@click.argument("prompt", type=TEXT)
@click.option("--cron", "cron", type=TEXT, metavar="EXPR", help="Five-field cron expression.")
@click.option("--every", "every", type=TEXT, metavar="PERIOD", help="Interval: 30s, 5m, 2h, 1d.")
@click.option("--at", "at", type=TEXT, metavar="TIME", help="Once, at an ISO time.")
@click.option("--tz", "tz", type=TEXT, default="UTC", show_default=True, help="IANA time zone.")
@click.option(
    "--session",
    "session",
    type=ID,
    default=None,
    help="Target session (default: a new session per fire).",
)
@click.option("--name", "name", type=TEXT, default=None, help="A name to list it by.")
@click.option(
    "--missed",
    type=click.Choice(["skip", "once"]),
    default="skip",
    show_default=True,
    help="Fires missed in downtime: skip them, or fire once to catch up.",
)
@click.option(
    "--grace",
    "grace",
    type=TEXT,
    default="60s",
    show_default=True,
    help="How late a fire may still be taken as on time.",
)
@click.option("--queue", is_flag=True, help="Deliver as a queued input (default: steer).")
@click.option("--model", "model", type=TEXT, default=None, help="Model of the sessions it creates.")
@click.option("--agent", "agent", type=TEXT, default=None, help="Agent of the sessions it creates.")
@format_option("text", "json")
@db_option
def add(
    prompt: str,
    cron: str | None,
    every: str | None,
    at: str | None,
    tz: str,
    session: str | None,
    name: str | None,
    missed: str,
    grace: str,
    queue: bool,
    model: str | None,
    agent: str | None,
    fmt: str,
    db: str | None,
) -> None:
    """Add a schedule firing PROMPT by --cron, --every or --at (exactly one)."""
    check_text(prompt, "PROMPT", empty=False)
    grace_ms = _grace(grace)
    rt = Runtime(db, model=model, agent=agent)
    try:
        target = None if session is None else rt.reads.resolve_session_id(session)
        added = rt.add_schedule(
            prompt,
            cron=cron,
            every=every,
            at=at,
            timezone=tz,
            session_id=target,
            name=name,
            missed=missed,
            grace_ms=grace_ms,
            delivery="queue" if queue else "steer",
        )
    finally:
        rt.close()
    if fmt == "json":
        print_json(_json(added))
    else:
        click.echo(f"added {added.id}: {describe_schedule(added)}, next {_next(added)}")


def _json(s: Schedule) -> dict[str, object]:
    return {**s.to_json(), "every": describe_schedule(s), "next_fire": _iso(s.next_fire_ms, s)}


def _iso(ms: int | None, s: Schedule) -> str | None:
    return None if ms is None else schedule_time(ms, s.timezone)


def _next(s: Schedule) -> str:
    if not s.enabled:
        return "paused"
    return _iso(s.next_fire_ms, s) or "none (done)"


@schedule.command("list")
@format_option("text", "json")
@db_option
def list_(fmt: str, db: str | None) -> None:
    """Every schedule with its next fire time and last fire."""
    found: list[Schedule] = []
    if not no_default_store(db):  # before the first run there is nothing to list
        require_store(db)
        rt = Runtime(db)
        try:
            found = rt.schedules()
        finally:
            rt.close()
    if fmt == "json":
        print_json([_json(s) for s in found])
        return
    if not found:
        click.echo("no schedules")
    for s in found:
        target = s.session_id or "new session"
        last = "never" if s.last_fire is None else s.last_fire.outcome
        click.echo(
            f"{s.id}  {printable(s.name or s.prompt[:30])}  {describe_schedule(s)}  -> {target}  "
            f"next {_next(s)}  last {last}"
        )


def _one(action: str, schedule_id: str, fmt: str, db: str | None) -> None:
    require_store(db)
    rt = Runtime(db)
    try:  # a unique prefix of the id will do (`sch_` may be left out)
        schedule_id = resolve_prefix(
            [s.id for s in rt.schedules()], schedule_id, "schedule", "sch_"
        )
        if action == "pause":
            result: Schedule | None = rt.pause_schedule(schedule_id)
        elif action == "resume":
            result = rt.resume_schedule(schedule_id)
        elif action == "show":
            result = rt.schedule(schedule_id)
            fires = rt.schedule_fires(schedule_id)
        else:
            rt.delete_schedule(schedule_id)
            result = None
    finally:
        rt.close()
    if fmt == "json":
        if action == "show" and result is not None:
            print_json({**_json(result), "fires": [f.to_json() for f in fires]})
        else:
            print_json({"id": schedule_id, action: True} if result is None else _json(result))
        return
    if result is None:
        click.echo(f"deleted {schedule_id}")
    elif action == "show":
        click.echo(f"{result.id}  {describe_schedule(result)}  next {_next(result)}")
        for f in fires:
            click.echo(
                f"  {_iso(f.due_ms, result)}  {f.outcome}  {f.session_id or ''}  {f.error or ''}"
            )
    else:
        click.echo(f"{action}d {result.id}: next {_next(result)}")


def _id_command(action: str, doc: str) -> None:
    @schedule.command(action, help=doc)
    @click.argument("schedule_id", type=ID, metavar="SCHEDULE")
    @format_option("text", "json")
    @db_option
    def command(schedule_id: str, fmt: str, db: str | None) -> None:
        _one(action, schedule_id, fmt, db)


_id_command("show", "One schedule and its recent fires.")
_id_command("pause", "Stop a schedule firing until resumed.")
_id_command("resume", "Fire a paused schedule again from its next time after now.")
_id_command("rm", "Delete a schedule and its fire history (the sessions it made stay).")
