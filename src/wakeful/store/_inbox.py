"""Admission and promotion of inbox items, each one transaction.

Invariants held here: an admitted input is delivered exactly once or still pending (1); steers
deliver in enqueue order, stop at a control item, and a queued item delivers only at an idle
boundary, one at a time (2); an input id reused with the same content returns the original and
with different content raises `ConflictError` (3) (once delivered, the content is the kind and
payload: a delivery mode is no longer compared, spec 003); a malformed item is rejected with a
session error and never strands later items (4). A `move` control item is delivered only at an
idle boundary, and its delivery is the move: `session.moved` and a chronological system message
commit with it (`docs/locations.md`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, InvalidMessageError, NotFoundError
from ._append import append_events, put_blobs_in
from ._backend import Pending, Row, ServerAdmission, Tx, sha256_hex
from ._cipher import Cipher, keyed, sealed
from ._records import AdmissionRequest, Delivered, InboxItem, Prelude

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..events import ApprovalDecided, Delivery, InputEnqueued, InputKind, SessionEvent
    from ..messages import Message

_ITEM_COLS = "i.input_id, i.seq, i.kind, i.delivery, i.status, i.message_id, e.data"


def content_digest(kind: str, payload: dict[str, JsonValue], delivery: str) -> str:
    """SHA-256 over the canonical JSON of what makes two admissions the same input."""
    canon = json.dumps([kind, payload, delivery], sort_keys=True, separators=(",", ":"))
    return sha256_hex(canon.encode())


def _item(session_id: str, row: Sequence[Any]) -> InboxItem:
    from ..events import InputEnqueued, load_event

    event = load_event(row[6])
    assert isinstance(event, InputEnqueued)
    return InboxItem(session_id, row[0], int(row[1]), row[2], row[3], event.payload, row[4], row[5])


def get_item(tx: Tx, session_id: str, input_id: str) -> InboxItem | None:
    """Read one inbox item (any status)."""
    row = tx.one(
        f"SELECT {_ITEM_COLS} FROM inbox i JOIN events e ON e.session_id = i.session_id "
        "AND e.seq = i.seq WHERE i.session_id = ? AND i.input_id = ?",
        (session_id, input_id),
    )
    return None if row is None else _item(session_id, row)


_PENDING_SQL = (
    f"SELECT {_ITEM_COLS} FROM inbox i JOIN events e ON e.session_id = i.session_id "
    "AND e.seq = i.seq WHERE i.session_id = ? AND i.status = 'pending' ORDER BY i.seq"
)


def pending_items(tx: Tx, session_id: str) -> list[InboxItem]:
    """Every pending item of a session, in enqueue order."""
    return [_item(session_id, r) for r in tx.all(_PENDING_SQL, (session_id,))]


def pending_input_ids(tx: Tx, session_id: str) -> list[str]:
    """The input ids of `pending_items`, in the same order, without decoding the items."""
    return [str(r[0]) for r in tx.all(_PENDING_SQL, (session_id,))]


ANY_PENDING_SQL = (
    "SELECT EXISTS (SELECT 1 FROM inbox WHERE session_id = ? AND status = 'pending'), "
    "EXISTS (SELECT 1 FROM sessions WHERE id = ?)"
)


def any_pending(tx: Tx, session_id: str) -> bool | None:
    """Whether the session has a pending item; None when there is no such session. One
    statement, no lock: what a promotion with nothing to write looks at first."""
    return any_pending_in(tx.query(ANY_PENDING_SQL, (session_id, session_id)))


def any_pending_in(sent: Pending) -> bool | None:
    """`any_pending`'s answer from its statement (`ANY_PENDING_SQL`, sent earlier)."""
    row = sent.one()
    return None if row is None or not row[1] else bool(row[0])


DIGEST_SQL = "SELECT digest FROM inbox WHERE session_id = ? AND input_id = ?"
# An encrypted store keeps an input's content digest as a keyed hash of it (`Cipher.keyed`):
# a SHA-256 of a short input would confirm a guess of it.
DIGEST_PURPOSE = "inbox"


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What an admission writes, built once per admission: the content digest, the
    `inbox.enqueued` event and that event's JSON (`dump_event`)."""

    digest: str
    event: InputEnqueued
    data: str


def enqueued(
    input_id: str,
    kind: InputKind,
    payload: dict[str, JsonValue],
    delivery: Delivery,
    actor: str | None = None,
) -> Enqueued:
    """The digest, event and event JSON of admitting `payload` as `input_id`, by `actor` (who
    admits it: recorded in the event, not part of what makes two admissions the same input)."""
    from ..events import InputEnqueued, dump_event

    event = InputEnqueued(
        input_id=input_id, kind=kind, delivery=delivery, payload=payload, actor=actor
    )
    return Enqueued(content_digest(kind, payload, delivery), event, dump_event(event))


def server_admission(
    session_id: str,
    input_id: str,
    kind: InputKind,
    payload: dict[str, JsonValue],
    delivery: Delivery,
    now_ms: int,
    prepared: Enqueued | None = None,
    cipher: Cipher | None = None,
) -> ServerAdmission:
    """What a server-side admission takes (`Tx.admit_on_server`, `Backend.admit_alone`), the
    content digest keyed and the event's JSON sealed by `cipher` (an encrypted store's); the
    store's own admission writes the same two values. `prepared` is `enqueued` of the same
    input when the caller built it already."""
    p = prepared or enqueued(input_id, kind, payload, delivery)
    data = sealed(cipher, session_id, p.data)
    digest = keyed(cipher, DIGEST_PURPOSE, p.digest)
    return ServerAdmission(session_id, input_id, kind, delivery, digest, p.event.type, data, now_ms)


def admission_outcome(
    row: Row | None,
    session_id: str,
    input_id: str,
    kind: InputKind,
    payload: dict[str, JsonValue],
    delivery: Delivery,
    original: Callable[[], InboxItem | None],
) -> tuple[InboxItem, bool] | None:
    """(item, created) from a server-side admission's row; None when the session did not
    exist; `ConflictError` when the input id names other content. `original` reads the item
    an existing input id names."""
    assert row is not None
    outcome, seq = row[0], row[1]
    if outcome == "missing":
        return None
    if outcome == "created":
        return InboxItem(session_id, input_id, int(seq), kind, delivery, payload, "pending"), True
    item = original()
    assert item is not None
    if outcome == "conflict" and not _resent_after_delivery(item, kind, payload):
        raise _conflict(session_id, input_id)
    return item, False


def _resent_after_delivery(item: InboxItem, kind: str, payload: dict[str, JsonValue]) -> bool:
    """A delivered input is reconciled by what it delivered (kind and payload), not by the
    delivery mode it was sent with (003): re-sent with another mode it is the same input."""
    return item.status == "delivered" and item.kind == kind and item.payload == payload


def _conflict(session_id: str, input_id: str) -> ConflictError:
    return ConflictError(
        f"input id {input_id!r} was already admitted to {session_id} with different content"
    )


def admit_in(
    tx: Tx,
    session_id: str,
    input_id: str,
    kind: InputKind,
    payload: dict[str, JsonValue],
    delivery: Delivery,
    now_ms: int,
    prepared: Enqueued | None = None,
) -> tuple[InboxItem, bool] | None:
    """Admit one input inside `tx`; return (item, created), or None when the session does not
    exist (nothing written).

    A database with a server-side admission call (PostgreSQL) runs it as one; elsewhere the
    lock, the idempotency check and the id reservation are sent together, then the writes.
    `prepared` is `enqueued` of the same input when the caller built it already.
    """
    made = prepared or enqueued(input_id, kind, payload, delivery)
    admission = server_admission(
        session_id, input_id, kind, payload, delivery, now_ms, made, tx.cipher
    )
    digest, data = admission.digest, admission.data  # keyed and sealed in an encrypted store
    sent = tx.admit_on_server(admission)
    if sent is not None:
        return admission_outcome(
            sent.one(),
            session_id,
            input_id,
            kind,
            payload,
            delivery,
            lambda: get_item(tx, session_id, input_id),
        )
    lock = tx.lock_query(session_id)
    existing = tx.query(DIGEST_SQL, (session_id, input_id))
    ids = tx.event_ids(1)
    locked = lock.one()
    if locked is None:
        return None
    found = existing.one()
    if found is not None:
        item = get_item(tx, session_id, input_id)
        assert item is not None
        if found[0] != digest and not _resent_after_delivery(item, kind, payload):
            raise _conflict(session_id, input_id)
        return item, False
    [stored] = append_events(
        tx, session_id, [made.event], now_ms, locked=locked, ids=ids, data=[data]
    )
    tx.send(
        "INSERT INTO inbox (session_id, input_id, seq, kind, delivery, digest, status) "
        "VALUES (?, ?, ?, ?, ?, ?, 'pending')",
        (session_id, input_id, stored.seq, kind, delivery, digest),
    )
    return InboxItem(session_id, input_id, stored.seq, kind, delivery, payload, "pending"), True


def admit_all_in(
    tx: Tx, requests: Sequence[AdmissionRequest], now_ms: int
) -> list[tuple[InboxItem, bool] | ConflictError | None]:
    """`admit_in` of each request (its input id given) in turn, inside `tx`; an input id naming
    other content is returned as its `ConflictError`, not raised, so the others go on (nothing
    of it was written). A database with a server-side admission call gets every call before
    the first outcome is read: one round trip for them all on PostgreSQL."""

    made = [enqueued(r.input_id or "", r.kind, r.payload, r.delivery, r.actor) for r in requests]

    def call(r: AdmissionRequest, p: Enqueued) -> Pending | None:
        return tx.admit_on_server(
            server_admission(
                r.session_id, r.input_id or "", r.kind, r.payload, r.delivery, now_ms, p, tx.cipher
            )
        )

    first = call(requests[0], made[0]) if requests else None
    sent = [None] * len(requests) if first is None else [first, *map(call, requests[1:], made[1:])]
    outcomes: list[tuple[InboxItem, bool] | ConflictError | None] = []
    for r, p, pending in zip(requests, made, sent, strict=True):
        sid, iid = r.session_id, r.input_id or ""
        try:
            if pending is None:
                outcomes.append(admit_in(tx, sid, iid, r.kind, r.payload, r.delivery, now_ms, p))
            else:
                outcomes.append(
                    admission_outcome(
                        pending.one(),
                        sid,
                        iid,
                        r.kind,
                        r.payload,
                        r.delivery,
                        functools.partial(get_item, tx, sid, iid),
                    )
                )
        except ConflictError as err:
            outcomes.append(err)
    return outcomes


def input_message(item: InboxItem) -> Message:
    """Build the transcript message of a user-like input; raise InvalidMessageError if malformed.

    Payload: ``{"text": str}`` or ``{"blocks": [...]}``, optional ``origin`` and ``metadata``.
    The message id is derived from the input id, so a redelivery could never mint a second one.
    """
    from pydantic import ValidationError

    from ..messages import Message, TextBlock, TextOrigin, block_from_dict

    payload = item.payload
    message_id, metadata = input_fields(item.session_id, item.input_id, item.kind, payload)
    try:
        if isinstance(payload.get("text"), str):
            origin = payload.get("origin")
            blocks: tuple[Any, ...] = (
                TextBlock(
                    text=str(payload["text"]),
                    origin=None if origin is None else TextOrigin.model_validate(origin),
                ),
            )
        elif isinstance(payload.get("blocks"), list):
            blocks = tuple(block_from_dict(b) for b in payload["blocks"])  # type: ignore[union-attr]  # a list: checked just above
        else:
            raise InvalidMessageError("needs `text` (string) or `blocks` (list)", field="payload")
        if not blocks:
            raise InvalidMessageError("is empty", field="payload.blocks")
        return Message(id=message_id, role="user", blocks=blocks, metadata=metadata)
    except ValidationError as err:
        raise InvalidMessageError(err.errors()[0]["msg"], field="payload") from None


def input_fields(
    session_id: str, input_id: str, kind: str, payload: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The id and the metadata of an input's message (`input_message`, `_plain_row_message`):
    the id derived from the input id, so a redelivery could never mint a second one."""
    metadata = payload.get("metadata")
    return (
        f"msg_in_{sha256_hex(f'{session_id}/{input_id}'.encode())[:24]}",
        {"input_id": input_id, "kind": kind} | (metadata if isinstance(metadata, dict) else {}),
    )


def sent_message_id(item: InboxItem) -> str | None:
    """The id of the transcript message an admitted input becomes (or became), known from
    the moment it is admitted: a send's result names it. None for a control item (it becomes
    no message of its own) and for an input rejected as malformed."""
    from ..events import CONTROL_KINDS

    if item.kind in CONTROL_KINDS or item.status == "rejected":
        return None
    return input_fields(item.session_id, item.input_id, item.kind, {})[0]


AWAITING_APPROVAL = "awaiting_approval"
DECISIONS = ("allow", "deny", "always")


def approval_decision(item: InboxItem) -> ApprovalDecided:
    """The decision an `approval` inbox item carries; `InvalidMessageError` if malformed.

    Payload: ``{"call_id": str, "decision": "allow" | "deny" | "always"}``.
    """
    from ..events import ApprovalDecided

    call_id, decision = item.payload.get("call_id"), item.payload.get("decision")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessageError("needs `call_id` (string)", field="payload")
    if decision not in DECISIONS:
        raise InvalidMessageError("`decision` must be allow, deny or always", field="payload")
    return ApprovalDecided.model_validate(
        {"call_id": call_id, "decision": decision, "input_id": item.input_id}
    )


def _select(
    pending: list[InboxItem], idle: bool, input_id: str | None, awaiting: bool = False
) -> list[InboxItem]:
    from ..events import CONTROL_KINDS

    if input_id is not None:
        return [i for i in pending if i.input_id == input_id]
    if awaiting:  # a session awaiting approval takes decisions only; other input waits
        return [i for i in pending if i.kind == "approval"]
    steers: list[InboxItem] = []
    for item in pending:
        if item.kind in CONTROL_KINDS:
            # A control item is a boundary: it goes alone, and only when nothing precedes it;
            # a move only between turns (idle), so a turn never changes place midway.
            if item.kind == "move" and not idle:
                return steers
            return steers or [item]
        if item.delivery == "steer":
            steers.append(item)
    if steers:
        return steers
    if idle:
        queued = [i for i in pending if i.delivery == "queue"]
        return queued[:1]
    return []


def deliverable(locked: Row, pending: list[InboxItem], *, idle: bool) -> bool:
    """Whether a promotion with `idle` would settle something now (deliver or reject), on the
    session row `locked` and its `pending` items (read with the lock: `lock_with_pending`)."""
    return bool(_select(pending, idle, None, locked[3] == AWAITING_APPROVAL))


@dataclass(frozen=True, slots=True)
class Promotion:
    """What a promotion decided inside its transaction: the items it delivered, the events
    that record it (written by the caller, in order), and the messages a delivery names (to
    index with the stored events: `index_deliveries`)."""

    delivered: list[Delivered]
    events: list[SessionEvent]
    named: dict[str, Message]


def plan_promotion(
    tx: Tx,
    session_id: str,
    now_ms: int,
    locked: Row,
    pending: list[InboxItem],
    *,
    idle: bool,
    input_id: str | None = None,
    start_turn: str | None = None,
    prelude: Prelude | None = None,
) -> Promotion:
    """Deliver the next items of `pending` by the steer/queue rules, inside `tx` whose session
    lock returned `locked`; return what was delivered and the events that say so.

    Malformed items are settled as rejected (with a `session.error`) and skipped. With
    `start_turn`, a delivery that produced messages also starts that turn in the same
    transaction, so no crash can leave delivered input without a turn to answer it; so does
    a delivery of approval decisions (the turn runs or denies the decided calls). A session
    awaiting approval takes decisions only; each is recorded as an `approval.decided` event in
    the delivery's transaction. A `prelude` planned at the session's current last seq goes
    first, when messages are delivered (its blobs are stored here).
    """
    from ..events import TurnStarted

    awaiting = locked[3] == AWAITING_APPROVAL  # the locked row's status
    events: list[SessionEvent] = []
    delivered: list[Delivered] = []
    while not delivered:
        chosen = _select(pending, idle, input_id, awaiting)
        if not chosen:
            break
        for item in chosen:
            pending.remove(item)
            _deliver(tx, session_id, item, events, delivered)
    inputs = tuple(
        d.item.input_id for d in delivered if d.message is not None or d.item.kind == "approval"
    )
    if start_turn is not None and inputs:
        events.append(TurnStarted(turn_id=start_turn, input_ids=inputs))
    if prelude is not None and inputs and int(locked[0]) == prelude.at_seq:
        events[:0] = prelude.events
        if prelude.blobs:
            put_blobs_in(tx, prelude.blobs, session_id, now_ms)
    named = {d.message.id: d.message for d in delivered if d.message is not None}
    return Promotion(delivered, events, named)


def _deliver(
    tx: Tx,
    session_id: str,
    item: InboxItem,
    events: list[SessionEvent],
    delivered: list[Delivered],
) -> None:
    """`plan_promotion`'s delivery of one chosen item: its events onto `events`, and onto
    `delivered` unless it was rejected as malformed (or a move was refused)."""
    from ..events import CONTROL_KINDS, InputDelivered

    if item.kind == "approval":
        try:
            decision = approval_decision(item)
        except InvalidMessageError as err:
            _reject(events, item, err)
            return
        events += [InputDelivered(input_id=item.input_id), decision]
        delivered.append(Delivered(item, None))
        return
    if item.kind == "move":
        moved = _move_events(tx, session_id, item)
        events += moved
        if isinstance(moved[0], InputDelivered):
            delivered.append(Delivered(item, None))
        return
    if item.kind in CONTROL_KINDS:
        events.append(InputDelivered(input_id=item.input_id))
        delivered.append(Delivered(item, None))
        return
    try:
        message = input_message(item)
    except InvalidMessageError as err:
        _reject(events, item, err)
        return
    events.append(InputDelivered(v=2, input_id=item.input_id, message_id=message.id))
    delivered.append(Delivered(item, message))


def lock_with_pending(
    tx: Tx, session_id: str, lock: Pending | None = None
) -> tuple[Row, list[InboxItem]]:
    """Lock the session (`lock`: its lock query, sent already) and read its pending items in
    the same round trip; `NotFoundError` when there is no such session."""
    lock = tx.lock_query(session_id) if lock is None else lock
    rows = tx.query(_PENDING_SQL, (session_id,))
    locked = lock.one()
    if locked is None:
        raise NotFoundError(f"no session {session_id}")
    return locked, [_item(session_id, r) for r in rows.all()]


def _reject(events: list[SessionEvent], item: InboxItem, err: InvalidMessageError | str) -> None:
    """Append the rejection of `item` (and the session error that says why) to `events`."""
    from ..events import InputRejected, SessionError

    events.append(InputRejected(input_id=item.input_id, reason=str(err)))
    events.append(
        SessionError(error=f"input {item.input_id} rejected: {err}", input_id=item.input_id)
    )


def move_text(previous: str | None, location: str) -> str:
    """The system message that records a move in the transcript."""
    return (
        f"This session moved from {previous or 'no recorded location'} to {location}. From now "
        f"on the tools work in {location}, and its instructions, configuration and permissions "
        "apply."
    )


def _move_events(tx: Tx, session_id: str, item: InboxItem) -> list[SessionEvent]:
    """A move's delivery: the delivery, `session.moved` and the system message; or, for a
    payload without an absolute `location`, its rejection."""
    from ..events import InputDelivered, MessageAdded, SessionMoved
    from ..messages import MOVE_RECORD, Message, TextBlock

    location = item.payload.get("location")
    if not isinstance(location, str) or not location.startswith("/"):
        rejected: list[SessionEvent] = []
        _reject(rejected, item, "a move needs an absolute `location` path")
        return rejected
    row = tx.one("SELECT location FROM sessions WHERE id = ?", (session_id,))
    previous = None if row is None else row[0]
    text = move_text(previous, location)
    return [
        InputDelivered(input_id=item.input_id),
        SessionMoved(location=location, previous=previous, input_id=item.input_id),
        MessageAdded(
            message=Message(
                role="system",
                blocks=(TextBlock(text=text),),
                metadata={"kind": MOVE_RECORD, "input_id": item.input_id},
            )
        ),
    ]
