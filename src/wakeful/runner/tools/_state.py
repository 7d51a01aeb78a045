"""A tool's way to its session's extension state: `ToolContext.extension_state(namespace)`.

The accessor is scoped to one session (the context's) and one namespace (the caller's), so a
tool reads and writes its own extension's values and nobody else's. The values live where the
host keeps them (`StateBackend`, given by the runtime: the store, through the runtime's own
methods, so bounds are checked and the `extension_state_set` hook fires). Each write is durable
when it returns, like the rest of a tool's side effects (invariant 6: a call found running
after a crash is reported as possibly partly run, its writes included).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from pydantic import JsonValue


class StateBackend(Protocol):
    """Where a session's extension state lives (the runtime gives one to `ToolContext`)."""

    def read(self, session_id: str, namespace: str) -> dict[str, JsonValue]:
        """Every value of `namespace` in the session, by key."""
        ...

    def write(self, session_id: str, namespace: str, key: str, value: JsonValue) -> None:
        """Store one JSON value (not None); `UsageError` past the bounds."""
        ...

    def delete(self, session_id: str, namespace: str, key: str) -> bool:
        """Remove one value; whether there was one."""
        ...


class ExtensionState:
    """One namespace of one session's extension state. The plain methods block (call them
    from a sync tool, which runs in a worker thread); an async tool awaits the `a` ones,
    which run the same calls in a worker thread, off the event loop."""

    def __init__(self, backend: StateBackend, session_id: str, namespace: str) -> None:
        self._backend = backend
        self.session_id = session_id
        self.namespace = namespace

    def values(self) -> dict[str, JsonValue]:
        """Every value of the namespace, by key."""
        return self._backend.read(self.session_id, self.namespace)

    def get(self, key: str, default: JsonValue = None) -> JsonValue:
        """The value under `key`, or `default`."""
        return self.values().get(key, default)

    def set(self, key: str, value: JsonValue) -> None:
        """Store `value` (JSON, not None) under `key`; `UsageError` for an unsafe name or a
        value past the bounds (16 KiB a value, 64 KiB a session)."""
        self._backend.write(self.session_id, self.namespace, key, value)

    def delete(self, key: str) -> bool:
        """Remove the value under `key`; whether there was one."""
        return self._backend.delete(self.session_id, self.namespace, key)

    async def avalues(self) -> dict[str, JsonValue]:
        """`values`, off the event loop."""
        return await asyncio.to_thread(self.values)

    async def aget(self, key: str, default: JsonValue = None) -> JsonValue:
        """`get`, off the event loop."""
        return await asyncio.to_thread(self.get, key, default)

    async def aset(self, key: str, value: JsonValue) -> None:
        """`set`, off the event loop."""
        await asyncio.to_thread(self.set, key, value)

    async def adelete(self, key: str) -> bool:
        """`delete`, off the event loop."""
        return await asyncio.to_thread(self.delete, key)
