"""Appending events: the one write path. Locks the session, checks the claim, allocates gap-free
`seq`s, inserts events and their projections, bumps the session's change counter, notifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ClaimLostError, NotFoundError
from ..events import SessionEvent, StoredEvent, dump_event
from ._backend import Tx
from ._projections import project


@dataclass(frozen=True, slots=True)
class ClaimToken:
    """What a driver proves on every write: its token and fencing epoch (invariant 5)."""

    token: str
    epoch: int


def check_claim(tx: Tx, session_id: str, claim: ClaimToken) -> None:
    """Raise `ClaimLostError` unless `claim` is the session's live claim."""
    row = tx.one("SELECT token, epoch, released FROM claims WHERE session_id = ?", (session_id,))
    if row is None or row[0] != claim.token or row[1] != claim.epoch or row[2]:
        raise ClaimLostError(
            f"session {session_id}: this driver's claim (epoch {claim.epoch}) is gone"
        )


def append_events(
    tx: Tx,
    session_id: str,
    events: Sequence[SessionEvent],
    now_ms: int,
    claim: ClaimToken | None = None,
) -> list[StoredEvent]:
    """Append events to an existing session inside `tx`; return them as stored."""
    locked = tx.lock_session(session_id)
    if locked is None:
        raise NotFoundError(f"no session {session_id}")
    if claim is not None:
        check_claim(tx, session_id, claim)
    seq = int(locked[0])
    stored: list[StoredEvent] = []
    for event in events:
        seq += 1
        row = tx.one(
            "INSERT INTO events (session_id, seq, type, at_ms, data, epoch) VALUES (?, ?, ?, ?, ?, ?) "
            "RETURNING id",
            (session_id, seq, event.type, now_ms, dump_event(event), claim and claim.epoch),
        )
        assert row is not None
        project(tx, session_id, seq, event)
        stored.append(StoredEvent(int(row[0]), session_id, seq, now_ms, event))
    tx.run(
        "UPDATE sessions SET last_seq = ?, updated_ms = ? WHERE id = ?", (seq, now_ms, session_id)
    )
    tx.notify(session_id)
    return stored
