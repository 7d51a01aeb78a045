"""The seam between the store's SQL and a database driver.

The store writes its SQL once, with `?` placeholders; a backend runs it in a transaction.
Invariant: a write transaction on one session is serialized against every other writer of that
session (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: `SELECT ... FOR UPDATE` on the session row via
`lock_session`), which is what makes per-session `seq` gap-free.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

Row = tuple[Any, ...]
Params = Sequence[Any]


class Tx(Protocol):
    """One open transaction."""

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """Run a query and return its first row, or None."""
        ...

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a query and return every row."""
        ...

    def run(self, sql: str, params: Params = ()) -> int:
        """Run a statement and return the number of rows it changed."""
        ...

    def lock_session(self, session_id: str) -> Row | None:
        """Lock a session row for this transaction; return (last_seq, root_id) or None."""
        ...

    def notify(self, session_id: str) -> None:
        """Tell followers in other processes that the session has new events (at commit)."""
        ...

    def row_lock(self, *, skip_locked: bool = False) -> str:
        """The clause that ends a SELECT locking its rows for this transaction.

        PostgreSQL: ``FOR UPDATE`` (``FOR UPDATE SKIP LOCKED`` to pass over rows another
        transaction holds, so concurrent callers take disjoint rows). SQLite: empty, because its
        write transaction already holds the database lock.
        """
        ...


class Backend(Protocol):
    """A database the store can use."""

    kind: str
    url: str

    def transaction(self, *, write: bool) -> AbstractContextManager[Tx]:
        """Open a transaction; commit when the block ends, roll back on an exception."""
        ...

    def wait_for_change(self, timeout_s: float) -> None:
        """Block until another writer may have committed something, or the timeout passes."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def iter_chunks(rows: Sequence[Row], size: int) -> Iterator[Sequence[Row]]:
    """Yield `rows` in slices of at most `size` (for bounded IN (...) lists)."""
    for start in range(0, len(rows), size):
        yield rows[start : start + size]
