"""Reading one session row and inserting a session: shared by `SqlStore` and retention.

The row's columns are `_records.row_cols`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..errors import ConflictError, NotFoundError
from ._append import append_events
from ._backend import Tx
from ._cipher import sealed, sealed_or_none
from ._records import SessionRow, row_cols, session_row

if TYPE_CHECKING:
    from ..events import SessionCreated


def get_row(tx: Tx, session_id: str) -> SessionRow | None:
    """The session's row as stored (see `SqlStore.find_session` for the row readers see)."""
    row = tx.one(f"SELECT {row_cols(tx.kind)} FROM sessions WHERE id = ?", (session_id,))
    return None if row is None else session_row(row)


def insert_session(tx: Tx, sid: str, created: SessionCreated, now: int) -> None:
    """Insert the row and its `session.created`. A child takes its parent's root and, like
    a fork, its origin's location unless the event names one (`docs/locations.md`)."""
    root = created.root_id or sid
    location = created.location
    origin = created.parent_id or created.forked_from
    if origin is not None and (location is None or created.parent_id is not None):
        found = tx.one("SELECT root_id, location FROM sessions WHERE id = ?", (origin,))
        if found is None:
            raise NotFoundError(f"no parent session {origin}")
        if created.parent_id is not None and created.root_id is None:
            root = found[0]
        location = location or found[1]
    inserted = tx.run(
        "INSERT INTO sessions (id, parent_id, root_id, forked_from, fork_seq, title, agent, "
        "model, created_ms, updated_ms, listed_ms, metadata, location) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (
            sid,
            created.parent_id,
            root,
            created.forked_from,
            created.fork_seq,
            sealed_or_none(tx.cipher, sid, created.title),
            created.agent,
            created.model,
            now,
            now,
            now,
            None
            if created.metadata is None
            else sealed(tx.cipher, sid, json.dumps(created.metadata)),
            location,
        ),
    )
    if inserted != 1:
        raise ConflictError(f"session {sid} already exists")
    event = created.model_copy(update={"root_id": root, "location": location})
    append_events(tx, sid, [event], now)
