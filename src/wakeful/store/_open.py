"""Opening a store from a URL: a path means SQLite, `postgresql://` means PostgreSQL."""

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
