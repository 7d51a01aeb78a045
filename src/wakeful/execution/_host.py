"""The `Runtime`'s writes for hosts that keep sessions themselves (a server's `RemoteStore`
clients, an import): appending events, blobs, pruning, renaming (`docs/hosts.md`).

Invariant: a host's append never lands inside a driver's turn. It is written under a claim of
its own, taken for that one write like a drain's (`claims.acquire`, fenced, released at once), so
no driver can run meanwhile; it is refused while a driver holds the session or a crashed
driver's turn waits for recovery. Only the events that record content a host may bring are
accepted (`HOST_EVENT_TYPES`); what a driver writes (turns, tool calls, the inbox, receipts,
retries) and what has a checked operation of its own (metadata, extension state, artifacts,
rewinds) is refused with the operation to use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import ConflictError, UsageError
from ..store import PruneCounts, SessionRow, SqlStore, fence
from ._owner import current_owner

if TYPE_CHECKING:
    from ..events import SessionEvent, StoredEvent
    from ._coordinator import Coordinator
    from ._place import Place
    from ._toolbox import Toolbox

HOST_EVENT_TYPES = frozenset({"message.added", "work_state.updated", "usage.recorded"})


class HostMixin:
    """Appends, blobs, pruning and renaming of `Runtime` (see the module docstring)."""

    store: SqlStore
    actor: str  # `Runtime.actor`
    coordinator: Coordinator
    toolbox: Toolbox

    if TYPE_CHECKING:  # the `Runtime`'s own

        def place(self, location: str | None) -> Place: ...
        def check_model(self, spec: str, place: Place | None = None) -> None: ...

    def append_events(
        self, session_id: str, events: Sequence[SessionEvent], *, blobs: Sequence[bytes] = ()
    ) -> list[StoredEvent]:
        """Append a host's `events` (of `HOST_EVENT_TYPES`; `UsageError` names any other) and
        store `blobs` with them, in one transaction under a claim of this call's own.
        `ConflictError` while a driver holds the session or a turn is unfinished; nothing is
        written then."""
        refused = sorted({e.type for e in events} - HOST_EVENT_TYPES)
        if refused:
            raise UsageError(
                f"a host may append {', '.join(sorted(HOST_EVENT_TYPES))} events, not "
                f"{', '.join(refused)} (a driver writes those, or they have an operation of "
                "their own: prompt, rewind, metadata, extension state, artifacts)"
            )
        if not events:
            raise UsageError("nothing to append")
        if self.store.current_claim(session_id) is not None:
            raise ConflictError(
                f"session {session_id} is being driven, or was left by a driver that stopped: "
                "wait, or resume or interrupt it first"
            )
        lease_ms = self.coordinator.options.lease_ms
        claim = self.store.claims.acquire(session_id, current_owner(), lease_ms)  # NotFoundError
        if claim is None:
            raise ConflictError(f"session {session_id} is being driven: wait, or interrupt it")
        try:
            if any(t.status == "running" for t in self.store.turns(session_id)):
                raise ConflictError(
                    f"session {session_id} has an unfinished turn: resume or interrupt it first"
                )
            return self.store.append(session_id, events, fence(claim), blobs=blobs)
        finally:
            self.store.claims.release(claim)

    def put_blob(self, data: bytes, session_id: str | None = None) -> str:
        """Store bytes once by SHA-256 and return the digest; with a session, it references
        the blob (so a prune or delete keeps it as long as the session does)."""
        return self.store.put_blob(data, session_id)

    def prune(
        self, older_than_ms: int, action: str = "preview", *, actor: str | None = None
    ) -> PruneCounts:
        """Root sessions idle since before `older_than_ms` and their children: `preview`
        (counts, nothing written), `archive` or `delete` (see `SqlStore.prune`; a deleted
        tree's tombstone names `actor`, default this runtime's)."""
        return self.store.prune(older_than_ms, action, actor=actor or self.actor)

    def rename(self, session_id: str, title: str) -> SessionRow:
        """Set the session's title (a recorded `session.updated`, surrounding whitespace
        dropped); return its row. `UsageError` for a title that is empty or blank."""
        from ..events import SessionUpdated

        clean = title.strip()
        if not clean:
            raise UsageError("the title is empty")
        self.store.get_session(session_id)  # NotFoundError before anything is written
        self.store.append(session_id, [SessionUpdated(title=clean)])
        return self.store.get_session(session_id)

    def switch(
        self, session_id: str, *, model: str | None = None, agent: str | None = None
    ) -> SessionRow:
        """Run the session with another model or agent from its next turn (a recorded
        `session.updated`; `wakeful chat`'s `/model` and `/agent`). Both are checked at the
        session's location first: a model that cannot be built, an unknown agent, is a
        `UsageError` and nothing is written. Returns the session's row."""
        from ..events import SessionUpdated
        from ..runner import resolve_agent

        if model is None and agent is None:
            raise UsageError("give a model or an agent to switch to")
        row = self.store.get_session(session_id)  # NotFoundError before anything is written
        place = self.place(row.location)
        if model is not None:
            self.check_model(model, place)
        if agent is not None:
            resolve_agent(agent, place.config, list(self.toolbox.registered))
        self.store.append(session_id, [SessionUpdated(model=model, agent=agent)])
        return self.store.get_session(session_id)
