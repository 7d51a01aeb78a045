"""Lifecycle hooks: typed callables a host registers on a `Runtime` (`runtime.hooks.on`).

The invariant: **a hook never touches the turn.** A turn publishes what happens (the live
events of its port); the runtime turns each into a `HookEvent` and queues it; one dispatcher
task per event loop calls the hooks in order, after the fact. So a hook that raises is logged
and skipped, a slow hook delays later hooks but never the turn or its commits (sync hooks run
in a worker thread, async hooks on the loop, each bounded by `timeout_s`), and a queue that
fills (hooks far slower than the events) drops events with a warning instead of growing.
Nothing a hook does is durable, and durability never waits for a hook (`docs/hooks.md`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, get_args

from pydantic import JsonValue

from ..errors import UsageError
from ..runner import LiveEvent

log = logging.getLogger("wakeful.hooks")

HookKind: TypeAlias = Literal[
    "session_start",
    "session_end",
    "turn_start",
    "turn_end",
    "step_start",
    "step_end",
    "step_done",
    "compaction_start",
    "compaction_progress",
    "compaction_end",
    "pairing_repair",
    "retry_scheduled",
    "tool_start",
    "tool_end",
    "input_admitted",
    "input_delivered",
    "metadata_updated",
    "extension_state_set",
]
HOOK_KINDS: tuple[str, ...] = get_args(HookKind)

# A live event's kind -> the hook it fires (compaction goes by its phase, below).
_FROM_LIVE: Mapping[str, HookKind] = {
    "session_start": "session_start",
    "session_end": "session_end",
    "turn_start": "turn_start",
    "turn_end": "turn_end",
    "step_start": "step_start",
    "step_end": "step_end",
    "step_done": "step_done",
    "pairing_repair": "pairing_repair",
    "retry": "retry_scheduled",
    "tool_start": "tool_start",
    "tool_end": "tool_end",
    "input_delivered": "input_delivered",
}
_COMPACTION: Mapping[str, HookKind] = {
    "start": "compaction_start",
    "progress": "compaction_progress",
    "end": "compaction_end",
    "aborted": "compaction_end",
    "failed": "compaction_end",
}


@dataclass(frozen=True, slots=True)
class HookEvent:
    """One lifecycle event of a session; `data` depends on `kind` (`docs/hooks.md` lists it)."""

    kind: HookKind
    session_id: str
    data: Mapping[str, JsonValue] = field(default_factory=dict)
    at_ms: int = 0


Hook: TypeAlias = Callable[[HookEvent], None] | Callable[[HookEvent], Awaitable[None]]


def hook_event(live: LiveEvent, at_ms: int) -> HookEvent | None:
    """The hook event a live event fires, if any (text deltas fire none)."""
    if live.kind == "compaction":
        phase = live.data.get("phase")
        kind = _COMPACTION.get(phase) if isinstance(phase, str) else None
        if kind is None:
            return None
        data = dict(live.data)
        data["reason"] = data.pop("trigger", None)  # auto, overflow, manual or idle
        if kind == "compaction_end":
            data["outcome"] = "compacted" if phase == "end" else phase
        return HookEvent(kind, live.session_id, data, at_ms)
    mapped = _FROM_LIVE.get(live.kind)
    return None if mapped is None else HookEvent(mapped, live.session_id, live.data, at_ms)


class Hooks:
    """The hooks registered on one runtime, and their dispatcher (see the module docstring)."""

    def __init__(self, *, timeout_s: float = 5.0, max_queued: int = 10_000) -> None:
        self.timeout_s = timeout_s
        self.max_queued = max_queued
        self.dropped = 0  # events dropped because the queue was full
        self._hooks: dict[str, list[Hook]] = {}
        self._queue: deque[HookEvent] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._idle: asyncio.Event | None = None

    def on(self, kind: HookKind | Literal["*"], hook: Hook) -> Callable[[], None]:
        """Call `hook` (sync or async) for every event of `kind` ("*": every kind), after the
        fact and in order; returns a function that unregisters it."""
        if kind != "*" and kind not in HOOK_KINDS:
            raise UsageError(f"unknown hook {kind!r}; hooks are: {', '.join(HOOK_KINDS)}")
        if not callable(hook):
            raise UsageError(f"a hook must be callable, not {type(hook).__name__}")
        self._hooks.setdefault(kind, []).append(hook)

        def off() -> None:
            registered = self._hooks.get(kind, [])
            if hook in registered:
                registered.remove(hook)
            if not registered:  # no kind without hooks: `emit_live` looks at `_hooks` alone
                self._hooks.pop(kind, None)

        return off

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def emit(self, event: HookEvent) -> None:
        """Queue `event` for its hooks; never blocks and never raises."""
        if not (self._hooks.get(event.kind) or self._hooks.get("*")):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            if self._loop is not None and self._loop.is_running():  # from a worker thread
                self._loop.call_soon_threadsafe(self._enqueue, event)
            else:  # no event loop anywhere (a sync `send`): called here, still guarded
                for hook in self._targets(event):
                    _call_blocking(hook, event)
            return
        if loop is not self._loop or self._task is None or self._task.done():
            self._start(loop)
        self._enqueue(event)

    def emit_live(self, live: LiveEvent) -> None:
        """Queue the hook event a live event fires (the runtime's port listener); nothing is
        built when no hook is registered (a step publishes about eight live events)."""
        if not self._hooks:
            return
        event = hook_event(live, int(time.time() * 1000))
        if event is not None:
            self.emit(event)

    async def flush(self) -> None:
        """Wait until every queued event went to its hooks (tests; `Runtime.aclose`)."""
        if self._idle is None or self._loop is not asyncio.get_running_loop():
            return
        while self._queue or not self._idle.is_set():
            await self._idle.wait()
            await asyncio.sleep(0)

    # -- the dispatcher ---------------------------------------------------------------------

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task = loop.create_task(self._dispatch(), name="wakeful-hooks")

    def _enqueue(self, event: HookEvent) -> None:
        if len(self._queue) >= self.max_queued:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("hooks are behind: %d events dropped (queue full)", self.dropped)
            return
        self._queue.append(event)
        if self._idle is not None:
            self._idle.clear()
        if self._wakeup is not None:
            self._wakeup.set()

    def _targets(self, event: HookEvent) -> list[Hook]:
        return [*self._hooks.get(event.kind, ()), *self._hooks.get("*", ())]

    async def _dispatch(self) -> None:
        assert self._wakeup is not None and self._idle is not None
        while True:
            if not self._queue:
                self._idle.set()
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            event = self._queue.popleft()
            for hook in self._targets(event):
                await self._call(hook, event)

    async def _call(self, hook: Hook, event: HookEvent) -> None:
        name = getattr(hook, "__qualname__", repr(hook))
        try:
            if inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(
                getattr(hook, "__call__", None)  # noqa: B004  # an object with an async __call__
            ):
                await asyncio.wait_for(hook(event), self.timeout_s)  # type: ignore[arg-type]  # async hook
            else:  # a sync hook runs in a worker thread: a slow one never blocks the loop
                await asyncio.wait_for(_in_thread(hook, event), self.timeout_s)
        except TimeoutError:
            log.warning("hook %s on %s took over %.1fs; skipped", name, event.kind, self.timeout_s)
        except Exception:
            log.exception("hook %s on %s raised; ignored", name, event.kind)


def _in_thread(hook: Hook, event: HookEvent) -> asyncio.Future[None]:
    """Call a sync hook in a daemon thread of its own: one stuck past its bound holds that
    thread only, never a thread of the executor the store calls use (`off_loop`), and never
    keeps the process from exiting."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.done():
            return  # abandoned at its bound
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def run() -> None:
        error: BaseException | None = None
        try:
            hook(event)
        except BaseException as err:  # handed to the dispatcher, which logs it
            error = err
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it
            loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=run, name="wakeful-hook", daemon=True).start()
    return done


def _call_blocking(hook: Hook, event: HookEvent) -> None:
    """Call a hook where no event loop runs; an async hook gets a loop of its own."""
    try:
        out = hook(event)
        if inspect.isawaitable(out):
            asyncio.run(_awaited(out))
    except Exception:
        log.exception(
            "hook %s on %s raised; ignored", getattr(hook, "__qualname__", hook), event.kind
        )


async def _awaited(out: Awaitable[None]) -> None:
    await out
