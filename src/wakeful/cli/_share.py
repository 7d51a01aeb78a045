"""`wakeful share SESSION [--turn T] [--expires 24h]`, `wakeful share list [SESSION]`,
`wakeful share revoke ID`: read-only, expiring, revocable links to a session that a
`wakeful serve` of the same database opens without a token (docs/access.md, "Share links")."""

from __future__ import annotations

from typing import Any

import click

from ..errors import UsageError
from ._common import ID, TEXT, db_option, format_option, print_json
from ._grammar import TURN, TURN_HELP, resolve_turn, session_first, turn_ids
from ._token import _when, local_store

MAX_EXPIRES_MS = 90 * 86_400_000


class _ShareGroup(click.Group):
    """`share SESSION ...` is `share create SESSION ...`: a first word that names no
    subcommand is the session."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """The subcommand `args` name, `create` when the first names none."""
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["create", *args]
        return super().resolve_command(ctx, args)


@click.group(cls=_ShareGroup)
def share() -> None:
    """Read-only links to a session (or one turn) that open without a token."""


@share.command("create")
@session_first()
@click.option("--turn", "turn", type=TURN, default=None, help=f"Only this turn: {TURN_HELP}.")
@click.option(
    "--expires",
    "expires",
    type=TEXT,
    default="24h",
    show_default=True,
    help="How long it lasts: 30m, 24h, 7d (at most 90d).",
)
@click.option(
    "--url", "url", type=TEXT, default="", help="The server's address, to print the link whole."
)
@format_option("text", "json")
@db_option
def create(
    session: str, turn: str | None, expires: str, url: str, fmt: str, db: str | None
) -> None:
    """Make a link to SESSION and print it: the only time its secret is shown."""
    from ..clock import SystemClock
    from ..execution import parse_interval

    ttl = parse_interval(expires)
    if ttl > MAX_EXPIRES_MS:
        raise UsageError("a share link lasts at most 90d")
    with local_store(db) as store:
        sid = store.resolve_session_id(session)
        turn_id = None if turn is None else resolve_turn(turn_ids(store, sid), turn)[1]
        link, secret = store.access.create_share(
            sid, expires_ms=SystemClock().now_ms() + ttl, turn_id=turn_id, by="cli"
        )
    where = f"{url.rstrip('/')}/ui/share#{secret}"
    if fmt == "json":
        print_json({**link.to_json(), "secret": secret, "link": where})
        return
    click.echo(where)
    click.echo(f"{link.id}  expires {_when(link.expires_ms)} UTC  (shown once)", err=True)


@share.command("list")
@click.argument("ref", type=ID, required=False, metavar="[SESSION]")
@format_option("text", "json")
@db_option
def list_(ref: str | None, fmt: str, db: str | None) -> None:
    """Every share link (of SESSION when given), never their secrets."""
    with local_store(db) as store:
        sid = None if ref is None else store.resolve_session_id(ref)
        found = store.access.shares(sid)
    if fmt == "json":
        print_json([s.to_json() for s in found])
        return
    if not found:
        click.echo("no share links")
    for s in found:
        state = "revoked" if s.revoked_ms is not None else f"expires {_when(s.expires_ms)}"
        click.echo(f"{s.id}  {s.session_id}  {s.turn_id or 'whole session'}  {state}")


@share.command("revoke")
@click.argument("share_id", type=ID, metavar="ID")
@format_option("text", "json")
@db_option
def revoke(share_id: str, fmt: str, db: str | None) -> None:
    """Revoke a link: its page shows nothing more and a server ends its open streams."""
    with local_store(db) as store:
        done = store.access.revoke_share(share_id)
    out: dict[str, Any] = done.to_json()
    if fmt == "json":
        print_json(out)
        return
    click.echo(f"revoked {done.id} ({done.session_id})")
