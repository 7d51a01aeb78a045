"""The transcript read from the log: each session's messages in order, typed or as plain JSON,
an admitted input's message built from its `inbox.enqueued` row where the log names it
(`inbox.delivered` v2), for one session, a page of one, or many at once (`_batch`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, UsageError
from ._backend import Pending, Row, Tx, iter_chunks
from ._bulk import collector_paused
from ._cipher import opened
from ._records import InboxItem
from ._typed_events import typed

if TYPE_CHECKING:
    from ..messages import Message
from ._inbox import input_fields, input_message


def _message_rows(sessions: str, columns: str, also: str = "", joins: str = "") -> str:
    """The transcript's rows of the sessions `sessions` (a condition on `m.session_id`) with
    `seq` in a range, by session, in log order: `columns` of each visible message row `m`, of
    the event `e` that holds its message (its own, or the history edit that replaced its
    text) and of its session `s` (and the condition `also` and the tables `joins`, when
    given)."""
    return (
        f"SELECT {columns} FROM messages m JOIN sessions s ON s.id = m.session_id "
        "JOIN events e ON e.session_id = m.session_id AND e.seq = COALESCE(m.body_seq, m.seq) "
        f"{joins}WHERE m.session_id {sessions} AND m.seq > ? AND m.seq <= ? "
        f"AND m.reverted IS NULL {also}ORDER BY m.session_id, m.seq"
    )


# A transcript row's `seq` when its event is an input's delivery (whose message may have to be
# derived from the enqueued event), else NULL: the second column of every transcript read.
_DELIVERED_SEQ = "CASE WHEN e.type = 'inbox.delivered' THEN m.seq END"
# (the typed read's fourth column: whether its session's bodies were all written under today's
# shapes, a flag rather than the digest, which would be a string per row; the parameter is
# `SHAPES_DIGEST`; a read of many sessions adds each row's session id)
_TYPED_COLUMNS = f"m.seq, {_DELIVERED_SEQ}, e.data, s.message_shapes = ?"
_BATCH_COLUMNS = f"{_TYPED_COLUMNS}, m.session_id"
_PLAIN_COLUMNS = f"e.data, {_DELIVERED_SEQ}"  # (one session; a row's seq matters for neither)


def _enqueued_rows(sessions: str, also: str = "") -> str:
    """`(session, settled seq, enqueued event)` of the inputs of the sessions `sessions` settled
    at a `seq` in a range: the event a version-2 delivery derives its message from (and the
    condition `also`, when given)."""
    return (
        "SELECT i.session_id, i.settled_seq, q.data FROM inbox i "
        "JOIN events q ON q.session_id = i.session_id AND q.seq = i.seq "
        f"WHERE i.session_id {sessions} AND i.settled_seq > ? AND i.settled_seq <= ?{also}"
    )


# Whether the session (bound once more) has no `compaction.ended` event: its active history
# then starts at its first message, known without reading the compactions first.
_UNCOMPACTED = (
    "AND NOT EXISTS (SELECT 1 FROM events c WHERE c.session_id = ? "
    f"AND c.type = 'compaction.ended' AND {typed('c.type')}) "
)

# A version-2 delivery's enqueued event, joined to its transcript row (`q.data`: NULL for any
# other row): the lookup `_enqueued_rows` makes in a statement of its own.
_ENQUEUED_JOIN = (
    "LEFT JOIN inbox i ON e.type = 'inbox.delivered' AND i.session_id = m.session_id "
    "AND i.settled_seq = m.seq LEFT JOIN event_log q ON q.sk = m.sk AND q.seq = i.seq "
)
_JOINED_COLUMNS = f"{_TYPED_COLUMNS}, q.data"


def transcript_query(
    tx: Tx, session_id: str, after_seq: int = 0, *, uncompacted: bool = False
) -> Pending:
    """Send the statement of the session's transcript after `after_seq` (its rows, each with
    the enqueued event a delivery derives its message from: one statement, where a whole
    transcript's read makes that lookup only when a row needs it) and read nothing yet: read
    it with `transcript_from`. `uncompacted`: it finds rows only when the session has no
    `compaction.ended` event (its history's boundary is 0 then); a turn's opening sends it
    with its own (`_opening.opening_in`), so the first step's history read is in that round
    trip. Meant for the few rows a unit's last read or an opening finds."""
    from ..events import SHAPES_DIGEST

    also = _UNCOMPACTED if uncompacted else ""
    bounds = (session_id, after_seq, 2**62) + ((session_id,) if uncompacted else ())
    sql = _message_rows("= ?", _JOINED_COLUMNS, also, _ENQUEUED_JOIN)
    return tx.query(sql, (SHAPES_DIGEST, *bounds))


def transcript_from(tx: Tx, session_id: str, sent: Pending) -> list[tuple[int, Message]]:
    """The messages `transcript_query` read, as `transcript_in(tx, session_id, after_seq)`
    would return them."""
    rows = sent.all()
    if tx.cipher is not None:  # an encrypted store: the bodies opened once, here
        rows = [tuple(opened(v) if isinstance(v, str) else v for v in row) for row in rows]
    found = {(session_id, int(row[0])): str(row[4]) for row in rows if row[4] is not None}
    messages = _row_messages(session_id, rows, found)
    return list(zip([int(row[0]) for row in rows], messages, strict=True))


def _transcript_rows(
    tx: Tx, session_ids: Sequence[str], after_seq: int, upto_seq: int, columns: str
) -> tuple[list[Row], dict[tuple[str, int], str]]:
    """The transcript rows (`_message_rows` with `columns`, the second of them
    `_DELIVERED_SEQ`; typed columns take `SHAPES_DIGEST`) of `session_ids` in
    `(after_seq, upto_seq]`, and the enqueued events of the inputs delivered among them by
    `(session, seq)`. That second statement runs only when a row is a delivery: a transcript
    without delivered inputs is one indexed join, with no inbox lookup per message."""
    from ..events import SHAPES_DIGEST

    sessions = "= ?" if len(session_ids) == 1 else f"IN ({', '.join('?' for _ in session_ids)})"
    first = (SHAPES_DIGEST,) if columns != _PLAIN_COLUMNS else ()
    rows = tx.all(_message_rows(sessions, columns), (*first, *session_ids, after_seq, upto_seq))
    if tx.cipher is not None:  # an encrypted store: the bodies opened once, here
        rows = [tuple(opened(v) if isinstance(v, str) else v for v in row) for row in rows]
    if all(row[1] is None for row in rows):
        return rows, {}
    enqueued = tx.all(_enqueued_rows(sessions), (*session_ids, after_seq, upto_seq))
    return rows, {(str(sid), int(seq)): opened(data) for sid, seq, data in enqueued}


_LOG_MESSAGE_ROWS = (
    "SELECT e.seq, e.data, q.data FROM events e "
    "LEFT JOIN inbox i ON e.type = 'inbox.delivered' AND i.session_id = e.session_id "
    "AND i.settled_seq = e.seq "
    "LEFT JOIN event_log q ON q.sk = e.sk AND q.seq = i.seq "
    "WHERE e.session_id = ? AND e.seq < ? "
    "AND e.type IN ('message.added', 'inbox.delivered', 'history.edited') ORDER BY e.seq"
)


def message_bodies_in(tx: Tx, session_id: str, before_seq: int) -> dict[str, Message]:
    """Every message the log held before `before_seq`, by id, as it read then: hidden and
    reverted messages included, a replaced text as it was (what a receipt of that time saw)."""
    out: dict[str, Message] = {}
    for _seq, data, enqueued in tx.all(_LOG_MESSAGE_ROWS, (session_id, before_seq)):
        message = row_message(session_id, data, enqueued)
        if message is not None:
            out[message.id] = message
    return out


def row_message(session_id: str, data: str, enqueued: str | None) -> Message | None:
    """The message a transcript row's event `data` holds (for a version-2 delivery, derived
    from the enqueued event `enqueued`), None for a control item's delivery."""
    from ..events import InputDelivered, InputEnqueued, load_event
    from ..messages import Message

    event = load_event(data)
    message = getattr(event, "message", None)
    if isinstance(event, InputDelivered) and message is None and event.message_id is None:
        return None  # a control item's delivery: no message
    if message is None and isinstance(event, InputDelivered) and enqueued is not None:
        source = load_event(enqueued)
        assert isinstance(source, InputEnqueued)
        item = InboxItem(
            session_id,
            source.input_id,
            0,
            source.kind,
            source.delivery,
            source.payload,
            "delivered",
        )
        message = input_message(item)
    return message if isinstance(message, Message) else None


def plain_transcript_in(tx: Tx, session_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
    """`transcript_in`'s messages (those after `after_seq`) as plain dumps, what
    `model_dump(mode="json", exclude_none=True)` of each gives (`wakeful session show`, issue
    25); `NotFoundError` for an unknown session.

    A session whose message bodies were all written under today's shapes
    (`sessions.message_shapes`, migration 19) gives each `message.added` body's message as
    stored: `dump_event` wrote it as that dump of the validated model (but a default
    `aborted`, put back here), so no model is built and nothing is reshaped. Any other row is read where the plain reading vouches for the
    stored JSON (`wakeful.events.shaped`), else through the models."""
    from ..events import MESSAGE_ADDED_HEAD, MESSAGE_ADDED_HEADS, SHAPES_DIGEST  # (no models)

    shapes = tx.one("SELECT message_shapes FROM sessions WHERE id = ?", (session_id,))
    if shapes is None:
        raise NotFoundError(f"no session {session_id}")
    as_stored = shapes[0] == SHAPES_DIGEST
    decode, lean, at = _decode_at, MESSAGE_ADDED_HEAD, len(MESSAGE_ADDED_HEAD)
    full = len(MESSAGE_ADDED_HEADS[1])
    out: list[dict[str, Any]] = []
    rows, enqueued = _transcript_rows(tx, [session_id], after_seq, 2**62, _PLAIN_COLUMNS)
    with collector_paused():
        for data, delivered in rows:
            if as_stored and data.startswith(MESSAGE_ADDED_HEADS):
                message = decode(data, at if data.startswith(lean) else full)[0]
                # `dump_event` leaves out a message's default `"aborted":false` (migration
                # 31); `aborted` is the message's last field, so this is the dump's order
                message.setdefault("aborted", False)
                out.append(message)
                continue
            source = None if delivered is None else enqueued.get((session_id, int(delivered)))
            message = _reshaped_row_message(session_id, data, source)
            assert message is not None, f"a message row of {session_id} has no message"
            out.append(message)
    return out


def _reshaped_row_message(
    session_id: str, data: str, enqueued: str | None
) -> dict[str, Any] | None:
    """`row_message` as a plain dump: read plain where the plain reading vouches for the
    stored JSON, else through the models."""
    from ..events import NotPlain

    try:
        return _plain_row_message(session_id, data, enqueued)
    except NotPlain:  # this row's message through the models
        model = row_message(session_id, data, enqueued)
        return None if model is None else model.model_dump(mode="json", exclude_none=True)


# Decodes one JSON value at an offset of a text and stops there: the message of a
# `message.added` body, without the envelope around it.
_decode_at = json.JSONDecoder().raw_decode


def _plain_row_message(session_id: str, data: str, enqueued: str | None) -> dict[str, Any] | None:
    """`row_message` as a plain dump; `NotPlain` for a delivery whose message the plain
    reading cannot derive (a payload of blocks: the model may convert their values)."""
    from ..events import NotPlain, event_data, shaped

    event = event_data(data)
    message = event.get("message")
    if event["type"] == "inbox.delivered" and message is None:
        if event.get("message_id") is None or enqueued is None:
            return None  # a control item's delivery: no message
        source = event_data(enqueued)
        payload = source["payload"]
        text = payload.get("text")
        if source["type"] != "inbox.enqueued" or not isinstance(text, str):
            raise NotPlain("an input of blocks")
        origin = payload.get("origin")
        block = {"type": "text", "text": text} | ({} if origin is None else {"origin": origin})
        message_id, metadata = input_fields(session_id, source["input_id"], source["kind"], payload)
        message = shaped(
            "Message", {"id": message_id, "role": "user", "blocks": [block], "metadata": metadata}
        )
    return message if isinstance(message, dict) else None


def transcript_in(
    tx: Tx, session_id: str, after_seq: int = 0, upto_seq: int | None = None
) -> list[tuple[int, Message]]:
    """The session's messages with their `seq`, in log order, inside `tx`.

    A message comes from its `message.added` event, a version-1 `inbox.delivered` (which copies
    it), or a version-2 `inbox.delivered` (derived again from the enqueued payload).
    """
    rows, messages = _session_transcript(tx, session_id, after_seq, upto_seq)
    return list(zip([int(row[0]) for row in rows], messages, strict=True))


def messages_in(
    tx: Tx, session_id: str, after_seq: int = 0, upto_seq: int | None = None
) -> list[Message]:
    """`transcript_in`'s messages alone (`messages()`: no pair per message)."""
    return _session_transcript(tx, session_id, after_seq, upto_seq)[1]


def _session_transcript(
    tx: Tx, session_id: str, after_seq: int, upto_seq: int | None
) -> tuple[list[Row], list[Message]]:
    upto = upto_seq if upto_seq is not None else 2**62
    rows, enqueued = _transcript_rows(tx, [session_id], after_seq, upto, _TYPED_COLUMNS)
    return rows, _row_messages(session_id, rows, enqueued)


def message_at(tx: Tx, session_id: str, seq: int) -> Message | None:
    """The transcript's message at `seq` (None: none there, or not visible)."""
    found = transcript_in(tx, session_id, seq - 1, seq)
    return found[0][1] if found else None


def page_end(tx: Tx, session_id: str, after_seq: int, limit: int) -> int | None:
    """The `seq` of the `limit`-th visible message after `after_seq` (where a page of that
    many ends), or None when fewer follow (the page runs to the end). Read from the
    `messages` projection's key alone."""
    if limit < 1:
        raise UsageError("limit must be at least 1")
    row = tx.one(
        "SELECT seq FROM messages WHERE session_id = ? AND seq > ? AND reverted IS NULL "
        "ORDER BY seq LIMIT 1 OFFSET ?",
        (session_id, after_seq, limit - 1),
    )
    return None if row is None else int(row[0])


def transcripts_in(tx: Tx, session_ids: Sequence[str]) -> dict[str, list[tuple[int, Message]]]:
    """`transcript_in` of each of `session_ids` (whole), with one statement per 500 sessions;
    a session without messages is left out."""
    out: dict[str, list[tuple[int, Message]]] = {}
    for chunk in iter_chunks(session_ids, 500):
        rows, enqueued = _transcript_rows(tx, chunk, 0, 2**62, _BATCH_COLUMNS)
        for session_id, group in groupby(rows, key=itemgetter(4)):
            them = list(group)
            messages = _row_messages(session_id, them, enqueued)
            out[session_id] = list(zip([int(r[0]) for r in them], messages, strict=True))
    return out


def _row_messages(
    session_id: str, rows: Sequence[Row], enqueued: dict[tuple[str, int], str]
) -> list[Message]:
    """The messages of one session's transcript `rows` (`_TYPED_COLUMNS`), in order. The
    `message.added` bodies (most of a transcript) are built in one pass: as stored in a
    session of today's shapes (`messages_as_stored`), else validated together
    (`load_messages_added`); the other rows one by one."""
    from ..events import MESSAGE_ADDED_HEADS

    head = MESSAGE_ADDED_HEADS  # (lean, or as written before)
    with collector_paused():
        bodies = [row[2] for row in rows if row[2].startswith(head)]
        added = _added_messages(bodies, bool(rows) and bool(rows[0][3]))
        if len(added) == len(rows):  # (a transcript of appended messages only)
            return added
        out: list[Message] = []
        next_added = iter(added).__next__
        for seq, delivered, data, *_ in rows:
            if data.startswith(head):
                message: Message | None = next_added()
            else:
                source = None if delivered is None else enqueued.get((session_id, int(delivered)))
                message = row_message(session_id, data, source)
            assert message is not None, f"message row {session_id}/{seq} has no message"
            out.append(message)
    return out


def _added_messages(bodies: list[str], as_stored: bool) -> list[Message]:
    """The messages of `message.added` bodies: built as stored when `as_stored` (every body's
    session is of today's shapes) and the builder vouches for them all, else validated."""
    from ..events import NotPlain, messages_as_stored

    if not bodies:
        return []
    if as_stored:
        try:
            return messages_as_stored(bodies)
        except NotPlain:
            pass
    from ..events import load_messages_added  # (the event models: not needed until here)

    return [event.message for event in load_messages_added(bodies)]
