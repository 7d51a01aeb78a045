"""The session port: the one way a turn touches durable state.

A turn (its steps, tools, compaction and retry waits) never holds a store, a claim or a
listener: it holds a `SessionPort`, opened by its driver for one session under the driver's
claim. Two implementations: `execution._port.StorePort` over the store (every store call in a
worker thread, so no session's round trip stalls the event loop), and `MemoryPort`
(`_memory_port.py`) for runner unit tests. One contract suite runs against both
(`tests/runner/test_port_contract.py`).

The contract:

- **Writes are fenced commits.** `commit` writes its events (and their blobs) in one
  transaction under the port's claim; a lost claim raises `ClaimLostError` and writes nothing.
- **The held-reply buffer applies to everything.** `hold` keeps events (a reply whose calls
  are read-only, or a final reply) out of the store until the next write of any kind — a
  `commit`, `promote_steers`, `end` — which writes them first, in its own transaction. A
  failed write keeps them held.
- **A step boundary may carry the next step's receipt.** `promote_steers_then` writes it
  (`then`) last in the boundary's transaction only when nothing is delivered and no
  instruction delta is due, and says whether it did: a read-only tool step then costs one
  write (`docs/port.md`).
- **Blobs are stored once.** A blob the port already stored is not sent again.
- **Live events are published, never stored** (`publish`), to in-process subscribers.
- **Reads are what a turn needs**: its active history (messages after a seq, the compaction
  boundary, recent usage), the pending inbox, retry state, work state, approvals, and the
  instruction baseline (admitting a delta under the claim when a source changed).
- **The turn's end** (`end`) writes `turn.ended` after the held reply, together with whatever
  the driver must commit with it (a background child's report).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pydantic import JsonValue

from ..events import SessionEvent, TurnEnded, UsageRecorded
from ..instructions import Baseline, Source
from ..messages import Message
from ..store import Delivered, InboxItem, RetryState
from ._approvals import ApprovalLog
from ._context import TurnResult
from ._live import LiveKind


class SessionPort(Protocol):
    """Durable state of one session as one turn sees it (see the module docstring)."""

    @property
    def session_id(self) -> str:
        """The session this port serves."""
        ...

    # -- writes -----------------------------------------------------------------------------

    async def commit(
        self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes] | None = None
    ) -> None:
        """Write the held events, then `events` and `blobs` (content by SHA-256 digest; one
        this port stored before is not sent again), in one fenced transaction (nothing at all
        when there is nothing new); the held events stay held on failure."""
        ...

    async def recommit(
        self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes] | None = None
    ) -> None:
        """`commit` again after a failed try: when an earlier try did commit (a connection
        lost while the commit's answer was on its way), its tool calls no longer run, and
        nothing is written twice."""
        ...

    def hold(self, events: Sequence[SessionEvent]) -> None:
        """Keep `events` for the next write, which writes them first, after any held before
        (a held reply, then its read-only calls' results)."""
        ...

    def drop_held(self) -> None:
        """Forget the held events without writing them: a held reply whose write failed and
        whose step is asked again (a store-contention retry, docs/runner.md)."""
        ...

    @property
    def holding(self) -> bool:
        """Whether events are held."""
        ...

    @property
    def held(self) -> Sequence[SessionEvent]:
        """The held events, in the order the next write sends them."""
        ...

    async def promote_steers(self, epoch: int) -> list[Delivered]:
        """At a step boundary: write the held events, the instruction delta (if a source
        changed at `epoch`) and deliver pending steers, in one fenced transaction."""
        ...

    async def promote_steers_then(
        self, epoch: int, then: Sequence[SessionEvent], then_blobs: Mapping[str, bytes]
    ) -> tuple[list[Delivered], bool]:
        """`promote_steers`, and in its transaction, last, `then` (the next step's receipt)
        with its blobs (one stored before is not sent again), only when nothing is delivered
        and no instruction source changed since the last `instructions` at `epoch`. Returns
        what was delivered and whether `then` was written."""
        ...

    async def end(self, end: TurnEnded, result: TurnResult) -> None:
        """Write the held events, then the turn's end (with what the driver commits with it)."""
        ...

    def publish(self, kind: LiveKind, data: dict[str, JsonValue]) -> None:
        """Hand a live-only event to the in-process subscribers (never stored)."""
        ...

    # -- reads ------------------------------------------------------------------------------

    async def messages_after(self, seq: int) -> list[tuple[int, Message]]:
        """The transcript's messages stored after `seq`, with their seqs, in order."""
        ...

    async def compaction_boundary(self) -> int:
        """The `through_seq` of the newest compaction (0 when the session has none)."""
        ...

    async def tail_boundary(self) -> tuple[int, str] | None:
        """The newest `compaction.tail` (the `tail` strategy's hide point): its seq and
        `hide_before_id`; None when the session has none."""
        ...

    async def recent_usage(self, window: int) -> list[tuple[int, UsageRecorded]]:
        """The `usage.recorded` events among the newest `window` events, oldest first."""
        ...

    async def message(self, message_id: str) -> Message | None:
        """One message of the transcript by id."""
        ...

    async def blob(self, digest: str) -> bytes | None:
        """The bytes of a stored blob (media a message refers to), None when it is absent."""
        ...

    async def pending(self) -> list[InboxItem]:
        """Pending inbox items in enqueue order."""
        ...

    async def retry_state(self) -> RetryState | None:
        """The session's scheduled retry, if any."""
        ...

    async def work_state(self) -> dict[str, JsonValue]:
        """The session's goal, plan, todos and jobs, by kind."""
        ...

    async def approvals(self) -> ApprovalLog:
        """The open approval step and the session's `always` grants."""
        ...

    async def instructions(self, epoch: int) -> Baseline:
        """The instruction baseline to render, after a fenced delta when a source changed."""
        ...

    def instructions_unchanged(self, epoch: int) -> Baseline | None:
        """What `instructions` would return when it has nothing to write (no source changed
        since its last call at `epoch`), without touching the store; else None."""
        ...

    async def instruction_snapshot(self) -> dict[str, str] | None:
        """The instruction values (key -> digest) a new epoch starts from (`epoch_snapshot`)."""
        ...

    def use_sources(self, sources: Sequence[Source]) -> None:
        """Read `sources` from the next step on: the context was resolved again (another
        agent's skills and MCP servers, an edited configuration's entries; issue 37 item 22)."""
        ...


class HeldEvents:
    """The held-reply buffer both ports share (the contract's second point): events kept out
    of the store until the port's next write, which sends them first and then calls
    `_written_held` (never on failure, so a failed write keeps them held)."""

    def __init__(self) -> None:
        self._held: list[SessionEvent] = []

    def hold(self, events: Sequence[SessionEvent]) -> None:
        """Keep `events` for the next write."""
        self._held = [*self._held, *events]

    def drop_held(self) -> None:
        """Forget the held events without writing them (see `SessionPort.drop_held`)."""
        self._held = []

    @property
    def holding(self) -> bool:
        """Whether events are held."""
        return bool(self._held)

    @property
    def held(self) -> Sequence[SessionEvent]:
        """The held events, in the order the next write sends them."""
        return tuple(self._held)

    def _with_held(self, events: Sequence[SessionEvent]) -> list[SessionEvent]:
        """What a write sends: the held events, then `events`."""
        return [*self._held, *events]

    def _written_held(self) -> None:
        """A write carrying the held events committed: they are no longer held."""
        self._held = []
