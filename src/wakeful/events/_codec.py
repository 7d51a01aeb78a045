"""The JSON codec of durable events and the stored-event envelope."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import TypeAdapter, ValidationError

from ..errors import StoreError
from ._types import SessionEvent

_EVENT: TypeAdapter[SessionEvent] = TypeAdapter(SessionEvent)


def dump_event(event: SessionEvent) -> str:
    """Encode an event's body as compact JSON (its `type` goes in its own column too)."""
    return event.model_dump_json(exclude_none=True)


def load_event(data: str | bytes) -> SessionEvent:
    """Decode an event body; a body this version cannot read raises `StoreError`."""
    try:
        return _EVENT.validate_json(data)
    except ValidationError as err:
        raise StoreError(f"unreadable event: {err.errors()[0]['msg']}") from None


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as the log holds it: global `id`, per-session gap-free `seq`, time, body."""

    id: int
    session_id: str
    seq: int
    at_ms: int
    event: SessionEvent
    # The instance-wide log's order is (tx, id): `tx` is the commit group PostgreSQL recorded
    # (docs/store.md, "Instance-wide order"); 0 on SQLite and for events read per session.
    tx: int = field(default=0, compare=False, repr=False)

    @property
    def position(self) -> tuple[int, int]:
        """Where the event stands in the instance-wide log: `(tx, id)`."""
        return (self.tx, self.id)

    @property
    def type(self) -> str:
        """The event's type name, e.g. ``inbox.enqueued``."""
        return self.event.type

    def to_json(self) -> dict[str, object]:
        """The event as a JSON-ready dict (used by `wakeful log --format json` and the API)."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "seq": self.seq,
            "at_ms": self.at_ms,
            "type": self.type,
            "data": self.event.model_dump(mode="json", exclude_none=True),
        }
