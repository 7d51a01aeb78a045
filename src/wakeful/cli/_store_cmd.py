"""`wakeful store new-key|encrypt|rotate-key`: encryption at rest of a local store
(docs/encryption.md). The master key comes from `$WAKEFUL_MASTER_KEY`,
`$WAKEFUL_MASTER_KEY_FILE` or `[encryption] key_file`; every mistake is one line.
`wakeful store search [on|off]`: the store's full-text index kept or dropped
(docs/search.md, "Without search")."""

from __future__ import annotations

import click

from ..config import load_config
from ._common import TEXT, db_option, require_store


@click.group()
def store() -> None:
    """A store's settings: encryption at rest (make a key, encrypt a store, rotate its key)
    and its full-text index (search)."""


@store.command("new-key")
def new_key() -> None:
    """Print a fresh random master key (base64 of 32 bytes) to keep in a file or a secret."""
    from ..store import new_master_key

    click.echo(new_master_key())


@store.command("encrypt")
@db_option
def encrypt(db: str | None) -> None:
    """Encrypt an existing store in place with the configured master key (resumable: run it
    again after an interruption). Stop the store's other processes first."""
    from ..store import encrypt_store_at

    require_store(db)
    done = encrypt_store_at(db, load_config().encryption)
    click.echo(f"encrypted: {done} sessions sealed")


@store.command("rotate-key")
@db_option
@click.option(
    "--new-key-file",
    "new_key_file",
    type=TEXT,
    required=True,
    metavar="PATH",
    help="File holding the new master key (the current one is the configured key).",
)
def rotate_key(db: str | None, new_key_file: str) -> None:
    """Wrap the store's keys under a new master key; the data is not rewritten. Afterwards,
    configure the new key everywhere the store is opened."""
    from pathlib import Path

    from ..errors import UsageError
    from ..store import parse_master_key, rotate_key_at

    require_store(db)
    try:
        text = Path(new_key_file).expanduser().read_text()
    except OSError as err:
        raise UsageError(f"new master key file {new_key_file}: {err.strerror or err}") from None
    new = parse_master_key(text, f"file {new_key_file}")
    count = rotate_key_at(db, new, load_config().encryption)
    click.echo(f"rotated: {count} data keys now wrapped by master key {new.key_id}")


@store.command("search")
@db_option
@click.argument("state", required=False, type=click.Choice(["on", "off"]))
def search(db: str | None, state: str | None) -> None:
    """Show whether the store keeps its full-text index, or turn it on or off for every
    process of the store. Off drops the index (a message then writes no index entry, and a
    search is refused); on fills it from the log again before it returns."""
    from ..store import open_store

    require_store(db)
    store = open_store(db, encryption=load_config().encryption)
    try:
        if state is None:
            click.echo("search: on" if store.search_enabled else "search: off")
            return
        changed = store.set_search(state == "on")
    finally:
        store.close()
    click.echo(f"search: {state}" + ("" if changed else " (it was already)"))
