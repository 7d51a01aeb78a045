"""Small writes the store tests share."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import pytest

from wakeful.events import MessageAdded, StoredEvent
from wakeful.messages import Message
from wakeful.store import ClaimToken, SqlStore, _migrations, _search, _sqlite
from wakeful.store._migrations import Migration


def add_message(
    store: SqlStore,
    session_id: str,
    message: Message,
    *,
    turn_id: str | None = None,
    claim: ClaimToken | None = None,
) -> StoredEvent:
    """Append one transcript message (a `message.added`) and return it as stored."""
    return store.append(session_id, [MessageAdded(message=message, turn_id=turn_id)], claim)[0]


def recent_events(
    store: SqlStore, session_id: str, window: int, types: Sequence[str]
) -> list[StoredEvent]:
    """`SessionRead.recent_events` of one read."""
    with store.read(session_id) as r:
        return r.recent_events(window, types)


def as_of(patch: pytest.MonkeyPatch, backend: ModuleType, migrations: list[Migration]) -> None:
    """Make `backend` (`_sqlite` or `_postgres`) the code of an earlier schema: it knows only
    `migrations`. SQLite reads their numbers from `_schema_version` when opening and its
    scripts from `_migrations` only when one is to run; PostgreSQL has both in its list."""
    if backend is _sqlite:
        patch.setattr(_migrations, "MIGRATIONS", migrations)
        patch.setattr(_sqlite, "NUMBERS", tuple(n for n, *_ in migrations))
    else:
        patch.setattr(backend, "MIGRATIONS", migrations)


# How code before migration 32 wrote the search index and searched: no `search_indexed` on
# PostgreSQL, so a title's or a message's row always written and a search never refused.
INDEX_BEFORE_32 = {
    "sqlite": "INSERT INTO search_docs (session_id, seq, body) VALUES (?, ?, ?)",
    "postgres": "INSERT INTO search_docs (session_id, seq, tsv) VALUES (?, ?, wakeful_search_tsv(?))",
}


def index_before_32(patch: pytest.MonkeyPatch, insert: str | None = None) -> None:
    """Make the search index's writes and reads those of code before migration 32 (`insert`:
    PostgreSQL's statement, when older still)."""
    patch.setattr(
        _search, "_INSERT", {**INDEX_BEFORE_32, "postgres": insert or INDEX_BEFORE_32["postgres"]}
    )
    patch.setattr(_search, "SEARCH_ON", "SELECT 1")
