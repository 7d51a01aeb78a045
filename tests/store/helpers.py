"""Small writes the store tests share."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import pytest

from wakeful.events import MessageAdded, StoredEvent
from wakeful.messages import Message
from wakeful.store import ClaimToken, SqlStore, _migrations, _sqlite
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
