"""Shared CLI plumbing: the store option, output formats, exit codes, JSON printing."""

from __future__ import annotations

import json
import sys
from typing import Any, cast

import click

from ..store import SqlStore, open_store

# Exit codes per turn outcome (documented in docs/cli.md).
EXIT_CODES = {"completed": 0, "failed": 1, "blocked": 3, "paused": 4, "interrupted": 130}
USAGE_EXIT = 2

db_option = click.option(
    "--db", "db", envvar="WAKEFUL_DB", default=None, metavar="URL",
    help="Store: a SQLite path or postgresql:// URL (default: sessions.db in the user data dir).",
)  # fmt: skip


def format_option(*choices: str, default: str = "text") -> Any:
    """A `--format` option with the given choices."""
    return click.option(
        "--format", "fmt", type=click.Choice(choices), default=default, show_default=True,
        help="Output format.",
    )  # fmt: skip


def store_for(db: str | None) -> SqlStore:
    """Open the store named by `--db` / `WAKEFUL_DB` / the default.

    An `http(s)://` URL names a `wakeful serve` server (token: `$WAKEFUL_SERVER_TOKEN`); its
    `RemoteStore` has the read, archive, delete and log methods these commands call, and
    raises a one-line `UsageError` for what only a local store does.
    """
    if db and db.startswith(("http://", "https://")):
        from ..client import RemoteStore

        return cast(SqlStore, RemoteStore(db))
    return open_store(db)


def print_json(value: Any) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(value, ensure_ascii=False, default=str))


def print_jsonl(value: Any) -> None:
    """Print one JSON line and flush (for followers)."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def iso(ms: int) -> str:
    """Epoch milliseconds as an ISO-8601 UTC timestamp."""
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="seconds")
