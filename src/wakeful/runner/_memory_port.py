"""`MemoryPort`: the session port over plain lists, for runner unit tests (no store, no claim
table, no threads).

It keeps the contract of `SessionPort` (the same contract suite runs against it and the
store-backed port): commits are all-or-nothing and fenced (`take_over` makes every later write
raise `ClaimLostError`), held events go first in the next write, blobs are stored once, reads
are folded from the events it holds. Inputs arrive with `admit`; instruction sources are read
on every call and rendered as they read (no deltas are recorded).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pydantic import JsonValue

from ..errors import ClaimLostError, NotFoundError
from ..events import (
    CompactionEnded,
    CompactionTail,
    Delivery,
    InputDelivered,
    MessageAdded,
    RetryCleared,
    RetryScheduled,
    SessionEvent,
    StoredEvent,
    ToolCallStarted,
    TurnEnded,
    UsageRecorded,
    WorkStateUpdated,
)
from ..instructions import Baseline, Source
from ..messages import Message, TextBlock
from ..store import Delivered, InboxItem, RetryState
from ._approvals import APPROVAL_TYPES, ApprovalLog, fold_approvals
from ._context import TurnResult
from ._live import LiveEvent, LiveKind
from ._port import HeldEvents
from ._tail import hide_point


class MemoryPort(HeldEvents):
    """A `SessionPort` held in memory (see the module docstring)."""

    def __init__(
        self,
        session_id: str = "ses_memory",
        *,
        sources: Sequence[Source] = (),
        listener: Callable[[LiveEvent], None] | None = None,
    ) -> None:
        self._sid = session_id
        self._sources = sources
        self._listener = listener
        self.log: list[StoredEvent] = []  # every committed event, in order
        self.blobs: dict[str, bytes] = {}  # digest -> content
        self.blob_writes = 0  # blobs sent to storage (each distinct content once)
        self.results: list[TurnResult] = []  # the results `end` recorded
        self.writes: list[list[SessionEvent]] = []  # each write's events (one transaction)
        self._inbox: list[InboxItem] = []
        super().__init__()
        self._lost = False

    @property
    def session_id(self) -> str:
        """The session this port serves."""
        return self._sid

    # -- test controls ------------------------------------------------------------------------

    def admit(self, text: str, *, delivery: Delivery = "steer", input_id: str = "") -> InboxItem:
        """Add a pending user input (as another process's admission would)."""
        item = InboxItem(
            self._sid,
            input_id or f"in_{len(self._inbox) + len(self.log)}",
            len(self.log),
            "user",
            delivery,
            {"text": text},
            "pending",
        )
        self._inbox.append(item)
        return item

    def take_over(self) -> None:
        """Another driver took the claim: every later write raises `ClaimLostError`."""
        self._lost = True

    # -- writes -------------------------------------------------------------------------------

    def _write(self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes]) -> None:
        if self._lost:
            raise ClaimLostError(f"the claim on {self._sid} was taken over")
        for digest, data in blobs.items():
            if digest not in self.blobs:
                self.blobs[digest] = data
                self.blob_writes += 1
        written = self._with_held(events)
        for event in written:
            seq = len(self.log) + 1
            self.log.append(StoredEvent(seq, self._sid, seq, 0, event))
        self.writes.append(written)
        self._written_held()

    async def commit(
        self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes] | None = None
    ) -> None:
        """Write the held events, then `events` and new `blobs` (see `SessionPort.commit`)."""
        fresh = {d: b for d, b in (blobs or {}).items() if d not in self.blobs}
        if self.holding or events or fresh:
            self._write(events, fresh)

    async def recommit(self, events: Sequence[SessionEvent]) -> None:
        """`commit` again (a memory commit never half-fails, so this is `commit`)."""
        await self.commit(events)

    async def promote_steers(self, epoch: int) -> list[Delivered]:
        """Write the held events and deliver the pending steers, in one write."""
        return (await self.promote_steers_then(epoch, (), {}))[0]

    async def promote_steers_then(
        self, epoch: int, then: Sequence[SessionEvent], then_blobs: Mapping[str, bytes]
    ) -> tuple[list[Delivered], bool]:
        """`promote_steers`, with `then` and its new blobs last in the write when no steer is
        delivered (instructions are rendered as the sources read: no delta is ever due)."""
        steers = [i for i in self._inbox if i.delivery == "steer"]
        events: list[SessionEvent] = []
        delivered: list[Delivered] = []
        for item in steers:
            text = item.payload.get("text")
            message = Message(
                role="user",
                blocks=(TextBlock(text=str(text)),),
                metadata={"input_id": item.input_id},
            )
            events += [
                InputDelivered(v=2, input_id=item.input_id, message_id=message.id),
                MessageAdded(message=message),
            ]
            delivered.append(Delivered(item, message))
        wrote = bool(then) and not delivered
        blobs: Mapping[str, bytes] = {}
        if wrote:
            events += then
            blobs = {d: b for d, b in then_blobs.items() if d not in self.blobs}
        if self.holding or events:
            self._write(events, blobs)
        self._inbox = [i for i in self._inbox if i not in steers]
        return delivered, wrote

    async def end(self, end: TurnEnded, result: TurnResult) -> None:
        """Write the held events, then `end`."""
        self._write([end], {})
        self.results.append(result)

    def publish(self, kind: LiveKind, data: dict[str, JsonValue]) -> None:
        """Hand a live event to the listener, if any."""
        if self._listener is not None:
            self._listener(LiveEvent(self._sid, kind, data))

    # -- reads --------------------------------------------------------------------------------

    def _messages(self) -> list[tuple[int, Message]]:
        return [(s.seq, s.event.message) for s in self.log if isinstance(s.event, MessageAdded)]

    async def messages_after(self, seq: int) -> list[tuple[int, Message]]:
        """The messages committed after `seq`."""
        return [(n, m) for n, m in self._messages() if n > seq]

    async def compaction_boundary(self) -> int:
        """The newest compaction's `through_seq` (0: none)."""
        ends = [s.event for s in self.log if isinstance(s.event, CompactionEnded)]
        return ends[-1].through_seq if ends else 0

    async def tail_boundary(self) -> tuple[int, str] | None:
        """The newest `compaction.tail`'s seq and hide point (None: none)."""
        tails = [(s.seq, s.event) for s in self.log if isinstance(s.event, CompactionTail)]
        if not tails:
            return None
        seq, tail = tails[-1]
        return seq, hide_point(tail.hide_before_id, tail.media)

    async def recent_usage(self, window: int) -> list[tuple[int, UsageRecorded]]:
        """The `usage.recorded` events among the newest `window`."""
        return [(s.seq, s.event) for s in self.log[-window:] if isinstance(s.event, UsageRecorded)]

    async def message(self, message_id: str) -> Message | None:
        """One committed message by id."""
        return next((m for _, m in self._messages() if m.id == message_id), None)

    async def blob(self, digest: str) -> bytes | None:
        """A committed blob's bytes, None when none was committed under `digest`."""
        return self.blobs.get(digest)

    async def pending(self) -> list[InboxItem]:
        """The inputs admitted and not yet delivered."""
        return list(self._inbox)

    async def retry_state(self) -> RetryState | None:
        """The scheduled retry, folded from the log."""
        state: RetryState | None = None
        for stored in self.log:
            ev = stored.event
            if isinstance(ev, RetryScheduled):
                state = RetryState(
                    ev.turn_id, ev.step, ev.attempt, ev.deadline_ms, ev.error_kind, ev.error
                )
            elif isinstance(ev, RetryCleared | TurnEnded):
                state = None
        return state

    async def work_state(self) -> dict[str, JsonValue]:
        """Goal, plan, todos and jobs, folded from the log."""
        return {
            s.event.kind: s.event.value for s in self.log if isinstance(s.event, WorkStateUpdated)
        }

    async def approvals(self) -> ApprovalLog:
        """The approval log, folded from the log."""
        events = [s for s in self.log if s.event.type in APPROVAL_TYPES]
        return fold_approvals(
            events,
            lambda: {s.event.message_id for s in self.log if isinstance(s.event, ToolCallStarted)},
        )

    async def instructions(self, epoch: int) -> Baseline:
        """The sources as they read now (unreadable or absent ones left out)."""
        return self._read_sources()

    def use_sources(self, sources: Sequence[Source]) -> None:
        """Read `sources` from now on."""
        self._sources = sources

    def _read_sources(self) -> Baseline:
        values: list[tuple[str, str]] = []
        for source in self._sources:
            try:
                text = source.read()
            except OSError:
                continue
            if text is not None:
                values.append((source.key, text))
        return Baseline(values)

    def instructions_unchanged(self, epoch: int) -> Baseline | None:
        """The sources as they read now: a memory port never has a delta to write."""
        return self._read_sources()

    async def instruction_snapshot(self) -> dict[str, str] | None:
        """None: a memory port records no instruction values."""
        return None

    def event(self, seq: int) -> SessionEvent:
        """The committed event at `seq` (`NotFoundError` past the end)."""
        if not 0 < seq <= len(self.log):
            raise NotFoundError(f"no event {seq}")
        return self.log[seq - 1].event
