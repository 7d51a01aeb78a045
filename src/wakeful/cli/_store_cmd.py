"""`wakeful store new-key|encrypt|rotate-key`: encryption at rest of a local store
(docs/encryption.md). The master key comes from `$WAKEFUL_MASTER_KEY`,
`$WAKEFUL_MASTER_KEY_FILE` or `[encryption] key_file`; every mistake is one line."""

from __future__ import annotations

import click

from ..config import load_config
from ._common import TEXT, db_option, require_store


@click.group()
def store() -> None:
    """Encryption at rest of a local store: make a key, encrypt a store, rotate its key."""


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
