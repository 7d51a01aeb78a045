"""`wakeful session list|show|prune|archive|unarchive|delete|export|import`."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from ..errors import UsageError
from ..events import MessageAdded
from ..messages import dump_message, load_message
from ..runner._runs import run_records
from ..store import SessionRow
from ._common import db_option, format_option, iso, print_json, store_for


@click.group()
def session() -> None:
    """List, inspect and clean up sessions."""


def _row_json(row: SessionRow) -> dict[str, Any]:
    return row.to_json() | {"updated_at": iso(row.updated_ms), "created_at": iso(row.created_ms)}


@session.command("list")
@click.option("--no-roots", is_flag=True, help="Include child sessions.")
@click.option("--archived", is_flag=True, help="Only archived sessions.")
@click.option("--all", "all_", is_flag=True, help="Archived and not.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1))
@format_option("table", "json", default="table")
@db_option
def list_(no_roots: bool, archived: bool, all_: bool, limit: int, fmt: str, db: str | None) -> None:
    """Sessions, newest first (children hidden unless --no-roots)."""
    store = store_for(db)
    page = store.list_sessions(
        roots_only=not no_roots, archived=None if all_ else archived, limit=limit
    )
    store.close()
    if fmt == "json":
        print_json([_row_json(r) for r in page.sessions])
        return
    for r in page.sessions:
        flag = " [archived]" if r.archived else ""
        click.echo(f"{r.id}  {iso(r.updated_ms)}  {r.status:<11} {(r.title or '')[:60]}{flag}")


@session.command()
@click.argument("session_id")
@format_option("text", "json")
@db_option
def show(session_id: str, fmt: str, db: str | None) -> None:
    """A session: transcript, usage, children, state."""
    store = store_for(db)
    row = store.get_session(session_id)
    messages = store.messages(session_id)
    children = [r.id for r in store.list_sessions(roots_only=False, archived=None, limit=1000).sessions
                if r.parent_id == session_id]  # fmt: skip
    pending = store.pending(session_id)
    work = store.work_state(session_id)
    runs = run_records(store, session_id)
    store.close()
    if fmt == "json":
        print_json(_row_json(row) | {
            "messages": [json.loads(dump_message(m)) for m in messages],
            "children": children, "pending": [p.input_id for p in pending], "work_state": work,
            "runs": [r.to_json() for r in runs],
        })  # fmt: skip
        return
    click.echo(
        f"{row.id}  {row.title or ''}\nstatus {row.status}  model {row.model}  agent {row.agent}"
    )
    click.echo(f"usage {row.input_tokens} in / {row.output_tokens} out  ${row.cost_usd:.4f}")
    for m in messages:
        body = m.text() or ", ".join(b.type for b in m.blocks)
        click.echo(f"\n[{m.role}] {body}")
    if pending:
        click.echo(f"\npending inputs: {', '.join(p.input_id for p in pending)}")
    for r in runs:
        click.echo(f"run {r.id}: {r.outcome or r.status}, {r.steps} steps, "
                   f"{r.tokens_in} in / {r.tokens_out} out, {len(r.retries)} retries")  # fmt: skip


@session.command()
@click.option("--older-than", "days", type=click.FloatRange(min=0), required=True, metavar="DAYS")
@click.option("--archive", is_flag=True, help="Set the reversible archive marker.")
@click.option("--delete", is_flag=True, help="Delete irreversibly.")
@click.option("--yes", is_flag=True, help="Do not ask before deleting.")
@format_option("text", "json")
@db_option
def prune(days: float, archive: bool, delete: bool, yes: bool, fmt: str, db: str | None) -> None:
    """Sessions idle for DAYS: a preview, or --archive, or --delete."""
    if archive and delete:
        raise UsageError("choose --archive or --delete, not both")
    store = store_for(db)
    cutoff = int(time.time() * 1000 - days * 86_400_000)
    action = "archive" if archive else "delete" if delete else "preview"
    if delete and not yes:
        preview = store.prune(cutoff)
        if not sys.stdin.isatty():
            raise UsageError("--delete needs --yes when not on a terminal")
        click.confirm(f"delete {preview.sessions} sessions for good?", abort=True)
    counts = store.prune(cutoff, action)
    store.close()
    if fmt == "json":
        print_json(counts.to_json() | {"action": action})
        return
    verb = {"preview": "would prune", "archive": "archived", "delete": "deleted"}[action]
    click.echo(f"{verb} {counts.roots} sessions ({counts.children} child sessions, "
               f"{counts.events} events, {counts.messages} messages)")  # fmt: skip


def _set_archive(session_id: str, db: str | None, value: bool) -> None:
    store = store_for(db)
    store.set_archived(session_id, value)
    store.close()
    click.echo(f"{'archived' if value else 'unarchived'} {session_id}")


@session.command()
@click.argument("session_id")
@db_option
def archive(session_id: str, db: str | None) -> None:
    """Set the reversible archive marker."""
    _set_archive(session_id, db, True)


@session.command()
@click.argument("session_id")
@db_option
def unarchive(session_id: str, db: str | None) -> None:
    """Clear the archive marker."""
    _set_archive(session_id, db, False)


@session.command()
@click.argument("session_id")
@db_option
def delete(session_id: str, db: str | None) -> None:
    """Delete a session and its children for good."""
    store = store_for(db)
    counts = store.delete(session_id)
    store.close()
    click.echo(f"deleted {counts.sessions} sessions ({counts.events} events)")


@session.command()
@click.argument("session_id")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="File (default: stdout).")
@db_option
def export(session_id: str, output: str | None, db: str | None) -> None:
    """Export as JSONL: a header line, then one provider-neutral message per line."""
    store = store_for(db)
    row = store.get_session(session_id)
    lines = [json.dumps({"wakeful_export": 1, "session": row.to_json()})]
    lines += [dump_message(m) for m in store.messages(session_id)]
    store.close()
    text = "\n".join(lines) + "\n"
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


@session.command("import")
@click.argument("path", type=click.File("r", encoding="utf-8"))
@format_option("text", "json")
@db_option
def import_(path: Any, fmt: str, db: str | None) -> None:
    """Import a JSONL export as a new session; print its id."""
    lines = [ln for ln in path.read().splitlines() if ln.strip()]
    try:
        header = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError:
        header = {}
    if header.get("wakeful_export") != 1:
        raise UsageError(f"{path.name}: not a wakeful export (first line lacks wakeful_export: 1)")
    meta = header.get("session", {})
    messages = [load_message(ln) for ln in lines[1:]]
    store = store_for(db)
    row = store.create_session(
        title=meta.get("title"), agent=meta.get("agent"), model=meta.get("model"),
        metadata={"imported_from": meta.get("id")},
    )  # fmt: skip
    if messages:
        store.append(row.id, [MessageAdded(message=m) for m in messages])
    store.close()
    if fmt == "json":
        print_json({"id": row.id, "messages": len(messages)})
    else:
        click.echo(row.id)
