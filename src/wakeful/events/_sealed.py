"""Sealed event bodies: how a reader of the log opens a body the store encrypted.

An encrypted store (docs/encryption.md) seals each event body; the body then begins with
`SEALED`, and the store's cipher, registered here (`set_sealed_opener`), opens it. Every reader
of bodies calls `open_body` first (`load_event`, `load_messages_added`, `event_data`). This
module imports nothing heavy: the plain readers use it on a cold start.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import StoreError

SEALED = "\x1f"
_opener: list[Callable[[str], str]] = []


def set_sealed_opener(opener: Callable[[str], str]) -> None:
    """Make `opener` what opens sealed bodies (the store's cipher registers it)."""
    _opener[:] = [opener]


def open_body(data: str | bytes) -> str | bytes:
    """A stored body as it was written before the store sealed it (unchanged when it is not
    sealed); `StoreError` when it is sealed and no opener is registered."""
    if not (data[:1] == SEALED or data[:1] == b"\x1f"):
        return data
    if not _opener:
        raise StoreError("a sealed (encrypted) event body, and no key for its store is open")
    return _opener[0](data if isinstance(data, str) else data.decode())
