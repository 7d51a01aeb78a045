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
from ._store import SqlStore

if TYPE_CHECKING:
    from pathlib import Path

    from ..clock import Clock
    from ..config import StoreConfig


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
    url: str | None = None, *, clock: Clock | None = None, options: StoreConfig | None = None
) -> SqlStore:
    """Open (and migrate) the store at `url` (see `resolve_db_url`); `options` are the
    `[store]` timeouts of `wakeful.toml` (defaults when None; opening SQLite without them loads
    no configuration model, cold start)."""
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
