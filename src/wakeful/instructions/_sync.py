"""Instruction value deltas: read every source once, hash, admit one delta when anything changed.

Invariant: the first delta of a session is complete and carries no text; a later change appears
exactly once, as an `instructions.updated` with its rendered text and a chronological system
message; unchanged sources produce nothing. Values are blobs stored once by digest.

Epochs: the system prompt renders the epoch's initial values. The first epoch starts at the first
delta; a `compaction.ended` starts a new one from the values it snapshots (no source is read and
no instruction event is written). A fork's first delta adopts its parent's newest values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..events import CompactionEnded, InstructionsUpdated, MessageAdded, SessionEvent
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
    return _sync(store, session_id, _read_all(sources), claim)


class InstructionSync:
    """`sync_instructions` for one driver of one session, step after step.

    The sources are read on every call, as always; the store is read only when what they say,
    or the epoch, changed since the last call. Only the session's driver writes instruction
    state (under its claim) and only its compactions start epochs, so the caller passes an
    `epoch` that changes whenever it compacted; an unchanged read at an unchanged epoch then has
    nothing to admit and the same baseline to render.
    """

    def __init__(self, store: SqlStore, session_id: str, sources: Sequence[Source]) -> None:
        self._store = store
        self._sid = session_id
        self._sources = sources
        self._last: tuple[tuple[tuple[str, str | None], ...], int, Baseline] | None = None

    def __call__(self, claim: ClaimToken | None, epoch: int) -> Baseline:
        """The baseline to render now (admitting a delta first when a source changed)."""
        read = _read_all(self._sources)
        seen = tuple(
            (
                key,
                None if value is None else ("!" if isinstance(value, OSError) else _digest(value)),
            )
            for key, value in read.items()
        )
        if self._last is not None and self._last[0] == seen and self._last[1] == epoch:
            return self._last[2]
        base = _sync(self._store, self._sid, read, claim)
        self._last = (seen, epoch, base)
        return base


def _sync(
    store: SqlStore,
    session_id: str,
    read: dict[str, str | None | OSError],
    claim: ClaimToken | None,
) -> Baseline:
    current = store.instruction_values(session_id)
    first = not store.events(session_id, types=["instructions.updated"], limit=1)
    if first and _adopt_parent(store, session_id, claim):
        current = store.instruction_values(session_id)
        first = False
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


def _adopt_parent(store: SqlStore, session_id: str, claim: ClaimToken | None) -> bool:
    """Start a fork from its parent's newest values (a complete first delta without text)."""
    forked_from = store.get_session(session_id).forked_from
    if forked_from is None or store.find_session(forked_from) is None:
        return False
    values = epoch_snapshot(store, forked_from)
    if not values:
        return False
    store.append(session_id, [InstructionsUpdated(delta=values)], claim)
    return True


def _epoch_digests(store: SqlStore, session_id: str) -> dict[str, str]:
    """The current epoch's initial values by key: the latest compaction's, else the first delta."""
    for stored in reversed(store.events(session_id, types=["compaction.ended"])):
        event = stored.event
        if isinstance(event, CompactionEnded) and event.instructions is not None:
            return dict(event.instructions)
    first = store.events(session_id, types=["instructions.updated"], limit=1)
    if not first:
        return {}
    delta = first[0].event
    assert isinstance(delta, InstructionsUpdated)
    return {key: digest for key, digest in delta.delta.items() if digest != REMOVED}


def epoch_snapshot(store: SqlStore, session_id: str) -> dict[str, str] | None:
    """The current values (key -> digest) that a new epoch starts from, in a stable order.

    Keys keep the current epoch's order; keys that appeared since follow, sorted. None before
    the session's first delta: the epoch then still starts at that first delta.
    """
    current = store.instruction_values(session_id)
    if not current and not store.events(session_id, types=["instructions.updated"], limit=1):
        return None
    order = [key for key in _epoch_digests(store, session_id) if key in current]
    order += sorted(key for key in current if key not in order)
    return {key: current[key] for key in order}


def baseline(store: SqlStore, session_id: str) -> Baseline:
    """The epoch's initial values (later changes of the epoch live in the transcript)."""
    digests = _epoch_digests(store, session_id)
    return Baseline([(key, store.get_blob(digest).decode()) for key, digest in digests.items()])
