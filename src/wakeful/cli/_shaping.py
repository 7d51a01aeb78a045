"""`wakeful session rewind|unrevert|artifacts|meta|rename`: shaping a session after the fact.

Each command works on a local store (a path or a PostgreSQL URL) through the `Runtime`'s public
methods, or on a `wakeful serve` server (`--db http://...`, token `$WAKEFUL_SERVER_TOKEN`)
through `wakeful.client.Client`, printing the same thing either way; `--format json` prints one
JSON object. A user mistake, here or answered by the server, is one line and a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click
from pydantic import JsonValue

from ..errors import UsageError
from ._common import (
    ID,
    check_text,
    db_option,
    format_option,
    iso,
    print_json,
    printable,
    require_store,
)
from ._grammar import TURN, TURN_HELP, resolve_turn, session_first, turn_ids
from ._session import listing_location, session

if TYPE_CHECKING:  # `session list` loads this module; the runtime loads when a command runs
    from ..client import Client
    from ..execution import RewindResult, Runtime

T = TypeVar("T")


def _either(db: str | None, local: Callable[[Runtime], T], remote: Callable[[Client], T]) -> T:
    """Run `remote` with a client of the server `db` names (an `http(s)://` URL), else `local`
    with a runtime over an existing local store; close whichever was opened."""
    if db and db.startswith(("http://", "https://")):
        from ..client import Client

        with Client(db) as client:
            return remote(client)
    require_store(db)
    from ..execution import Runtime

    rt = Runtime(db)
    try:
        return local(rt)
    finally:
        asyncio.run(rt.aclose())


def _result_json(result: RewindResult) -> dict[str, Any]:
    """A local rewind's result in the API's shape (`RewindOut`): the fields and `warnings`."""
    return result.as_json() | {"warnings": result.warnings()}


def _print_result(out: dict[str, Any], fmt: str, verb: str) -> None:
    if fmt == "json":
        print_json(out)
        return
    click.echo(f"{verb} {out['session_id']}: {out['hidden']} message(s) (seq {out['seq']})")
    for path in out["files_restored"]:
        click.echo(f"  restored {printable(str(path))}")
    for line in out["warnings"]:
        click.echo(f"warning: {printable(str(line))}", err=True)
    if out["prompt"]:
        click.echo(f"the reverted prompt was:\n{printable(str(out['prompt']), lines=True)}")


@session.command()
@session_first(dest="session_id")
@click.option("--turn", "turn_id", type=TURN, help=f"Revert to just before this turn: {TURN_HELP}.")
@click.option(
    "--input", "input_id", type=ID, help="Revert to just before this input (or its id prefix)."
)
@click.option(
    "--message",
    "message_id",
    type=ID,
    help="Revert to just before this message (or its id prefix).",
)
@click.option("--files", is_flag=True, help="Also restore the files those turns changed.")
@click.option("--force", is_flag=True, help="Overwrite files changed since by anything else.")
@format_option("text", "json")
@db_option
def rewind(
    session_id: str,
    turn_id: str | None,
    input_id: str | None,
    message_id: str | None,
    files: bool,
    force: bool,
    fmt: str,
    db: str | None,
) -> None:
    """Revert a session to just before a turn (default: its newest), an input or a message.

    The later messages leave the conversation (the log keeps them) and the goal, plan, todos
    and instructions return to what they were; `unrevert` brings everything back until the
    next input. A session being driven is interrupted first.
    """

    def local(rt: Runtime) -> dict[str, Any]:
        sid = rt.reads.resolve_session_id(session_id)
        turn = None if turn_id is None else resolve_turn(turn_ids(rt.reads, sid), turn_id)[1]
        return _result_json(
            asyncio.run(
                rt.rewind(
                    sid,
                    turn_id=turn,
                    input_id=input_id,
                    message_id=message_id,
                    files=files,
                    force=force,
                )
            )
        )

    def remote(client: Client) -> dict[str, Any]:
        turn = None
        if turn_id is not None:
            turn = resolve_turn([r["id"] for r in client.turns(session_id)["turns"]], turn_id)[1]
        return client.rewind(
            session_id,
            turn_id=turn,
            input_id=input_id,
            message_id=message_id,
            files=files,
            force=force,
        )

    _print_result(_either(db, local, remote), fmt, "reverted")


@session.command()
@session_first(dest="session_id")
@click.option("--force", is_flag=True, help="Overwrite files changed since the rewind.")
@format_option("text", "json")
@db_option
def unrevert(session_id: str, force: bool, fmt: str, db: str | None) -> None:
    """Undo the session's rewind (possible until a new input is delivered)."""

    def local(rt: Runtime) -> dict[str, Any]:
        sid = rt.reads.resolve_session_id(session_id)
        return _result_json(asyncio.run(rt.unrevert(sid, force=force)))

    def remote(client: Client) -> dict[str, Any]:
        return client.unrevert(session_id, force=force)

    _print_result(_either(db, local, remote), fmt, "restored")


def _since(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise UsageError(
            f"bad --since {raw!r}: give an ISO time (2026-01-31T12:00:00+00:00)"
        ) from None
    if when.tzinfo is None:
        raise UsageError(f"bad --since {raw!r}: give a time zone (+00:00 or Z)")
    return int(when.timestamp() * 1000)


@session.command()
@session_first(session_required=False, dest="session_id")
@click.option("--kind", type=ID, help="Only artifacts of this kind (file, branch, commit, ...).")
@click.option("--since", help="Only artifacts updated at or after this ISO time.")
@click.option("--uri", type=ID, help="Reverse lookup: the sessions that produced this URI.")
@click.option(
    "--location",
    "where",
    metavar="DIR",
    help="Reverse lookup: what the sessions living in DIR (`this`: here) produced.",
)
@click.option(
    "--limit",
    default=100,
    show_default=True,
    type=click.IntRange(min=1, max=500),
    help="At most this many (the API's bound too).",
)
@format_option("text", "json")
@db_option
def artifacts(
    session_id: str | None,
    kind: str | None,
    since: str | None,
    uri: str | None,
    where: str | None,
    limit: int,
    fmt: str,
    db: str | None,
) -> None:
    """A session's artifacts (files, branches, commits, pull requests, links), newest first;
    with --uri and/or --location instead of a session, which sessions produced what."""
    lookup = uri is not None or where is not None
    if (session_id is None) != lookup:
        raise UsageError("give a session, or --uri / --location for a reverse lookup")
    since_ms = _since(since)
    location = None if where is None else listing_location(where)

    def local(rt: Runtime) -> list[dict[str, JsonValue]]:
        if lookup:
            found = rt.reads.find_artifacts(
                uri, kind=kind, since_ms=since_ms, location=location, limit=limit
            )
        else:
            sid = rt.reads.resolve_session_id(str(session_id))
            found = rt.reads.artifacts(sid, kind=kind, since_ms=since_ms, limit=limit)
        return [a.as_json() for a in found]

    def remote(client: Client) -> list[dict[str, JsonValue]]:
        if lookup:
            out = client.find_artifacts(
                uri, kind=kind, since_ms=since_ms, location=location, limit=limit
            )
        else:
            out = client.artifacts(str(session_id), kind=kind, since_ms=since_ms, limit=limit)
        return list(out["artifacts"])

    rows = _either(db, local, remote)
    if fmt == "json":
        print_json({"artifacts": rows})
        return
    if not rows:
        click.echo("no artifacts")
    for row in rows:
        updated = iso(int(str(row["updated_ms"])))
        click.echo(
            f"{row['session_id']}  {updated}  {row['kind']:<12}  "
            f"{printable(str(row['uri']))}  {printable(str(row['label']))}"
        )


def _json_value(raw: str) -> JsonValue:
    try:
        value: JsonValue = json.loads(raw)
    except json.JSONDecodeError:
        return raw  # a bare word is a string
    return value


@session.command()
@session_first(dest="session_id")
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a key (VALUE is JSON, or else a string). Repeatable.",
)
@click.option("--unset", "unsets", multiple=True, metavar="KEY", help="Remove a key. Repeatable.")
@format_option("text", "json")
@db_option
def meta(
    session_id: str, sets: tuple[str, ...], unsets: tuple[str, ...], fmt: str, db: str | None
) -> None:
    """Show a session's metadata, or merge changes into it (--set, --unset)."""
    patch: dict[str, JsonValue] = {}
    for item in sets:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"bad --set {item!r}: give KEY=VALUE")
        patch[key] = _json_value(value)
    for key in unsets:
        patch[key] = None

    def local(rt: Runtime) -> dict[str, JsonValue]:
        sid = rt.reads.resolve_session_id(session_id)
        return rt.update_metadata(sid, patch) if patch else rt.reads.metadata(sid)

    def remote(client: Client) -> dict[str, JsonValue]:
        out = client.update_metadata(session_id, patch) if patch else client.metadata(session_id)
        return dict(out["metadata"])

    data = _either(db, local, remote)
    if fmt == "json":
        print_json({"metadata": data})
        return
    for name, shown in sorted(data.items()):
        click.echo(f"{printable(name)} = {printable(json.dumps(shown))}")


@session.command()
@session_first("title", dest="session_id")
@format_option("text", "json")
@db_option
def rename(session_id: str, title: str, fmt: str, db: str | None) -> None:
    """Set a session's title (surrounding whitespace dropped; a blank title is refused)."""
    check_text(title, "the title")

    def local(rt: Runtime) -> dict[str, Any]:
        return rt.rename(rt.reads.resolve_session_id(session_id), title).to_json()

    def remote(client: Client) -> dict[str, Any]:
        return client.rename(session_id, title)

    row = _either(db, local, remote)
    if fmt == "json":
        print_json({"id": row["id"], "title": row["title"]})
        return
    click.echo(f"renamed {row['id']}: {printable(str(row['title']))}")
