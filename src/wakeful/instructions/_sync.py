"""Instruction value deltas: read every source once, hash, admit one delta when anything changed.

Invariant: the first delta of a session is complete (an unreadable source blocks it) and
carries no text; a later change appears
exactly once, as an `instructions.updated` with its rendered text and a chronological system
message; unchanged sources produce nothing. Values are blobs stored once by digest.

Epochs: the system prompt renders the epoch's initial values. The first epoch starts at the first
delta; a `compaction.ended` starts a new one from the values it snapshots (no source is read and
no instruction event is written). A fork's first delta adopts its parent's newest values. A
rewind (`session.reverted`) clears the state (003: "committed revert clears state so the next
boundary establishes a fresh baseline"): the next sync writes a complete delta without text, as
a session's first, and a new epoch starts at it; an unrevert restores the values it cleared.

Order: a driver admits a delta before it delivers the input that follows (003, "before input
delivery"): `prelude` plans it and the store writes it in the delivery's own transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..errors import InstructionSourceError
from ..events import (
    INSTRUCTION_ABSENT,
    INSTRUCTION_REMOVED,
    CompactionEnded,
    InstructionsUpdated,
    MessageAdded,
    SessionEvent,
)
from ..messages import Message, TextBlock
from ..store import ClaimToken, InstructionState, LocalStore, Prelude
from ._sources import Source


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
    store: LocalStore, session_id: str, sources: Sequence[Source], claim: ClaimToken | None = None
) -> Baseline:
    """Read sources, admit one delta if anything changed, and return the baseline to render."""
    return _sync(store, session_id, _read_all(sources), claim)[0]


class InstructionSync:
    """`sync_instructions` for one driver of one session, step after step.

    The sources are read on every call, as always; the store is read only when what they say,
    or the epoch, changed since the last call. Only the session's driver writes instruction
    state (under its claim) and only its compactions start epochs, so the caller passes an
    `epoch` that changes whenever it compacted; an unchanged read at an unchanged epoch then has
    nothing to admit and the same baseline to render.
    """

    def __init__(
        self,
        store: LocalStore,
        session_id: str,
        sources: Sequence[Source],
        state: InstructionState | None = None,
    ) -> None:
        self._store = store
        self._sid = session_id
        self._sources = sources
        # The session's instruction state as read already under this driver's claim (a
        # worker's batch recovery): the first call plans from it instead of reading it. Only
        # the claim's driver changes it, so it holds until this object's first write.
        self._state = state
        self._last: tuple[tuple[tuple[str, str | None], ...], int, Baseline] | None = None
        self.appended = False
        """Whether the last call wrote to the store (a delta not handed to its `hold`)."""
        # What `prelude` last planned, when it was a first delta (the baseline it starts is
        # the values just read): `_last` once the caller says it was written (`wrote`).
        self._planned: tuple[Prelude, tuple[tuple[str, str | None], ...], int, Baseline] | None
        self._planned = None

    def __call__(self, claim: ClaimToken | None, epoch: int, hold: Hold | None = None) -> Baseline:
        """The baseline to render now (admitting a delta first when a source changed). With
        `hold`, a session's first delta is handed to it instead of written (see `_sync`)."""
        read = _read_all(self._sources)
        seen = _seen(read)
        if self._last is not None and self._last[0] == seen and self._last[1] == epoch:
            return self._last[2]
        self.appended = False
        held: list[bool] = []

        def holding(events: Sequence[SessionEvent], blobs: Sequence[bytes]) -> None:
            held.append(True)
            assert hold is not None
            hold(events, blobs)

        state, self._state = self._state, None
        base, planned = _sync(self._store, self._sid, read, claim, holding if hold else None, state)
        self.appended = planned and not held
        self._last = (seen, epoch, base)
        return base

    def use(self, sources: Sequence[Source]) -> None:
        """Read `sources` from the next call on (a context resolved again); what they say is
        compared with the last read as usual, so only a real change is admitted."""
        self._sources = sources

    def forget(self) -> None:
        """Drop what the last call read: a compaction this driver wrote started an epoch (its
        baseline is in the store) that a later caller may not know of (the `epoch` counts the
        compactions of one turn runner, and a drain's turns each have their own)."""
        self._last = None

    def unchanged(self, epoch: int) -> Baseline | None:
        """The baseline of the last call when the sources still say the same at the same
        `epoch` (no store access: a caller may skip its trip to the store); else None."""
        if self._last is None or self._last[1] != epoch:
            return None
        return self._last[2] if _seen(_read_all(self._sources)) == self._last[0] else None

    def prelude(self, epoch: int = 0, state: InstructionState | None = None) -> Prelude | None:
        """The delta to admit *before* the next input is delivered (003: "before input
        delivery"), for `SessionWrite.promote` (`execution/_writes.py`) to write in the
        delivery's own transaction; None when nothing changed since this object's last sync at
        `epoch`, or when the first delta cannot be complete (the turn's own sync then blocks it).
        `state`: the session's instruction state read ahead (a drive's context read), planned
        from instead of a read of its own; a stale one costs nothing but the delta, which the
        promotion drops when the session's seq moved past it (`_inbox.plan_promotion`)."""
        read = _read_all(self._sources)
        if self._last is not None and self._last[0] == _seen(read) and self._last[1] == epoch:
            return None
        self._state = None  # (its seq may be behind: a prelude is planned at the newest)
        if state is None:  # (one read ahead by the caller is planned at its own seq)
            state = self._store.instruction_state(self._sid)  # with the seq it is planned at
        state = _fresh_after_revert(self._store, self._sid, state)
        try:
            events, blobs = _plan(self._store, self._sid, state, read)
        except InstructionSourceError:
            return None
        if not events:
            return None
        planned = Prelude(tuple(events), tuple(blobs), state.last_seq)
        self._planned = None
        if not state.started and state.forked_from is None:  # a first delta, as `_sync`'s
            self._planned = (planned, _seen(read), epoch, _first_baseline(events, read))
        return planned

    def wrote(self, prelude: Prelude) -> None:
        """`prelude`, the last this object planned, was written (with a delivery). When it
        was the session's first delta, its values are the sources as `prelude` read them and
        the epoch starts at it: the next call renders them without reading the store (the
        compactions, the epoch's first delta and its blobs, four reads on every drive's first
        step), as after a first delta `__call__` wrote itself."""
        if self._planned is not None and self._planned[0] is prelude:
            _, seen, epoch, base = self._planned
            self._last = (seen, epoch, base)
        self._planned = None


def _seen(read: dict[str, str | None | OSError]) -> tuple[tuple[str, str | None], ...]:
    return tuple(
        (key, None if value is None else ("!" if isinstance(value, OSError) else _digest(value)))
        for key, value in read.items()
    )


Hold = Callable[[Sequence[SessionEvent], Sequence[bytes]], None]
"""Takes a first delta (events, value blobs) to write with the caller's next write."""


def _sync(
    store: LocalStore,
    session_id: str,
    read: dict[str, str | None | OSError],
    claim: ClaimToken | None,
    hold: Hold | None = None,
    state: InstructionState | None = None,
) -> tuple[Baseline, bool]:
    """Admit the delta `read` calls for and return the baseline. A session's first delta by
    its claim's driver starts the epoch with the values just read; with `hold` it is handed
    over instead of written, for the driver's next write (its receipt) to carry: it is
    durable before any request renders it, in a commit the step makes anyway (issue 36).
    `state`: the session's instruction state when read already (else read here). Returns
    the baseline and whether there was a delta."""
    if state is None:
        state = store.instruction_state(session_id)
    state = _fresh_after_revert(store, session_id, state)
    events, blobs = _plan(store, session_id, state, read)
    if events:
        first = claim is not None and not state.started and state.forked_from is None
        if first and hold is not None:
            hold(events, blobs)
        else:
            store.append(session_id, events, claim, blobs=blobs)
        if first:
            return _first_baseline(events, read), True
    return baseline(store, session_id), bool(events)


_EPOCH_TYPES = ["session.reverted", "session.unreverted", "instructions.updated"]


def _revert_in_force(store: LocalStore, session_id: str) -> tuple[int, bool]:
    """The seq of the newest rewind still in force (0: none) and whether a delta followed it.
    An unrevert takes back the rewinds no delta followed yet (a delta comes with the next
    delivery, which makes a rewind final)."""
    reverts: list[int] = []
    followed: set[int] = set()
    for stored in store.plain_events(session_id, types=_EPOCH_TYPES):
        if stored.type == "session.reverted":
            reverts.append(stored.seq)
        elif stored.type == "instructions.updated" and reverts:
            followed.add(reverts[-1])
        elif stored.type == "session.unreverted":
            while reverts and reverts[-1] not in followed:
                reverts.pop()
    return (reverts[-1], reverts[-1] in followed) if reverts else (0, True)


def _fresh_after_revert(
    store: LocalStore, session_id: str, state: InstructionState
) -> InstructionState:
    """`state`, unstarted when a rewind cleared it and no delta followed yet: the next delta
    is then complete and without text, a fresh baseline (the module docstring)."""
    if not state.started or state.values:
        return state
    _, followed = _revert_in_force(store, session_id)
    return state if followed else replace(state, started=False, forked_from=None)


def _first_baseline(
    events: Sequence[SessionEvent], read: dict[str, str | None | OSError]
) -> Baseline:
    """The baseline right after this driver wrote its session's first delta (fenced by its
    claim, so no other first delta exists), from what it read instead of the store: the
    epoch starts at that delta (no compaction snapshots values before a first delta), whose
    values are the sources just read (`baseline` would read the compactions, the first delta
    and its blobs back: three statements on every session's first turn)."""
    [delta] = [e for e in events if isinstance(e, InstructionsUpdated)]
    values = [(k, read[k]) for k in delta.values()]
    return Baseline([(k, v) for k, v in values if isinstance(v, str)])


def _plan(
    store: LocalStore,
    session_id: str,
    state: InstructionState,
    read: dict[str, str | None | OSError],
) -> tuple[list[SessionEvent], list[bytes]]:
    """The events (and value blobs) that bring the stored instruction `state` (the session's,
    read in one transaction: `LocalStore.instruction_state`) up to `read`.

    The first delta of a session must be complete: an unreadable source then raises
    `InstructionSourceError` (the turn is blocked) rather than being left out silently. Later,
    an unreadable source keeps its stored value.
    """
    current, first = state.values, not state.started
    events: list[SessionEvent] = []
    if first and (adopted := _parent_values(store, state.forked_from)):
        events.append(InstructionsUpdated(delta=adopted))  # a fork starts from its parent's
        current, first = dict(adopted), False
    if first:
        unreadable = {k: v for k, v in read.items() if isinstance(v, OSError)}
        if unreadable:
            key, err = next(iter(unreadable.items()))
            raise InstructionSourceError(
                f"instruction source {key} cannot be read ({err.strerror or err}); the "
                "session's first instructions would be incomplete: fix or remove it"
            )
    delta: dict[str, str] = {}
    blobs: list[bytes] = []
    for key, value in read.items():
        if isinstance(value, OSError):
            continue  # unreadable after the first delta: keep what is stored
        if value is None:  # a complete delta names every source: absent, or gone since
            if key in current:
                delta[key] = INSTRUCTION_REMOVED
            elif first:
                delta[key] = INSTRUCTION_ABSENT
            continue
        digest = _digest(value)
        if current.get(key) != digest:
            delta[key] = digest
            blobs.append(value.encode())
    if delta:
        text = None if first else _render_change(delta, read)
        events.append(InstructionsUpdated(delta=delta, text=text))
        if text is not None:
            events.append(
                MessageAdded(message=Message(role="system", blocks=(TextBlock(text=text),)))
            )
    return events, blobs


def _render_change(delta: dict[str, str], read: dict[str, str | None | OSError]) -> str:
    parts = ["Standing instructions changed:"]
    for key, digest in delta.items():
        if digest == INSTRUCTION_REMOVED:
            parts.append(f"- {key} was removed; stop following it.")
        else:
            parts.append(f"- {key} is now:\n{read[key]}")
    return "\n".join(parts)


def _parent_values(store: LocalStore, forked_from: str | None) -> dict[str, str] | None:
    """A fork's parent's newest values: the fork's complete first delta (without text)."""
    if forked_from is None or store.find_session(forked_from) is None:
        return None
    return epoch_snapshot(store, forked_from) or None


def _epoch_digests(store: LocalStore, session_id: str) -> dict[str, str]:
    """The current epoch's initial values by key: the latest compaction's since the rewind in
    force (if any), else the first delta after it (the fresh baseline), else the first delta."""
    since, _ = _revert_in_force(store, session_id)
    for stored in reversed(store.live_compactions(session_id)):  # a rewind may hide some
        event = stored.event
        if stored.seq < since:
            break
        if isinstance(event, CompactionEnded) and event.instructions is not None:
            return dict(event.instructions)
    deltas = store.events(session_id, after=since, types=["instructions.updated"], limit=1)
    if not deltas:
        return {}
    delta = deltas[0].event
    assert isinstance(delta, InstructionsUpdated)
    return delta.values()


def epoch_snapshot(store: LocalStore, session_id: str) -> dict[str, str] | None:
    """The current values (key -> digest) that a new epoch starts from, in a stable order.

    Keys keep the current epoch's order; keys that appeared since follow, sorted. None before
    the session's first delta: the epoch then still starts at that first delta.
    """
    state = store.instruction_state(session_id)
    current = state.values
    if not current and not state.started:
        return None
    order = [key for key in _epoch_digests(store, session_id) if key in current]
    order += sorted(key for key in current if key not in order)
    return {key: current[key] for key in order}


def baseline(store: LocalStore, session_id: str) -> Baseline:
    """The epoch's initial values (later changes of the epoch live in the transcript)."""
    digests = _epoch_digests(store, session_id)
    texts = store.get_blobs(list(digests.values())) if digests else {}
    return Baseline([(key, texts[digest].decode()) for key, digest in digests.items()])
