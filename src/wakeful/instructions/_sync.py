"""Instruction value deltas: read every source once, hash, admit one delta when anything changed.

Invariant: the first delta of a session is complete and carries no text; a later change appears
exactly once, as an `instructions.updated` with its rendered text and a chronological system
message; unchanged sources produce nothing. Values are blobs stored once by digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..events import InstructionsUpdated, MessageAdded, SessionEvent
from ..messages import Message, TextBlock
from ..store import ClaimToken, SqlStore
from ._sources import Source

REMOVED = "removed"


@dataclass(frozen=True, slots=True)
class Baseline:
    """The instruction values a request renders in its system prompt, by key (in order)."""

    values: list[tuple[str, str]]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _read_all(sources: Sequence[Source]) -> dict[str, str | None | OSError]:
    out: dict[str, str | None | OSError] = {}
    for source in sources:
        try:
            out[source.key] = source.read()
        except OSError as err:
            out[source.key] = err
    return out


def sync_instructions(
    store: SqlStore, session_id: str, sources: Sequence[Source], claim: ClaimToken | None = None
) -> Baseline:
    """Read sources, admit one delta if anything changed, and return the baseline to render."""
    current = store.instruction_values(session_id)
    first = not store.events(session_id, types=["instructions.updated"], limit=1)
    read = _read_all(sources)
    delta: dict[str, str] = {}
    blobs: list[bytes] = []
    for key, value in read.items():
        if isinstance(value, OSError):
            continue  # unreadable: keep what is stored
        if value is None:
            if key in current or first:
                delta[key] = REMOVED
            continue
        digest = _digest(value)
        if current.get(key) != digest:
            delta[key] = digest
            blobs.append(value.encode())
    if delta:
        events: list[SessionEvent] = []
        text = None if first else _render_change(delta, read)
        events.append(InstructionsUpdated(delta=delta, text=text))
        if text is not None:
            events.append(
                MessageAdded(message=Message(role="system", blocks=(TextBlock(text=text),)))
            )
        store.append(session_id, events, claim, blobs=blobs)
    return baseline(store, session_id)


def _render_change(delta: dict[str, str], read: dict[str, str | None | OSError]) -> str:
    parts = ["Standing instructions changed:"]
    for key, digest in delta.items():
        if digest == REMOVED:
            parts.append(f"- {key} was removed; stop following it.")
        else:
            parts.append(f"- {key} is now:\n{read[key]}")
    return "\n".join(parts)


def baseline(store: SqlStore, session_id: str) -> Baseline:
    """The epoch's initial values: the first delta (later changes live in the transcript)."""
    first = store.events(session_id, types=["instructions.updated"], limit=1)
    if not first:
        return Baseline([])
    event = first[0].event
    assert isinstance(event, InstructionsUpdated)
    values = [
        (key, store.get_blob(digest).decode())
        for key, digest in event.delta.items()
        if digest != REMOVED
    ]
    return Baseline(values)
