"""`opening_in`: what a turn reads about its session before its first step, in one call.

A turn starts by reading its approval log, its scheduled retry, its work state, the newest
`compaction.tail`, the live compactions (where the active history starts) and the recent
`usage.recorded` events. Read one by one that was six store calls (six thread hops for a
driver, six round trips on PostgreSQL); here it is one call, and on PostgreSQL one round
trip (the statements are pipelined: `Backend.transaction(batched=True)`), a second one only
when the session has compactions whose summaries must be checked for visibility.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import NotFoundError
from ._cipher import opened
from ._reads import EVENT_COLS, RETRY_SQL, RetryState, retry_state_row, stored_event
from ._records import last_seq_sql
from ._rewind import visible_compactions
from ._transcript import transcript_from, transcript_query
from ._typed_events import typed, types_in

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..events import StoredEvent
    from ..messages import Message
    from ._backend import Pending, Tx

_TAIL = "compaction.tail"
_ENDED = "compaction.ended"
_USAGE = "usage.recorded"


@dataclass(frozen=True, slots=True)
class TurnOpening:
    """A session's state at a turn's start (see the module docstring), each part as the
    single read of it would return it."""

    approvals: list[StoredEvent]  # events of the requested approval types, oldest first
    retry: RetryState | None  # `retry_state`
    work: dict[str, JsonValue]  # `work_state`
    tails: list[StoredEvent]  # the `compaction.tail` events, oldest first
    compactions: list[StoredEvent]  # `live_compactions`
    usage: list[StoredEvent]  # `recent_events(window, ["usage.recorded"])`
    # The whole transcript, read with the rest when asked (`history=True`) and the session
    # has no compaction (its active history then starts at 0); None: not read.
    history: list[tuple[int, Message]] | None = None


def opening_in(
    tx: Tx,
    session_id: str,
    approval_types: Sequence[str],
    usage_window: int,
    *,
    history: bool = False,
) -> TurnOpening:
    """The session's `TurnOpening` read in `tx` (batched: its statements are sent together):
    events of `approval_types`, the `usage.recorded` events among its newest `usage_window`,
    and the rest as described there; `NotFoundError` if there is no such session. With
    `history`, the transcript's statements go with them, guarded: they answer for a session
    without compactions (`TurnOpening.history`), whose active history starts at 0, and the
    first step's history read is in the opening's round trip."""
    return send_opening(tx, session_id, approval_types, usage_window, history=history).read()


def send_opening(
    tx: Tx,
    session_id: str,
    approval_types: Sequence[str],
    usage_window: int,
    *,
    history: bool = False,
) -> SentOpening:
    """Send `opening_in`'s statements (with `history`, the guarded transcript's too) and read
    nothing yet (`SentOpening.read` does): the openings of many sessions sent first travel
    together (one round trip on PostgreSQL)."""
    kinds = (*approval_types, _TAIL, _ENDED)
    cols = ", ".join(f"e.{c}" for c in EVENT_COLS.split(", "))
    logged = tx.query(
        f"SELECT {EVENT_COLS}, type FROM events WHERE session_id = ? "
        f"AND {types_in(kinds)} ORDER BY seq",
        (session_id, *kinds),
    )
    usage = tx.query(  # as `recent_events` (by key): the session's row answers for no event
        f"SELECT {cols} FROM sessions s LEFT JOIN event_log e ON e.sk = s.k "
        f"AND e.seq > (SELECT {last_seq_sql(tx.kind, 'w')} FROM sessions w WHERE w.id = ?) - ? "
        f"AND e.type = ? AND {typed('e.type')} WHERE s.id = ? ORDER BY e.seq",
        (session_id, usage_window, _USAGE, session_id),
    )
    retry = tx.query(RETRY_SQL, (session_id,))
    work = tx.query(
        "SELECT kind, value FROM work_state WHERE session_id = ? ORDER BY kind",
        (session_id,),
    )
    transcript = transcript_query(tx, session_id, uncompacted=True) if history else None
    return SentOpening(tx, session_id, logged, usage, retry, work, transcript)


@dataclass(frozen=True, slots=True)
class SentOpening:
    """One session's opening statements, sent (`send_opening`)."""

    tx: Tx
    session_id: str
    logged: Pending
    usage: Pending
    retry: Pending
    work: Pending
    transcript: Pending | None = None  # (`transcript_query`, uncompacted)

    def read_uncompacted(self) -> TurnOpening | None:
        """`read`, or None for a session with a compaction: the visible ones are a read of
        their own in the transaction (`visible_compactions`), which may have ended (a unit's
        last read, answered with its commit: `SessionWrite.opening`)."""
        if any(str(row[4]) == _ENDED for row in self.logged.all()):
            return None
        return self.read()

    def read(self) -> TurnOpening:
        """The `TurnOpening` they answer; `NotFoundError` if there is no such session."""
        session_id = self.session_id
        usage_rows = self.usage.all()
        if not usage_rows:
            raise NotFoundError(f"no session {session_id}")
        rows = self.logged.all()
        r = self.retry.one()
        work_rows = self.work.all()
        approvals: list[StoredEvent] = []
        tails: list[StoredEvent] = []
        ended: list[StoredEvent] = []
        for row in rows:
            kind = str(row[4])
            into = ended if kind == _ENDED else tails if kind == _TAIL else approvals
            into.append(stored_event(session_id, row))
        messages = None
        if self.transcript is not None:  # (read even when a compaction emptied it: sent)
            messages = transcript_from(self.tx, session_id, self.transcript)
            messages = None if ended else messages
        compactions = visible_compactions(self.tx, session_id, ended) if ended else []
        state = retry_state_row(r)
        return TurnOpening(
            approvals=approvals,
            retry=state,
            work={kind: json.loads(opened(value)) for kind, value in work_rows},
            tails=tails,
            compactions=compactions,
            usage=[stored_event(session_id, u) for u in usage_rows if u[0] is not None],
            history=messages,
        )
