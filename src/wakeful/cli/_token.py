"""`wakeful token create|list|revoke`: the users' tokens of a store that `wakeful serve`
accepts beside its operator tokens (docs/access.md). A token's text is printed once, by
`create`; the store keeps its SHA-256 only."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from ..errors import UsageError
from ._common import ID, TEXT, db_option, format_option, print_json, printable, require_store

if TYPE_CHECKING:
    from ..store import LocalStore, UserToken


@contextlib.contextmanager
def local_store(db: str | None, *, create: bool = False) -> Iterator[LocalStore]:
    """The store named by `--db` (a SQLite path or PostgreSQL URL, never a server), closed at
    the end; a SQLite file is created only with `create`."""
    from ..store import open_store

    if db and db.startswith(("http://", "https://")):
        raise UsageError(f"tokens live in the database; run this where it is, not via {db}")
    if not create:
        require_store(db)
    store = open_store(db)
    try:
        yield store
    finally:
        store.close()


def _when(ms: int | None) -> str:
    from ..store import utc_minute

    return "-" if ms is None else utc_minute(ms)


def _state(t: UserToken, now_ms: int) -> str:
    """`live`, `live until ...`, `expired ...` or `revoked ...`, as `token list` shows it."""
    if t.revoked_ms is not None:
        return "revoked " + _when(t.revoked_ms)
    if t.expires_ms is None:
        return "live"
    return ("expired " if t.expires_ms <= now_ms else "live until ") + _when(t.expires_ms)


def _line(t: UserToken, now_ms: int) -> str:
    label = f"  {printable(t.label)}" if t.label else ""
    made = f"created {_when(t.created_ms)}"
    return f"{t.id}  {t.user}  {','.join(t.scopes)}  {made}  {_state(t, now_ms)}{label}"


@click.group()
def token() -> None:
    """Users' tokens for `wakeful serve`: scoped, hashed at rest, revocable."""


@token.command("create")
@click.option("--user", "user", type=TEXT, required=True, help="The user (made on first use).")
@click.option(
    "--scope",
    "scope",
    type=TEXT,
    default="read",
    show_default=True,
    metavar="SCOPES",
    help="Comma-separated: read, drive, approve, admin, sensitive.",
)
@click.option("--label", "label", type=TEXT, default=None, help="A note to list it by.")
@click.option(
    "--expires",
    "expires",
    type=TEXT,
    default=None,
    help="Refused after this long: 30m, 24h, 7d (default: until revoked).",
)
@format_option("text", "json")
@db_option
def create(
    user: str, scope: str, label: str | None, expires: str | None, fmt: str, db: str | None
) -> None:
    """Make a token and print it: the only time it is shown."""
    from ..execution import parse_interval
    from ..store import check_user_name, parse_scopes

    scopes = parse_scopes(scope)
    check_user_name(user)
    ttl = None if expires is None else parse_interval(expires)
    with local_store(db, create=True) as store:
        now = store.clock.now_ms()
        until = None if ttl is None else now + ttl
        made, secret = store.access.create_token(user, scopes, label=label, expires_ms=until)
    if fmt == "json":
        print_json({**made.to_json(), "secret": secret})
        return
    click.echo(secret)
    click.echo(f"{_line(made, now)}  (shown once: the store keeps only its hash)", err=True)


@token.command("list")
@click.option("--user", "user", type=TEXT, default=None, help="Only this user's tokens.")
@format_option("text", "json")
@db_option
def list_(user: str | None, fmt: str, db: str | None) -> None:
    """Every token (never its text), revoked ones too."""
    with local_store(db) as store:
        found = store.access.tokens(user)
        now = store.clock.now_ms()
    if fmt == "json":
        print_json([t.to_json() for t in found])
        return
    if not found:
        click.echo("no tokens")
    for t in found:
        click.echo(_line(t, now))


@token.command("revoke")
@click.argument("token_id", type=ID, metavar="ID")
@format_option("text", "json")
@db_option
def revoke(token_id: str, fmt: str, db: str | None) -> None:
    """Revoke a token: a server refuses it from its next request on."""
    with local_store(db) as store:
        done = store.access.revoke_token(token_id)
    if fmt == "json":
        print_json(done.to_json())
        return
    click.echo(f"revoked {done.id} ({done.user})")
