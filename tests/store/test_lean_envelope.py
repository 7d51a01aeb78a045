"""A `message.added` body is stored lean (issue 36 item 5, `events/_codec.py`): its message
first, without the envelope's `v` and `type` (the `type` column holds it); every other event
keeps its envelope. Bodies written before, with the envelope, read as they did, alone and mixed
with lean ones in one session: by the typed, plain and built transcript reads, the event reads,
and the search index, on both backends."""

from __future__ import annotations

import json

import pytest

from wakeful.errors import StoreError
from wakeful.events import (
    MESSAGE_ADDED_HEAD,
    MESSAGE_ADDED_HEADS,
    MessageAdded,
    SessionUpdated,
    dump_event,
    event_data,
    load_event,
    load_messages_added,
    messages_as_stored,
)
from wakeful.messages import assistant, user
from wakeful.store import SqlStore

pytestmark = pytest.mark.usefixtures("own_keys")  # plain: the test rewrites stored bodies


def _full(event: MessageAdded) -> str:
    """The body `dump_event` wrote for `event` before the lean envelope."""
    return event.model_dump_json(exclude_none=True)


def test_a_message_body_is_stored_without_its_envelope() -> None:
    for event in (
        MessageAdded(message=user("hi")),
        MessageAdded(message=assistant("there"), turn_id="turn_1"),
    ):
        body = dump_event(event)
        assert body.startswith(MESSAGE_ADDED_HEAD) and not body.startswith(MESSAGE_ADDED_HEADS[1])
        assert set(json.loads(body)) == {"message", *(["turn_id"] if event.turn_id else [])}
        assert len(body) == len(_full(event)) - len('"v":1,"type":"message.added",')
        assert load_event(body) == event == load_event(_full(event))
        assert (
            event_data(body)
            == event_data(_full(event))
            == event.model_dump(mode="json", exclude_none=True)
        )
        assert event_data(body.encode()) == event_data(body)
        assert load_messages_added([body, _full(event)]) == [event, event]
        assert messages_as_stored([body, _full(event)]) == [event.message, event.message]
    # every other event keeps its envelope (its type is read from its opening)
    other = dump_event(SessionUpdated(title="t"))
    assert other.startswith('{"v":1,"type":"session.updated"')


def test_an_unreadable_lean_body_names_its_error() -> None:
    with pytest.raises(StoreError, match="unreadable event"):
        load_event(MESSAGE_ADDED_HEAD + '{"role":"user"}}')


def test_bodies_with_and_without_the_envelope_read_alike(store: SqlStore) -> None:
    # A session written before (every body with its envelope) that goes on being written
    # after: both kinds of row in one transcript, of today's shapes.
    sid = store.create_session().id
    events = [
        MessageAdded(message=(user if i % 2 == 0 else assistant)(f"word{i} common"))
        for i in range(12)
    ]
    store.append(sid, events)
    lean = store.messages(sid), store.plain_messages(sid), store.events(sid)
    with store.backend.transaction(write=True) as tx:
        rows = tx.all(
            "SELECT seq, data FROM events WHERE session_id = ? AND type = 'message.added'", (sid,)
        )
        assert len(rows) == 12 and all(str(r[1]).startswith(MESSAGE_ADDED_HEAD) for r in rows)
        for seq, data in rows[::2]:  # every other one as main wrote it
            full = _full(MessageAdded.model_validate_json(data))
            tx.send("UPDATE events SET data = ? WHERE session_id = ? AND seq = ?", (full, sid, seq))
    assert (store.messages(sid), store.plain_messages(sid), store.events(sid)) == lean
    assert [p.data for p in store.plain_events(sid)] == [
        e.event.model_dump(mode="json", exclude_none=True) for e in lean[2]
    ]
    assert [h.session.id for h in store.search("word3").hits] == [sid]
    assert [h.session.id for h in store.search("word4").hits] == [sid]
    store.append(sid, [MessageAdded(message=user("word99 later"))])
    assert [h.session.id for h in store.search("word99").hits] == [sid]
    assert [m.text() for m in store.messages(sid)][-1] == "word99 later"
