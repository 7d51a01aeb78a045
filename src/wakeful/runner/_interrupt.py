"""A turn's interrupt: an `asyncio.Event` that also tells the work it stops, without a task.

`until_interrupted` (`_stream.py`) awaits a step's stream and its single tool call in the turn's
own task and cancels that task where the work waits when the interrupt is set. With a plain
`asyncio.Event` that takes a waiter task per stream and per call (`interrupt.wait()` in a task
of its own, its callback cancelling the work), two tasks a step and the loop passes they take.
`Interrupt.set` calls what is watching instead (`watch`), each in the loop's next pass, as the
waiter's callback was: work that ends in the pass the interrupt is set in keeps its value.
The coordinator makes every drain's interrupt one (`RunContext`'s default is one too); an
`asyncio.Event` given instead is watched by a waiter task, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Interrupt(asyncio.Event):
    """An `asyncio.Event` whose `set` also calls the callbacks watching it (once each, in a
    later pass of the loop each watches from); set it, clear it and wait on it as on any
    event."""

    def __init__(self) -> None:
        super().__init__()
        self._watching: list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = []

    def set(self) -> None:
        """Set the event (waking its waiters) and schedule every watching callback once, on
        the loop it watches from (`set` may come from another thread, as an event's may);
        each is then no longer watching."""
        super().set()
        if self._watching:
            watching, self._watching = self._watching, []
            for loop, callback in watching:
                loop.call_soon_threadsafe(callback)

    def watch(self, callback: Callable[[], None]) -> None:
        """Call `callback` on the running loop when the event is set next (it is not set now:
        the caller checked)."""
        self._watching.append((asyncio.get_running_loop(), callback))

    def unwatch(self, callback: Callable[[], None]) -> None:
        """Stop watching with `callback` (nothing when it was called or never watched)."""
        if self._watching:  # empty once `set` took them
            self._watching = [w for w in self._watching if w[1] is not callback]


def on_interrupt(interrupt: asyncio.Event, callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback` in a later loop pass once `interrupt` is set (it is not set now); returns
    the function that stops watching. An `Interrupt` is watched without a task; any other
    event by a waiter task (`interrupt.wait()`), as before."""
    if isinstance(interrupt, Interrupt):
        interrupt.watch(callback)
        return lambda: interrupt.unwatch(callback)
    waiter: asyncio.Future[object] = asyncio.ensure_future(interrupt.wait())
    waiter.add_done_callback(lambda done: None if done.cancelled() else callback())

    def unwatch() -> None:
        waiter.cancel()

    return unwatch
