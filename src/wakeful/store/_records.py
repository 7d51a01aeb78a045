"""Plain records the store returns: sessions, inbox items, claims, pages and prune counts;
and the columns a `SessionRow` is selected with (`row_cols`, `session_row`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._cipher import opened_or_none

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..events import Delivery, InputKind, SessionEvent
    from ..messages import Message
    from ._facts import SessionFacts


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One session as its row says (no transcript is read to build it)."""

    id: str
    parent_id: str | None
    root_id: str
    forked_from: str | None
    fork_seq: int | None
    title: str | None
    agent: str | None
    model: str | None
    status: str
    archived: bool
    created_ms: int
    updated_ms: int
    last_seq: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    location: str | None = None  # the workspace root it lives in (None: recorded without one)
    waiting_for: str | None = None  # a worker left it: no running worker serves its location
    cache_read_tokens: int = 0  # of `input_tokens`, read from the provider's prompt cache
    cache_write_tokens: int = 0  # of `input_tokens`, written to the provider's prompt cache

    @property
    def location_id(self) -> str | None:
        """The stable id of the session's location (`wakeful.events.location_id`)."""
        from ..events import location_id

        return None if self.location is None else location_id(self.location)

    @property
    def is_fork(self) -> bool:
        """Whether the session was forked from another."""
        return self.forked_from is not None

    def to_json(self) -> dict[str, object]:
        """The row as a JSON-ready dict (the CLI and API contract)."""
        return {
            "id": self.id,
            "parent_id": self.parent_id,
            "root_id": self.root_id,
            "forked_from": self.forked_from,
            "fork_seq": self.fork_seq,
            "title": self.title,
            "agent": self.agent,
            "model": self.model,
            "status": self.status,
            "archived": self.archived,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
            "last_seq": self.last_seq,
            "location": self.location,
            "location_id": self.location_id,
            "waiting_for": self.waiting_for,
            "usage": {
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens,
                "cost_usd": self.cost_usd,
            },
        }


@dataclass(frozen=True, slots=True)
class Prelude:
    """Events to write just before a delivery, in its transaction (an instruction delta, which
    003 admits "before input delivery"), planned when the session's last seq was `at_seq`;
    dropped when the session moved on since (the driver's own sync then writes it later)."""

    events: tuple[SessionEvent, ...]
    blobs: tuple[bytes, ...]
    at_seq: int


@dataclass(frozen=True, slots=True)
class InboxItem:
    """An admitted input: pending, delivered or rejected."""

    session_id: str
    input_id: str
    seq: int
    kind: InputKind
    delivery: Delivery
    payload: dict[str, JsonValue]
    status: str
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """What `admit` did: the item, and whether this call created it (False: idempotent reuse)."""

    item: InboxItem
    created: bool
    session_created: bool = False


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """One input to admit into an existing session (`SqlStore.admit_together`): the arguments
    of `admit` without `create`."""

    session_id: str
    input_id: str | None
    kind: InputKind
    payload: dict[str, JsonValue]
    delivery: Delivery = "steer"
    actor: str | None = None  # who admits it (docs/access.md)


@dataclass(frozen=True, slots=True)
class Delivered:
    """One item promoted out of the inbox; `message` is None for control items."""

    item: InboxItem
    message: Message | None


@dataclass(frozen=True, slots=True)
class Claim:
    """A driver's write-ahead ownership of a session: token + fencing epoch + lease."""

    session_id: str
    owner: str
    token: str
    epoch: int
    lease_until_ms: int
    attempts: int = 0
    taken_over: bool = False


@dataclass(frozen=True, slots=True)
class ClaimState:
    """How a session's claim and work stand, read inside a write unit with the session locked
    (`SessionWrite.claim_state`): whether an unreleased claim is held (by a live driver or an
    orphan); when it is not, whether a tool call is still `running`; when neither, whether an
    idle promotion would settle something now (a part not read is False)."""

    held: bool
    running_call: bool
    deliverable: bool


@dataclass(frozen=True, slots=True)
class InstructionState:
    """What planning an instruction delta reads about a session, read together
    (`ReadsMixin.instruction_state`)."""

    values: dict[str, str]  # current instruction digests by source key
    started: bool  # the session has its first `instructions.updated`
    forked_from: str | None
    last_seq: int  # the session's newest seq when read (where a prelude is planned)


@dataclass(frozen=True, slots=True)
class DriveReads:
    """What a drive's context is built from, read together (`SessionRead.drive`): the
    session's row as stored (a stale `running` not shown `interrupted`: a driver reads its
    agent, model, place and parent from it) and its facts (`SessionFacts`: with the host's
    instruction entries, the `/mcp` switches), what the drive's first instruction delta is
    planned from (`instructions`: `LocalStore.instruction_state`'s, a read of its own before)
    and the instance-wide log's newest event id (`newest_event`: where the process's interrupt
    watching starts for this drive, a read of its own before)."""

    row: SessionRow
    facts: SessionFacts
    instructions: InstructionState | None = None  # (None: not read with it)
    newest_event: int | None = None  # (None: not read with it)


@dataclass(frozen=True, slots=True)
class DrainStart:
    """What `execution._writes.start_drain` did in its one unit of work.

    `claim` is None when a live driver holds the session (`busy`) or when there was nothing to
    do (no claim was written). `delivered` holds the inputs promoted with the claim; when one of
    them produced a message, the turn named in the call started in the same transaction.
    """

    claim: Claim | None
    busy: bool = False
    delivered: tuple[Delivered, ...] = ()
    facts: SessionFacts | None = None  # the session's, as the unit read them with its lock
    wrote_prelude: bool = False  # the prelude went before the delivery (planned at its seq)


@dataclass(frozen=True, slots=True)
class Page:
    """One page of sessions, newest first; `next_cursor` continues the listing."""

    sessions: list[SessionRow]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What a listing shows beside a session's row, counted from its projections (the seed's
    `SessionMetaRow` counts): its turns (the seed's runs), child sessions (its whole tree
    below it), the user messages still in its transcript, its artifacts, and the text of its
    first user message still there, as sent (None: it has none)."""

    turns: int = 0
    child_sessions: int = 0
    user_messages: int = 0
    artifacts: int = 0
    first_prompt: str | None = None

    def to_json(self) -> dict[str, object]:
        """The summary as a JSON-ready dict (the CLI and API contract)."""
        return {
            "turns": self.turns,
            "child_sessions": self.child_sessions,
            "user_messages": self.user_messages,
            "artifacts": self.artifacts,
            "first_prompt": self.first_prompt,
        }


@dataclass(frozen=True, slots=True)
class PruneCounts:
    """What a prune touches: sessions (roots and their children), events, messages."""

    sessions: int = 0
    events: int = 0
    messages: int = 0
    session_ids: list[str] = field(default_factory=list)
    roots: int = 0

    @property
    def children(self) -> int:
        """Child sessions counted with their roots."""
        return self.sessions - self.roots

    def to_json(self) -> dict[str, object]:
        """JSON-ready counts."""
        return {
            "sessions": self.sessions,
            "roots": self.roots,
            "children": self.children,
            "events": self.events,
            "messages": self.messages,
        }


@dataclass(frozen=True, slots=True)
class SyncMarker:
    """Emitted once by a following log: everything up to `seq` (or global `id`) was replayed."""

    watermark: int


def last_seq_sql(kind: str, alias: str = "sessions") -> str:
    """The newest seq of the session of the row `alias` of `sessions`, as SQL on a backend of
    `kind` (a `Tx.kind`). PostgreSQL: the row's `last_seq`, which every append sets. SQLite
    (migration 37, issue 36): the log's own, its `(sk, seq)` key's last entry for the session,
    a page every append writes anyway; the row's `last_seq` is only what it was when the row
    was inserted (its first event not yet written), and an append that changes nothing else
    of the row leaves its page alone (a WAL page less per commit: docs/store.md)."""
    if kind != "sqlite":
        return f"{alias}.last_seq"
    return f"COALESCE((SELECT MAX(seq) FROM event_log WHERE sk = {alias}.k), {alias}.last_seq)"


def updated_ms_sql(kind: str, alias: str = "sessions") -> str:
    """When the session of the row `alias` last changed, as SQL (see `last_seq_sql`): on
    SQLite the time of its newest event (an append sets `updated_ms` to its events' `at_ms`,
    and every event is appended)."""
    if kind != "sqlite":
        return f"{alias}.updated_ms"
    return (
        "COALESCE((SELECT at_ms FROM event_log WHERE sk = "
        f"{alias}.k ORDER BY seq DESC LIMIT 1), {alias}.updated_ms)"
    )


_BEFORE = (
    "id, parent_id, root_id, forked_from, fork_seq, title, agent, model, status, archived_ms, "
    "created_ms"
)
_AFTER = "input_tokens, output_tokens, cost_usd, location, cache_read_tokens, cache_write_tokens"


def session_cols(kind: str, alias: str = "sessions") -> str:
    """The columns a `SessionRow` is built from (`session_row`), of the row `alias`."""
    before = ", ".join(f"{alias}.{c}" for c in _BEFORE.split(", "))
    after = ", ".join(f"{alias}.{c}" for c in _AFTER.split(", "))
    head = f"{updated_ms_sql(kind, alias)}, {last_seq_sql(kind, alias)}"
    return f"{before}, {head}, {after}"


def row_cols(kind: str) -> str:
    """`session_cols` of `sessions`, then the location a worker left the session waiting for
    (`session_waits`)."""
    waiting = "(SELECT w.location FROM session_waits w WHERE w.session_id = sessions.id)"
    return f"{session_cols(kind)}, {waiting}"


def session_row(row: Sequence[Any]) -> SessionRow:
    """Build a `SessionRow` from a row selected with `session_cols` (then, optionally, the
    waiting location: `row_cols`)."""
    return SessionRow(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        opened_or_none(row[5]),  # the title (sealed in an encrypted store)
        row[6],
        row[7],
        row[8],
        row[9] is not None,
        int(row[10]),
        int(row[11]),
        int(row[12]),
        int(row[13]),
        int(row[14]),
        float(row[15]),
        row[16],
        row[19] if len(row) > 19 else None,
        int(row[17]),
        int(row[18]),
    )
