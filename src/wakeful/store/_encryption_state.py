"""Whether an open has encryption to attach, decided without importing `_encryption` (an
unencrypted store opened without a key, the common case, never loads it: issue 36 item 6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._keys import KeyProvider, master_key_from

if TYPE_CHECKING:
    from ..config import EncryptionConfig
    from ._backend import Backend

ENCRYPTION_MIGRATION = 23  # the migration that adds the `encryption` table

Found = tuple[str, str] | None  # an encrypted store's (store id, state)
Wanted = tuple[KeyProvider | None, str | None, Found, bool]  # master, keyring, found, used


def state(backend: Backend) -> tuple[Found, bool]:
    """The store's (store id, state) when it is encrypted, and whether it holds a session."""
    with backend.transaction(write=False) as tx:
        # (a store held at an earlier migration by a test of upgrades has no such table)
        known = tx.one("SELECT 1 FROM schema_migrations WHERE version = ?", (ENCRYPTION_MIGRATION,))
        row = tx.one("SELECT store_id, state FROM encryption") if known else None
        used = tx.one("SELECT 1 FROM sessions LIMIT 1") is not None
    return (None if row is None else (str(row[0]), str(row[1]))), used


def settings_keys(settings: EncryptionConfig | None) -> tuple[KeyProvider | None, str | None]:
    """The master key and keyring path `settings` (else the environment) configure."""
    keyring = None if settings is None else settings.keyring
    return master_key_from(None if settings is None else settings.key_file), keyring


def wanted(backend: Backend, settings: EncryptionConfig | None) -> Wanted | None:
    """What `_encryption.attach` works with, or None when there is nothing to attach: a
    memory store (nothing of it outlives the process), or no key set and the store not
    encrypted."""
    if backend.url == ":memory:" or getattr(backend, "path", None) == ":memory:":
        return None
    master, keyring = settings_keys(settings)
    found, used = state(backend)
    if found is None and master is None:
        return None
    return master, keyring, found, used
