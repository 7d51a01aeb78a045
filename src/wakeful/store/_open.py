"""Opening a store from a URL: a path means SQLite, `postgresql://` means PostgreSQL, and
`SCHEME://...` a store backend an installed package registers under that scheme:

    [project.entry-points."wakeful.stores"]
    filemap = "wakeful_echo:open_filemap"

whose value is a callable `(url, *, clock) -> SqlStore` (over a `Backend` of its own, or a
`file_map_store` over a host's `FileMap`). The entry points are read only for a scheme that
is not built in (cold start).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .._defaults import SQLITE_BUSY_TIMEOUT_MS
from ..errors import UsageError
from ._encryption_state import wanted
from ._store import SqlStore

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ..clock import Clock
    from ..config import EncryptionConfig, StoreConfig
    from ._keys import KeyProvider


def default_db_path() -> Path:
    """The default SQLite file: `sessions.db` in the user data directory."""
    # Loaded only when no store is named (cold start).
    from pathlib import Path

    import platformdirs

    return Path(platformdirs.user_data_dir("wakeful")) / "sessions.db"


def resolve_db_url(url: str | None = None) -> str:
    """`url`, else `$WAKEFUL_DB`, else the default SQLite path."""
    return url or os.environ.get("WAKEFUL_DB") or str(default_db_path())


def open_store(
    url: str | None = None,
    *,
    clock: Clock | None = None,
    options: StoreConfig | None = None,
    encryption: EncryptionConfig | None = None,
) -> SqlStore:
    """Open (and migrate) the store at `url` (see `resolve_db_url`); `options` are the
    `[store]` timeouts of `wakeful.toml` (defaults when None; opening SQLite without them loads
    no configuration model, cold start), `encryption` its `[encryption]` keys (without them,
    the environment's, then `wakeful.toml`'s when the store is encrypted: docs/encryption.md)."""
    store = open_unattached(url, clock, options)
    try:
        asked = wanted(store.backend, encryption)  # (an unencrypted store: no `_encryption`)
        if asked is not None:
            from ._encryption import attach_wanted

            attach_wanted(store.backend, encryption, asked)
    except BaseException:
        store.close()
        raise
    return store


def open_unattached(
    url: str | None, clock: Clock | None = None, options: StoreConfig | None = None
) -> SqlStore:
    """`open_store` without its encryption attached (`wakeful store encrypt` opens so)."""
    target = resolve_db_url(url)
    if target.startswith(("http://", "https://")):
        raise UsageError(
            f"{target} is a wakeful server: this command drives sessions in-process and needs a "
            "SQLite path or a postgresql:// URL (use the server's API or `wakeful.client` instead)"
        )
    if target.startswith(("postgresql://", "postgres://")):
        from ._postgres import PostgresBackend

        return SqlStore(PostgresBackend(target, options=options), clock)
    scheme, sep, _rest = target.partition("://")
    if sep and scheme not in ("sqlite", "file") and "/" not in scheme:
        return _installed_backend(scheme, target, clock)
    from ._sqlite import SqliteBackend

    path = target.removeprefix("sqlite:///").removeprefix("sqlite://")
    busy_ms = SQLITE_BUSY_TIMEOUT_MS if options is None else options.busy_timeout_ms
    return SqlStore(SqliteBackend(path, busy_timeout_ms=busy_ms), clock)


MEMORY = ":memory:"


def memory_store(*, clock: Clock | None = None) -> SqlStore:
    """A new, empty store that lives in this process's memory (SQLite `:memory:`): every
    `SqlStore` method works on it, a `Runtime` can drive sessions on it, and nothing is kept
    when it is closed or the process ends (the seed's `createMemoryStore`). Each call opens a
    store of its own; `open_store(":memory:")` is the same."""
    return open_store(MEMORY, clock=clock)


STORE_ENTRY_POINTS = "wakeful.stores"


def _installed_backend(scheme: str, url: str, clock: Clock | None) -> SqlStore:
    """The store an installed package opens for `scheme://` URLs (`wakeful.stores`)."""
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=STORE_ENTRY_POINTS) if ep.name == scheme]
    if not found:
        raise UsageError(
            f"no store backend for {scheme}:// (a path or sqlite:// is SQLite, postgresql:// "
            f"is PostgreSQL; a package can add one through {STORE_ENTRY_POINTS} entry points)"
        )
    try:
        opener = found[0].load()
    except Exception as err:  # a broken package: one line, not a traceback
        raise UsageError(
            f"store backend {scheme} ({found[0].value}) cannot be loaded: "
            f"{type(err).__name__}: {err}"
        ) from None
    store = opener(url, clock=clock)
    if not isinstance(store, SqlStore):
        raise UsageError(f"store backend {scheme} ({found[0].value}) did not open a store")
    return store


# -- the commands, by store URL ---------------------------------------------------------------


def encrypt_store_at(
    url: str | None,
    settings: EncryptionConfig | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """`wakeful store encrypt`: open the store at `url` and seal it in place with the
    configured master key (`encrypt_store`); `UsageError` when no key is configured."""
    from ._encryption import encrypt_store
    from ._encryption_state import settings_keys

    master, keyring = settings_keys(settings)
    if master is None:
        raise UsageError(
            "encrypting a store needs a master key ($WAKEFUL_MASTER_KEY, "
            "$WAKEFUL_MASTER_KEY_FILE or [encryption] key_file; make one with "
            "`wakeful store new-key`)"
        )
    store = open_unattached(url)
    try:
        return encrypt_store(store.backend, master, keyring, progress)
    finally:
        store.close()


def rotate_key_at(
    url: str | None, new: KeyProvider, settings: EncryptionConfig | None = None
) -> int:
    """`wakeful store rotate-key`: open the store at `url` with its current master key and
    wrap its keys under `new` (`rotate_key`)."""
    from ._encryption import rotate_key

    store = open_store(url, encryption=settings)
    try:
        return rotate_key(store.backend, new)
    finally:
        store.close()
