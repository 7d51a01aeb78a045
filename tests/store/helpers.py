"""Small writes the store tests share."""

from __future__ import annotations

from collections.abc import Sequence

from wakeful.events import MessageAdded, StoredEvent
from wakeful.messages import Message
from wakeful.store import ClaimToken, SqlStore


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
