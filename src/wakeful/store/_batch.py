"""Many sessions in one transaction: what a worker's batch recovery reads and writes.

A worker takes over a batch of orphaned claims in one transaction (`take_over_claims`). For
that batch, `recovery_views` reads what recovery decides from (transcript, tool calls, turns,
approval events, delegation) for every session in one read transaction, and `append_batch`
writes every session's healing and continuation events in one write transaction: one commit
per batch instead of several per session (docs/execution.md, "Scaling").

Invariant kept: each session's events are fenced by that session's own claim in the same
transaction (invariant 5); a session whose claim is gone is left out, never written. Sessions
are locked in id order, so two batches never wait on each other in a cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ClaimLostError, NotFoundError
from ._append import ClaimToken, append_events
from ._inbox import transcript_in
from ._reads import ToolCallRow, TurnRow, events_in, tool_calls_in, turns_in
from ._sessions import get_row

if TYPE_CHECKING:
    from ..clock import Clock
    from ..events import SessionEvent, StoredEvent
    from ..messages import Message
    from ._backend import Backend


@dataclass(frozen=True, slots=True)
class RecoveryView:
    """One session as recovery reads it, all from one snapshot: its transcript with each
    message's `seq`, its tool calls and turns (start order), its events of the requested
    types, its parent (None: top level) and its first event (`session.created`)."""

    messages: list[tuple[int, Message]]
    calls: list[ToolCallRow]
    turns: list[TurnRow]
    events: list[StoredEvent]
    parent_id: str | None
    created: StoredEvent | None


class BatchMixin:
    """Batch reads and writes of `SqlStore` (see the module docstring)."""

    backend: Backend
    clock: Clock

    def recovery_views(
        self, session_ids: Sequence[str], types: Sequence[str] = ()
    ) -> dict[str, RecoveryView]:
        """Each named session as recovery reads it (`RecoveryView`; `types` are the event
        types to read), in one read transaction; unknown sessions are left out."""
        out: dict[str, RecoveryView] = {}
        with self.backend.transaction(write=False) as tx:
            for sid in session_ids:
                row = get_row(tx, sid)
                if row is None:
                    continue
                first = events_in(tx, sid, limit=1)
                out[sid] = RecoveryView(
                    messages=transcript_in(tx, sid), calls=tool_calls_in(tx, sid),
                    turns=turns_in(tx, sid), events=events_in(tx, sid, types=types) if types else [],
                    parent_id=row.parent_id, created=first[0] if first else None,
                )  # fmt: skip
        return out

    def append_batch(
        self, batches: Sequence[tuple[str, Sequence[SessionEvent], ClaimToken]]
    ) -> set[str]:
        """Append each session's events, fenced by its claim, all in one transaction; return
        the sessions written. A session whose claim is gone (or that no longer exists) is left
        out; the others are written. Sessions are locked in id order."""
        written: set[str] = set()
        now = self.clock.now_ms()
        with self.backend.transaction(write=True) as tx:
            for sid, events, claim in sorted(batches, key=lambda b: b[0]):
                if not events:
                    continue
                try:
                    append_events(tx, sid, events, now, claim)
                except (ClaimLostError, NotFoundError):
                    continue  # checked before anything of it was sent: nothing to undo
                written.add(sid)
        return written
