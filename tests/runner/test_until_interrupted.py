"""`until_interrupted`: a stream or a step's single tool call awaited in the turn's own task,
cut by the interrupt as a task of its own was, with nothing left behind on the task; the same
for a plain `asyncio.Event` (a waiter task) and a turn's `Interrupt` (no task at all)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import cast

import pytest

from wakeful.messages import Message, TextBlock
from wakeful.providers import Finish, ModelRequest, Provider, StreamEvent, TextDelta, Usage
from wakeful.runner._interrupt import Interrupt
from wakeful.runner._stream import stream_to_finish, until_interrupted


@pytest.fixture(params=[asyncio.Event, Interrupt], ids=["event", "interrupt"])
def event(request: pytest.FixtureRequest) -> type[asyncio.Event]:
    kind: type[asyncio.Event] = request.param
    return kind


async def test_the_value_comes_back_and_the_task_is_left_as_it_was(
    event: type[asyncio.Event],
) -> None:
    async def work() -> int:
        await asyncio.sleep(0)
        return 7

    assert await until_interrupted(event(), work()) == (7,)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_an_interrupt_set_before_runs_nothing(event: type[asyncio.Event]) -> None:
    ran: list[int] = []

    async def work() -> int:
        ran.append(1)
        return 1

    interrupt = event()
    interrupt.set()
    assert await until_interrupted(interrupt, work()) is None
    assert ran == []


@pytest.mark.parametrize("swallow", [False, True])
async def test_an_interrupt_cancels_the_work_where_it_waits(
    swallow: bool, event: type[asyncio.Event]
) -> None:
    """Cut mid-wait: the work sees the cancellation; None either way (also when it swallows
    the cancellation and returns), and the task is not left cancelling."""
    interrupt = event()
    seen: list[str] = []

    async def work() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            if not swallow:
                raise
        return "late"

    asyncio.get_running_loop().call_later(0.01, interrupt.set)
    assert await until_interrupted(interrupt, work()) is None
    assert seen == ["cancelled"]
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0.01)  # nothing cancels the task afterwards


async def test_an_interrupt_as_the_work_ends_leaves_no_cancel_behind(
    event: type[asyncio.Event],
) -> None:
    """The interrupt set in the same loop pass the work ends in: the value stands, and the
    waiter's callback, already scheduled, does not cancel the task afterwards."""
    interrupt = event()

    async def work() -> int:
        interrupt.set()  # the waiter wakes next pass, after `work` has returned
        return 3

    assert await until_interrupted(interrupt, work()) == (3,)
    for _ in range(3):
        await asyncio.sleep(0)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_a_cancellation_from_elsewhere_goes_through(event: type[asyncio.Event]) -> None:
    interrupt = event()

    async def work() -> int:
        await asyncio.sleep(10)
        return 1

    async def outer() -> tuple[int] | None:
        return await until_interrupted(interrupt, work())

    task = asyncio.ensure_future(outer())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_error_of_the_work_is_raised(event: type[asyncio.Event]) -> None:
    async def work() -> int:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await until_interrupted(event(), work())


async def test_an_interrupt_is_watched_without_a_task() -> None:
    """The turn's `Interrupt`: no task runs beside the work, and nothing watches it after."""
    interrupt = Interrupt()
    tasks: list[int] = []

    async def work() -> int:
        tasks.append(len(asyncio.all_tasks()))
        await asyncio.sleep(0)
        return 5

    assert await until_interrupted(interrupt, work()) == (5,)
    assert tasks == [1]
    assert interrupt._watching == []
    interrupt.set()  # nothing watches it any more: nothing is scheduled, nothing cancelled
    await asyncio.sleep(0)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_an_interrupt_set_from_another_thread_cuts_the_work() -> None:
    """`Interrupt.set` from a thread without a loop schedules the cut on the watching loop."""
    interrupt = Interrupt()
    seen: list[str] = []

    async def work() -> int:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return 1

    loop = asyncio.get_running_loop()
    loop.call_later(0.01, lambda: threading.Thread(target=interrupt.set).start())
    assert await until_interrupted(interrupt, work()) is None
    assert seen == ["cancelled"]


class _Closing:
    """A provider's stream that says when it was closed (its `finally`)."""

    def __init__(self) -> None:
        self.closed = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        try:
            yield TextDelta("hi")
            message = Message(role="assistant", blocks=(TextBlock(text="hi"),))
            yield Finish("stop", message, Usage(1, 1))
            yield TextDelta("never read")
        finally:
            self.closed = True


async def test_the_stream_is_closed_at_its_finish() -> None:
    """Closed before the finish comes back, in the caller's task: left to the garbage
    collector, the loop's finalizer closed it later in a task of its own."""
    provider = _Closing()
    request = ModelRequest(model="m", system="", messages=())
    deltas: list[StreamEvent] = []
    finish = await stream_to_finish(cast(Provider, provider), request, Interrupt(), deltas.append)
    assert finish is not None and finish.message.text() == "hi"
    assert provider.closed
    assert deltas == [TextDelta("hi")]
