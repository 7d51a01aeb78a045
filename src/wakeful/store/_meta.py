"""Session metadata (a JSON object merged by key) and per-extension state (namespaced values):
the spec's `patchMeta` and `get/set/deleteExtensionSessionState`.

Invariant: both change only through events (`metadata.updated`, `extension_state.set`) whose
projections write `sessions.metadata` and `extension_state` in the same transaction, within the
bounds below; a write that would pass a bound is refused whole (`UsageError`).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from ..errors import NotFoundError, UsageError
from ._append import append_events
from ._backend import Tx
from ._cipher import opened
from ._shaped import merge_metadata

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..clock import Clock
    from ._backend import Backend

METADATA_MAX_BYTES = 65_536  # the whole metadata object, as JSON
EXTENSION_ITEM_MAX_BYTES = 16_384  # one extension value, as JSON (the spec's bound)
EXTENSION_TOTAL_MAX_BYTES = 65_536  # every extension value of a session together
EXTENSION_SQL = "SELECT key, value FROM extension_state WHERE session_id = ? AND namespace = ? ORDER BY key"  # one namespace's values of a session, by key (value: JSON, sealed when encrypted)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def _size(value: JsonValue) -> int:
    return len(json.dumps(value).encode())


def _check_name(what: str, name: str) -> None:
    if not _NAME.match(name):
        raise UsageError(f"unsafe {what} {name!r}: letters, digits, _ . : - (<= 128)")


def _metadata_in(tx: Tx, session_id: str) -> dict[str, JsonValue]:
    row = tx.one("SELECT metadata FROM sessions WHERE id = ?", (session_id,))
    if row is None:
        raise NotFoundError(f"no session {session_id}")
    loaded = json.loads(opened(row[0])) if row[0] else {}
    return loaded if isinstance(loaded, dict) else {}


class MetaMixin:
    """Metadata and extension state of `SqlStore`."""

    backend: Backend
    clock: Clock

    def metadata(self, session_id: str) -> dict[str, JsonValue]:
        """The session's metadata object."""
        with self.backend.transaction(write=False) as tx:
            return _metadata_in(tx, session_id)

    def update_metadata(self, session_id: str, patch: dict[str, JsonValue]) -> dict[str, JsonValue]:
        """Merge `patch` into the metadata by key (a None value removes the key); return the
        result. `UsageError` when the result would exceed `METADATA_MAX_BYTES`."""
        from ..events import MetadataUpdated

        if not patch:
            raise UsageError("the metadata patch is empty")
        with self.backend.transaction(write=True) as tx:
            merged = merge_metadata(_metadata_in(tx, session_id), patch)
            if _size(merged) > METADATA_MAX_BYTES:
                raise UsageError(f"session metadata would exceed {METADATA_MAX_BYTES} bytes")
            append_events(tx, session_id, [MetadataUpdated(patch=patch)], self.clock.now_ms())
            return merged

    def extension_state(self, session_id: str, namespace: str) -> dict[str, JsonValue]:
        """Every value of one extension's namespace, by key."""
        _check_name("extension name", namespace)
        with self.backend.transaction(write=False) as tx:
            if tx.one("SELECT 1 FROM sessions WHERE id = ?", (session_id,)) is None:
                raise NotFoundError(f"no session {session_id}")
            rows = tx.all(EXTENSION_SQL, (session_id, namespace))
        return {str(k): json.loads(opened(v)) for k, v in rows}

    def set_extension_state(
        self, session_id: str, namespace: str, key: str, value: JsonValue
    ) -> None:
        """Store one JSON value (not None) under the extension's namespace. `UsageError` for an
        unsafe name or a value past the bounds (16 KiB per value, 64 KiB per session)."""
        from ..events import ExtensionStateSet

        _check_name("extension name", namespace)
        _check_name("key", key)
        if value is None:
            raise UsageError("a value of None: delete the key instead")
        size = _size(value)
        if size > EXTENSION_ITEM_MAX_BYTES:
            raise UsageError(f"the value is larger than {EXTENSION_ITEM_MAX_BYTES} bytes")
        with self.backend.transaction(write=True) as tx:
            total = sum(  # the values' own sizes, not their sealed texts' (encrypted store)
                len(opened(str(v)).encode())
                for (v,) in tx.all(
                    "SELECT value FROM extension_state WHERE session_id = ? "
                    "AND NOT (namespace = ? AND key = ?)",
                    (session_id, namespace, key),
                )
            )
            if total + size > EXTENSION_TOTAL_MAX_BYTES:
                raise UsageError(
                    f"the session's extension state would exceed {EXTENSION_TOTAL_MAX_BYTES} bytes"
                )
            event = ExtensionStateSet(namespace=namespace, key=key, value=value)
            append_events(tx, session_id, [event], self.clock.now_ms())

    def delete_extension_state(self, session_id: str, namespace: str, key: str) -> bool:
        """Remove one extension value; whether there was one (nothing is written when not)."""
        from ..events import ExtensionStateSet

        _check_name("extension name", namespace)
        _check_name("key", key)
        with self.backend.transaction(write=True) as tx:
            found = tx.one(
                "SELECT 1 FROM extension_state WHERE session_id = ? AND namespace = ? AND key = ?",
                (session_id, namespace, key),
            )
            if found is None:
                _metadata_in(tx, session_id)  # an unknown session is NotFoundError
                return False
            event = ExtensionStateSet(namespace=namespace, key=key, value=None)
            append_events(tx, session_id, [event], self.clock.now_ms())
            return True
