"""A `message.added` body is stored lean (issue 36 item 5, `events/_codec.py`): its message
first, without the envelope's `v` and `type` (the `type` column holds it); every other event
keeps its envelope. Bodies written before, with the envelope, read as they did, alone and mixed
with lean ones in one session: by the typed, plain and built transcript reads, the event reads,
and the search index, on both backends; a store of migration 29 upgrades in place (migration
30, no statement) and code of migration 29 then refuses it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_database
from tests.store.helpers import as_of
from wakeful.errors import MigrationError, StoreError
from wakeful.events import (
    MESSAGE_ADDED_HEAD,
    MESSAGE_ADDED_HEADS,
    MessageAdded,
    SessionUpdated,
    _codec,
    dump_event,
    event_data,
    load_event,
    load_messages_added,
    messages_as_stored,
)
from wakeful.messages import assistant, user
from wakeful.store import SqlStore, _postgres, _sqlite, open_store
from wakeful.store._migrations import MIGRATIONS

BEFORE_30 = [m for m in MIGRATIONS if m[0] < 30]

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


def _fill_as_before(store: SqlStore) -> tuple[str, list[MessageAdded]]:
    """A session written with the envelope, as code of migration 29 wrote it."""
    with pytest.MonkeyPatch.context() as old:
        old.setattr(_codec, "_LEAN_LEAVES_OUT", set())
        sid = store.create_session().id
        events = [MessageAdded(message=user(f"before{i} words")) for i in range(5)]
        store.append(sid, events)
    return sid, events


def _upgraded_reads_whole(url: str, backend: Any) -> None:
    with pytest.MonkeyPatch.context() as old:
        as_of(old, backend, BEFORE_30)
        before = open_store(url)
        try:
            sid, events = _fill_as_before(before)
            typed, plain = before.messages(sid), before.plain_messages(sid)
            assert before.search("before3").hits
        finally:
            before.close()
    store = open_store(url)
    try:
        with store.backend.transaction(write=False) as tx:
            rows = tx.all("SELECT data FROM events WHERE session_id = ? ORDER BY seq", (sid,))
            assert tx.one("SELECT MAX(version) FROM schema_migrations") == (30,)
        assert sum(str(r[0]).startswith(MESSAGE_ADDED_HEADS[1]) for r in rows) == 5
        assert store.messages(sid) == typed and store.plain_messages(sid) == plain
        assert [e.event for e in store.events(sid, types=("message.added",))] == events
        later = MessageAdded(message=assistant("after words"))
        store.append(sid, [later])
        assert store.messages(sid) == [*typed, later.message]
        assert store.plain_messages(sid)[:5] == plain
        assert [h.session.id for h in store.search("before3").hits] == [sid]
        assert [h.session.id for h in store.search("after").hits] == [sid]
    finally:
        store.close()
    with pytest.MonkeyPatch.context() as old:  # code of migration 29 refuses it now
        as_of(old, backend, BEFORE_30)
        with pytest.raises(MigrationError):
            open_store(url).close()


def test_a_file_of_the_previous_schema_reads_back_whole(tmp_path: Path) -> None:
    _upgraded_reads_whole(str(tmp_path / "s.db"), _sqlite)


@pytest.mark.postgres
def test_a_database_of_the_previous_schema_reads_back_whole() -> None:
    with fresh_database() as url:
        _upgraded_reads_whole(url, _postgres)
