"""The process-global coordinator: at most one local drain per session.

Explicit resumes join the active drain; wakes during a drain coalesce into one follow-up drain;
different sessions run concurrently as asyncio tasks; an interrupt stops local execution and
deletes no pending input. An interrupt that arrives between two turns of a drain is not lost:
the event stays set, so the next turn ends at once as `interrupted` without a provider request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import NotFoundError
from ..runner import RunContext
from ..store import ClaimToken, SqlStore
from ._drain import DrainOptions, DrainResult, drain


class SessionNotFoundError(NotFoundError):
    """The session to interrupt or wake does not exist."""


@dataclass
class _Active:
    task: asyncio.Task[list[DrainResult]]
    interrupt: asyncio.Event = field(default_factory=asyncio.Event)
    again: bool = False


class Coordinator:
    """Keyed by session id; see the module docstring."""

    def __init__(
        self,
        store: SqlStore,
        make_context: Callable[[str, ClaimToken, asyncio.Event], RunContext],
        options: DrainOptions | None = None,
    ) -> None:
        self.store = store
        self._make_context = make_context
        self.options = options or DrainOptions()
        self._active: dict[str, _Active] = {}

    def active(self) -> list[str]:
        """Session ids this process is driving right now."""
        return sorted(sid for sid, a in self._active.items() if not a.task.done())

    def wake(self, session_id: str) -> asyncio.Task[list[DrainResult]]:
        """Start a drain, or ask the running one to drain again when it ends (coalesced)."""
        current = self._active.get(session_id)
        if current is not None and not current.task.done():
            current.again = True
            return current.task
        entry = _Active(task=None)  # type: ignore[arg-type]
        entry.task = asyncio.ensure_future(self._run(session_id, entry))
        self._active[session_id] = entry
        return entry.task

    async def resume(self, session_id: str) -> list[DrainResult]:
        """Drive the session now, joining the active drain if there is one; wait for it."""
        return await self.wake(session_id)

    def interrupt(self, session_id: str) -> bool:
        """Hard-interrupt local execution; return whether something was running.

        Unknown session: `SessionNotFoundError`. Idle or driven elsewhere: a no-op (False).
        """
        if self.store.find_session(session_id) is None:
            raise SessionNotFoundError(f"no session {session_id}")
        current = self._active.get(session_id)
        if current is None or current.task.done():
            return False
        current.interrupt.set()
        return True

    async def _run(self, session_id: str, entry: _Active) -> list[DrainResult]:
        results: list[DrainResult] = []
        try:
            while True:
                entry.again = False
                ctx_factory = lambda token: self._make_context(session_id, token, entry.interrupt)  # noqa: E731
                results.append(await drain(self.store, session_id, ctx_factory, self.options))
                if not entry.again or entry.interrupt.is_set():
                    return results
        finally:
            if self._active.get(session_id) is entry:
                del self._active[session_id]

    async def wait_idle(self) -> None:
        """Wait until every local drain has finished."""
        while tasks := [a.task for a in self._active.values() if not a.task.done()]:
            await asyncio.gather(*tasks, return_exceptions=True)
