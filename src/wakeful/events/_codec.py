"""The JSON codec of durable events and the stored-event envelope."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, cast, get_args

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from ..errors import StoreError, UsageError
from ._sealed import SEALED, open_body
from ._shapes import MESSAGE_ADDED_HEAD
from ._types import MessageAdded, SessionEvent

# `dump_event` writes `v` then `type` first (the base model's field order), so the type of a
# stored body is read from its opening without parsing the rest; except a `message.added`
# body of version 1, which it writes lean: its message first, without `v` and `type` (the
# defaults; the `type` column holds it), so a body that opens with `MESSAGE_ADDED_HEAD` is one
# (issue 36 item 5: 29 bytes of the ~455 of most of a log's rows). Its message leaves out
# `"aborted":false` too (the default, and the one default `exclude_none` keeps: 17 bytes more,
# migration 31); an aborted message keeps its `"aborted":true`. Every reader fills the default
# back in (the models, `_built`, `_plain.shaped`, and the plain transcript read). Bodies
# written before keep their envelope, or their `aborted`, and read as they did.
_HEAD = re.compile(rb'\{\s*"v"\s*:\s*-?\d+\s*,\s*"type"\s*:\s*"([a-z_.]+)"')
_LEAN_HEAD = MESSAGE_ADDED_HEAD.encode()
_LEAN_LEAVES_OUT: dict[str, Any] = {"v": True, "type": True}
_LEAN_UNABORTED: dict[str, Any] = {"v": True, "type": True, "message": {"aborted": True}}


@cache
def _event_adapter() -> TypeAdapter[SessionEvent]:
    return TypeAdapter(SessionEvent)


@cache
def _added_adapter() -> TypeAdapter[list[MessageAdded]]:
    return TypeAdapter(list[MessageAdded])


@cache
def _event_classes() -> dict[str, type[BaseModel]]:
    """Each event type's model, by its `type` name."""
    union = get_args(get_args(SessionEvent)[0])
    return {cls.model_fields["type"].default: cls for cls in union}


def dump_event(event: SessionEvent) -> str:
    """Encode an event's body as compact JSON (its `type` goes in its own column too).

    Text that is not valid Unicode (a lone surrogate, e.g. from a `\\ud800` JSON escape or a
    command-line byte decoded with surrogateescape) cannot be encoded: a `UsageError` naming
    the event, raised before anything is written (every store write encodes its events first)."""
    try:
        if type(event) is MessageAdded and event.v == 1:  # lean (see `_HEAD`)
            lean = _LEAN_LEAVES_OUT if event.message.aborted else _LEAN_UNABORTED
            return event.model_dump_json(exclude_none=True, exclude=lean)
        return event.model_dump_json(exclude_none=True)
    except PydanticSerializationError:
        raise UsageError(
            f"{event.type}: holds text that is not valid Unicode (a lone surrogate); "
            "nothing was written"
        ) from None


def load_event(data: str | bytes) -> SessionEvent:
    """Decode an event body; a body this version cannot read raises `StoreError`.

    Pydantic builds a model's validator the first time it is used (the models are
    `defer_build`), so a body whose opening names its type is validated by that type's model
    alone: a command reading a few kinds of event builds those, not all of them (issue 25,
    cold start). Any other body goes through the whole discriminated union, as before."""
    data = open_body(data)
    raw = data.encode() if isinstance(data, str) else data
    lean = raw.startswith(_LEAN_HEAD)
    if lean:
        cls: type[BaseModel] | None = MessageAdded
    else:
        head = _HEAD.match(raw)
        cls = _event_classes().get(head.group(1).decode()) if head else None
    try:
        if cls is not None:
            try:
                return cast(SessionEvent, cls.model_validate_json(raw))
            except ValidationError:
                if lean:  # the union could not tell its type: this model names the error
                    raise
                # e.g. a duplicated key: the union decides, and names the error
        return _event_adapter().validate_json(raw)
    except ValidationError as err:
        raise StoreError(f"unreadable event: {err.errors()[0]['msg']}") from None


def load_messages_added(bodies: Sequence[str]) -> list[MessageAdded]:
    """Decode `message.added` bodies in one pass: one validation over them as one JSON array
    (a transcript's load, issue 36 item 6), not one call per body. What each gives is what
    `load_event` gives it; a batch with a body the fast pass refuses is decoded body by body,
    so an error names what `load_event` names."""
    if not bodies:
        return []
    if any(body[:1] == SEALED for body in bodies):
        bodies = [str(open_body(body)) for body in bodies]
    try:
        return _added_adapter().validate_json("[" + ",".join(bodies) + "]")
    except ValidationError:
        pass
    out: list[MessageAdded] = []
    for body in bodies:
        event = load_event(body)
        if not isinstance(event, MessageAdded):
            raise StoreError(f"not a message.added body: {event.type}")
        out.append(event)
    return out


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
