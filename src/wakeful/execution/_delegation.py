"""How a child session was delegated, read from its `session.created` metadata.

Its own module so recovery (below the coordinator) and the `Children` delegator (above it) share
it without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..events import SessionCreated, StoredEvent
from ..store import LocalStore


@dataclass(frozen=True)
class ChildLineage:
    """What a child session's `session.created` recorded of where it comes from: its parent, the
    parent's turn and call that delegated to it, its depth (1: a top-level session's child) and
    its label. A later turn that resumes the child names its earlier turn in its run record
    (`resumed_from`, `runner/_runs.py`)."""

    parent_id: str
    parent_turn_id: str | None
    parent_call_id: str | None
    depth: int
    label: str | None
    delegation: str | None


def lineage_of(store: LocalStore, session_id: str) -> ChildLineage | None:
    """A child session's lineage; None for a session without a parent."""
    row = store.find_session(session_id)
    if row is None or row.parent_id is None:
        return None
    [first] = store.events(session_id, limit=1)
    meta = first.event.metadata if isinstance(first.event, SessionCreated) else None
    meta = meta or {}

    def text(key: str) -> str | None:
        value = meta.get(key)
        return value if isinstance(value, str) else None

    depth = meta.get("depth")
    return ChildLineage(
        row.parent_id,
        text("parent_turn_id"),
        text("parent_call_id"),
        depth if isinstance(depth, int) else 1,
        text("label"),
        text("delegation"),
    )


def delegation_of(store: LocalStore, session_id: str) -> str | None:
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
