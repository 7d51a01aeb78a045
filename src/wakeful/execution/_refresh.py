"""A drain's context kept current (issue 37 item 22): before each step and turn the runner asks
`RunContext.refresh`, which reads the session's row and, when its agent or model is no longer
the one the context was built for (`Runtime.switch`, in this process or another), builds the
context again; else it answers None and the turn goes on as it was. One primary-key read per
step, in a worker thread; a store fault while reading keeps the context (the next step asks
again).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..errors import StoreError
from ..runner import RunContext
from ..store import LocalStore
from ._off_loop import off_loop

Refresh = Callable[[], Awaitable[RunContext | None]]


def refresher(
    store: LocalStore,
    session_id: str,
    seen: tuple[str | None, str | None],
    rebuild: Callable[[], RunContext],
) -> Refresh:
    """The `refresh` of a context built for the session's `(agent, model)` `seen`; `rebuild`
    builds the context anew (in a worker thread: it reads the store and the configuration)."""

    async def refresh() -> RunContext | None:
        try:
            row = await off_loop(store.get_session, session_id)
        except StoreError:
            return None
        if (row.agent, row.model) == seen:
            return None
        return await off_loop(rebuild)

    return refresh
