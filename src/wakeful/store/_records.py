"""Plain records the store returns: sessions, inbox items, claims, pages and prune counts."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from ..events import Delivery, InputKind
from ..messages import Message


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
            "usage": {
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "cost_usd": self.cost_usd,
            },
        }


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
class DrainStart:
    """What `start_drain` did in its one transaction.

    `claim` is None when a live driver holds the session (`busy`) or when there was nothing to
    do (no claim was written). `delivered` holds the inputs promoted with the claim; when one of
    them produced a message, the turn named in the call started in the same transaction.
    """

    claim: Claim | None
    busy: bool = False
    delivered: tuple[Delivered, ...] = ()


@dataclass(frozen=True, slots=True)
class Page:
    """One page of sessions, newest first; `next_cursor` continues the listing."""

    sessions: list[SessionRow]
    next_cursor: str | None


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
