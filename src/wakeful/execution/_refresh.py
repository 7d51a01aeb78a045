"""A drain's context kept current (issue 37 item 22): before each step and turn the runner asks
`RunContext.refresh`, which builds the context again when the configuration files of the
session's place were edited since it was read (`_place.is_current`: a few `stat` calls, no
file read) or when the session's row names another agent or model than the one the context was
built for (`Runtime.switch`, in this process or another); else it answers None and the turn
goes on as it was. One primary-key read per step, in a worker thread; a store fault while
reading keeps the context (the next step asks again).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..errors import StoreError
from ..runner import RunContext
from ..store import LocalStore
from ._off_loop import off_loop
from ._place import Place, is_current

Refresh = Callable[[], Awaitable[RunContext | None]]


def refresher(
    store: LocalStore,
    session_id: str,
    seen: tuple[str | None, str | None],
    place: Place,
    rebuild: Callable[[], RunContext],
) -> Refresh:
    """The `refresh` of a context built for the session's `(agent, model)` `seen` at `place`;
    `rebuild` builds the context anew (in a worker thread: it reads the store and the
    configuration)."""

    def stale() -> bool:
        if not is_current(place):
            return True
        row = store.get_session(session_id)
        return (row.agent, row.model) != seen

    async def refresh() -> RunContext | None:
        try:
            if not await off_loop(stale):
                return None
        except StoreError:
            return None
        return await off_loop(rebuild)

    return refresh
