"""`InterruptMixin`: whether a session is being driven, here or elsewhere (`busy`), and the
hard interrupt of its turn (`interrupt`, and `ainterrupt` from the event loop): a durable
`session.interrupt_requested` that any process's driver sees, and a local drain stopped at once.
"""

from __future__ import annotations

from ..events import InterruptRequested
from ..store import LocalStore
from ._coordinator import Coordinator, SessionNotFoundError
from ._off_loop import off_loop


class InterruptMixin:
    """Interrupts of `Runtime` (see the module docstring)."""

    store: LocalStore
    coordinator: Coordinator
    actor: str  # who a call that names nobody is recorded as (`Runtime.actor`)

    def busy(self, session_id: str) -> bool:
        """Whether the session is being driven: a drain of this process, or a live claim of
        another (`LocalStore.claims.is_live`). `SessionNotFoundError` if there is no session."""
        if self.store.find_session(session_id) is None:
            raise SessionNotFoundError(f"no session {session_id}")
        return session_id in self.coordinator.active() or self.store.claims.is_live(session_id)

    def interrupt(self, session_id: str, *, actor: str | None = None) -> bool:
        """Hard-interrupt the session's turn, here or in whichever process drives it.

        Writes a durable `session.interrupt_requested`, announced to the other processes
        (PostgreSQL: their drivers hear it at once; SQLite: within their poll interval), and
        stops a local drain at once. Returns whether one ran here. On an
        idle session (`busy` is false) nothing is written and nothing happens: an interrupt
        stops a turn, it is never kept for a later one. The request names `actor` (who
        asked; default: this runtime's).
        """
        if not self.busy(session_id):
            return False
        asked = InterruptRequested(actor=actor or self.actor)
        [request] = self.store.append(session_id, [asked])
        self.store.feed.announce_interrupt(session_id, request.id)
        return self.coordinator.interrupt(session_id, request.id)

    async def ainterrupt(self, session_id: str, *, actor: str | None = None) -> bool:
        """`interrupt` from the event loop that drives this process's sessions: its store
        calls in a worker thread (`off_loop`), the local drain stopped on the loop."""
        if not await off_loop(self.busy, session_id):
            return False
        asked = InterruptRequested(actor=actor or self.actor)
        [request] = await off_loop(self.store.append, session_id, [asked])
        self.store.feed.announce_interrupt(session_id, request.id)  # (hands it over, no I/O)
        return self.coordinator.interrupt(session_id, request.id)
