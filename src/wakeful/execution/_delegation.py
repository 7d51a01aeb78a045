"""How a child session was delegated, read from its `session.created` metadata.

Its own module so recovery (below the coordinator) and the `Children` delegator (above it) share
it without an import cycle.
"""

from __future__ import annotations

from ..events import SessionCreated, StoredEvent
from ..store import SqlStore


def delegation_of(store: SqlStore, session_id: str) -> str | None:
    """`"foreground"` or `"background"` for a child session, None for any other session."""
    row = store.find_session(session_id)
    if row is None or row.parent_id is None:
        return None
    [first] = store.events(session_id, limit=1)
    return delegation_from(row.parent_id, first)


def delegation_from(parent_id: str | None, first: StoredEvent | None) -> str | None:
    """`delegation_of` from a session's parent and first event, already read."""
    if parent_id is None or first is None:
        return None
    meta = first.event.metadata if isinstance(first.event, SessionCreated) else None
    value = (meta or {}).get("delegation")
    return value if isinstance(value, str) else None
