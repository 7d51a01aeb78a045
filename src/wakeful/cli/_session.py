"""`wakeful session list|show|prune|archive|unarchive|delete|export|import`."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from ..errors import UsageError
from ._common import (
    ID,
    check_text,
    db_option,
    existing_dir,
    format_option,
    iso,
    local_runtime,
    local_time,
    no_default_store,
    print_json,
    printable,
    store_for,
)
from ._grammar import session_first
from ._lazy import LazyGroup

if TYPE_CHECKING:
    from ..messages import Message
    from ..store import SessionRow


NO_SESSIONS = 'no sessions yet: `wakeful run "PROMPT"` or `wakeful chat` starts one'

# Subcommands in other modules, imported only when named (or listed by `--help`).
_LAZY = {
    "show": "._show",
    "search": "._search",
    "rewind": "._shaping",
    "unrevert": "._shaping",
    "artifacts": "._shaping",
    "meta": "._shaping",
    "rename": "._shaping",
}


@click.group(cls=LazyGroup, lazy=_LAZY)
def session() -> None:
    """List, inspect and clean up sessions."""


def row_json(row: SessionRow) -> dict[str, Any]:
    return row.to_json() | {"updated_at": iso(row.updated_ms), "created_at": iso(row.created_ms)}


@session.command("list")
@click.option("--children", is_flag=True, help="Include child sessions.")
@click.option("--no-roots", is_flag=True, hidden=True, help="The old name of --children.")
@click.option("--archived", is_flag=True, help="Only archived sessions.")
@click.option("--all", "all_", is_flag=True, help="Archived and not.")
@click.option("--agent", metavar="NAME", type=ID, help="Only sessions of this agent.")
@click.option(
    "--location",
    metavar="WHERE",
    default="any",
    show_default=True,
    help="`any`, `this` (this directory) or a directory: only sessions living there.",
)
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1))
@format_option("text", "json")
@db_option
def list_(
    children: bool,
    no_roots: bool,
    archived: bool,
    all_: bool,
    agent: str | None,
    location: str,
    limit: int,
    fmt: str,
    db: str | None,
) -> None:
    """Sessions, newest first (child sessions only with --children)."""
    where = listing_location(location)
    if no_default_store(db):  # before the first run: nothing to list, and nothing is created
        rows, summaries = [], {}
    else:
        store = store_for(db)
        try:
            rows = store.list_sessions(
                roots_only=not (children or no_roots),
                archived=None if all_ else archived,
                limit=limit,
                agent=agent,
                location=where,
            ).sessions
            summaries = store.session_summaries([r.id for r in rows])
        finally:
            store.close()
    if fmt == "json":
        print_json([row_json(r) | summaries[r.id].to_json() for r in rows])
        return
    if not rows:
        click.echo(NO_SESSIONS, err=True)
        return
    click.echo(f"{'ID':<28}  {'UPDATED':<16}  {'STATUS':<17} {'TURNS':>5}  {'MODEL':<24}  TITLE")
    for r in rows:
        summary = summaries[r.id]
        title = r.title or (f"“{summary.first_prompt}”" if summary.first_prompt else "(untitled)")
        click.echo(
            f"{r.id:<28}  {local_time(r.updated_ms)}  {r.status:<17} {summary.turns:>5}  "
            f"{printable(_cut(r.model or '-', 24)):<24}  "
            f"{printable(_cut(title, 50))}{_markers(r, summary.child_sessions)}"
        )


def listing_location(raw: str) -> str | None:
    """`--location`: None for `any`, this directory for `this`, else the directory named
    (absolute, resolved; it need not exist any more)."""
    from pathlib import Path

    check_text(raw, "--location", empty=False)
    if raw == "any":
        return None
    return str(Path.cwd().resolve() if raw == "this" else Path(raw).expanduser().resolve())


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _markers(row: SessionRow, children: int) -> str:
    """What sets a row apart from its look-alikes: forks, children, their parent, archive."""
    marks = []
    if row.forked_from:
        marks.append(f"⑂ fork of {row.forked_from[:12]}")
    if row.parent_id:
        marks.append(f"↳ child of {row.parent_id[:12]}")
    if children:
        marks.append(f"+{children} child session{'s' if children != 1 else ''}")
    if row.archived:
        marks.append("[archived]")
    if row.waiting_for:
        marks.append(f"[waiting for its location {printable(row.waiting_for)}]")
    return "".join(f"  {m}" for m in marks)


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
    rt = local_runtime(db, "pruning")
    cutoff = int(time.time() * 1000 - days * 86_400_000)
    action = "archive" if archive else "delete" if delete else "preview"
    try:
        if delete and not yes:
            preview = rt.prune(cutoff)
            if not sys.stdin.isatty():
                raise UsageError("--delete needs --yes when not on a terminal")
            click.confirm(f"delete {preview.sessions} sessions for good?", abort=True)
        counts = rt.prune(cutoff, action)
    finally:
        rt.close()
    if fmt == "json":
        print_json(counts.to_json() | {"action": action})
        return
    verb = {"preview": "would prune", "archive": "archived", "delete": "deleted"}[action]
    click.echo(
        f"{verb} {counts.roots} sessions ({counts.children} child sessions, "
        f"{counts.events} events, {counts.messages} messages)"
    )


def _set_archive(session_id: str, db: str | None, value: bool) -> None:
    store = store_for(db)
    session_id = store.resolve_session_id(session_id)
    store.set_archived(session_id, value)
    store.close()
    click.echo(f"{'archived' if value else 'unarchived'} {session_id}")


@session.command()
@session_first(dest="session_id")
@db_option
def archive(session_id: str, db: str | None) -> None:
    """Set the reversible archive marker."""
    _set_archive(session_id, db, True)


@session.command()
@session_first(dest="session_id")
@db_option
def unarchive(session_id: str, db: str | None) -> None:
    """Clear the archive marker."""
    _set_archive(session_id, db, False)


@session.command()
@session_first(dest="session_id")
@click.option("--yes", is_flag=True, help="Do not ask before deleting.")
@db_option
def delete(session_id: str, yes: bool, db: str | None) -> None:
    """Delete a session and its children for good (asks on a terminal; --yes skips)."""
    store = store_for(db)
    try:
        row = store.get_session(store.resolve_session_id(session_id))
        if not yes:
            if not sys.stdin.isatty():
                raise UsageError("session delete needs --yes when not on a terminal")
            title = printable((row.title or "")[:60])
            click.confirm(f"delete {row.id} ({title}) and its child sessions for good?", abort=True)
        from ..store import local_actor

        counts = store.delete(row.id, actor=local_actor())  # a server records its caller
    finally:
        store.close()
    click.echo(f"deleted {counts.sessions} sessions ({counts.events} events)")


@session.command()
@session_first("path", dest="session_id")
@click.option("--no-wake", is_flag=True, help="Only record the move; do not drive the session.")
@click.option("--input-id", metavar="ID", type=ID, help="Idempotency key: resending it is a no-op.")
@format_option("text", "json")
@db_option
def move(
    session_id: str, path: str, no_wake: bool, input_id: str | None, fmt: str, db: str | None
) -> None:
    """Move a session to the directory PATH: from its next idle boundary on, its tools work
    there and that workspace's instructions, configuration and permissions apply."""
    if db and db.startswith(("http://", "https://")):
        from ..client import Client

        with Client(db) as client:
            out = client.move(session_id, path, input_id=input_id, resume=not no_wake)
        where, iid = out["location"], out["input_id"]
    else:
        import asyncio

        from ..execution import Runtime

        rt = Runtime(db)
        try:
            session_id = rt.reads.resolve_session_id(session_id)
            sent = rt.move(session_id, path, input_id=input_id, resume=False)
        except BaseException:
            rt.close()
            raise
        where, iid = rt.reads.input(session_id, sent.input_id).payload["location"], sent.input_id

        async def wake() -> None:
            try:
                if not no_wake:
                    await rt.resume(session_id)
            finally:
                await rt.aclose()

        asyncio.run(wake())
    if fmt == "json":
        print_json({"session_id": session_id, "input_id": iid, "location": where})
    else:
        click.echo(f"move of {session_id} to {printable(str(where))} admitted ({iid})")


@session.command()
@session_first(dest="session_id")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="File (default: stdout).")
@click.option(
    "--to",
    "target",
    default="wakeful",
    show_default=True,
    metavar="FORMAT",
    help="wakeful, claude-code, codex, openai-agents, opencode or otel (docs/interchange.md).",
)
@click.option("--endpoint", metavar="URL", help="--to otel: send to this OTLP/HTTP collector.")
@click.option("--redact", is_flag=True, help="--to otel: leave out message and tool content.")
@db_option
def export(
    session_id: str,
    output: str | None,
    target: str,
    endpoint: str | None,
    redact: bool,
    db: str | None,
) -> None:
    """Export as JSONL: a header line, then one provider-neutral message per line (or, with
    --to, in another tool's format, or as OpenTelemetry spans: --to otel)."""
    from ..messages import dump_message

    if target == "otel":
        from ._interchange import export_otel

        export_otel(session_id, output, endpoint, redact, db)
        return
    if endpoint or redact:
        raise UsageError("--endpoint and --redact are options of --to otel")
    if target != "wakeful":
        from ._interchange import export_to

        export_to(target, session_id, output, db)
        return
    store = store_for(db)
    row = store.get_session(store.resolve_session_id(session_id))
    session_id = row.id
    lines = [json.dumps({"wakeful_export": 1, "session": row.to_json()})]
    lines += [dump_message(m) for m in store.messages(session_id)]
    store.close()
    text = "\n".join(lines) + "\n"
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def _read_export(raw: bytes, name: str) -> tuple[dict[str, Any], list[Message]]:
    """The session fields and messages of an export, the whole file checked before anything
    is written; a one-line `UsageError` naming the file and the line (as an editor numbers
    it) of the first problem: not UTF-8, not an export, not JSON, not a message, text no store
    can keep, a message over `MESSAGE_MAX_BYTES`, or a message id used twice."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{name}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start})"
        ) from None
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    try:
        header = json.loads(lines[0][1]) if lines else {}
    except (json.JSONDecodeError, RecursionError):
        header = {}
    meta = header.get("session") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or header.get("wakeful_export") != 1:
        raise UsageError(f"{name}: not a wakeful export (first line lacks wakeful_export: 1)")
    for key in ("title", "agent", "model"):
        check_text(meta.get(key), f"{name}: session {key}")
    messages: list[Message] = []
    first_line: dict[str, int] = {}
    problems: list[str] = []
    for number, line in lines[1:]:
        problem = _message_problem(line, messages)
        if problem is None and messages[-1].id in first_line:
            problem = f"message id {messages[-1].id} repeats line {first_line[messages[-1].id]}"
        if problem is not None:
            problems.append(f"{name} line {number}: {problem}")
        else:
            first_line[messages[-1].id] = number
    if problems:
        n = len(problems) - 1
        more = f" (and {n} more line{'s' if n > 1 else ''} with a problem)" if n else ""
        raise UsageError(problems[0] + more)
    return meta, messages


def _message_problem(line: str, messages: list[Message]) -> str | None:
    """Why one line of an export is not a message the store can keep (None: it is, and it is
    appended to `messages`)."""
    from ..errors import InvalidMessageError
    from ..messages import dump_message, message_from_dict
    from ..store import MESSAGE_MAX_BYTES

    size = len(line.encode("utf-8", errors="surrogatepass"))
    if size > MESSAGE_MAX_BYTES:
        return f"a message of {size} bytes is over the store's limit of {MESSAGE_MAX_BYTES}"
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        return f"not valid JSON: {err.msg} (column {err.colno})"
    except RecursionError:
        return "nested too deeply"
    try:
        message = message_from_dict(data)
        dump_message(message)  # a lone surrogate from a JSON escape does not encode
    except RecursionError:
        return "nested too deeply"
    except InvalidMessageError as err:
        return f"not a message: {err}"
    except ValueError as err:
        return f"not a storable message: {str(err).splitlines()[0]}"
    messages.append(message)
    return None


@session.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--location", metavar="DIR", help="Where the session lives (default: this directory)."
)
@click.option(
    "--from",
    "source",
    default="wakeful",
    show_default=True,
    metavar="FORMAT",
    help="wakeful, claude-code, codex, openai-agents or opencode (docs/interchange.md).",
)
@format_option("text", "json")
@db_option
def import_(
    paths: tuple[str, ...], location: str | None, source: str, fmt: str, db: str | None
) -> None:
    """Import a JSONL export as a new session living here (or at --location); print its id.
    With --from, import other tools' sessions (each file whole, the same file twice once)."""
    from ..events import MessageAdded

    if source != "wakeful":
        from ._interchange import import_files

        import_files(source, paths, location, fmt, db)
        return
    if len(paths) != 1:
        raise UsageError("session import takes one wakeful export at a time")
    place = existing_dir(location or ".", "--location")
    with click.open_file(paths[0], "rb") as path:
        meta, messages = _read_export(path.read(), "<stdin>" if paths[0] == "-" else path.name)
    rt = local_runtime(db, "importing a session", create=True)
    try:  # the session and its messages in one transaction: all of it or nothing
        row = rt.create_session(
            title=meta.get("title"),
            agent=meta.get("agent"),
            model=meta.get("model"),
            metadata={"imported_from": meta.get("id"), "workspace": place},
            location=place,
            events=[MessageAdded(message=m) for m in messages],
        )
    finally:
        rt.close()
    if fmt == "json":
        print_json({"id": row.id, "messages": len(messages)})
    else:
        click.echo(row.id)
