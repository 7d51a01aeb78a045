"""A `message.added` body is stored lean (issue 36 item 5, `events/_codec.py`): its message
first, without the envelope's `v` and `type` (the `type` column holds it); every other event
keeps its envelope. Bodies written before, with the envelope, read as they did, alone and mixed
with lean ones in one session: by the typed, plain and built transcript reads, the event reads,
and the search index, on both backends; a store of migration 29 upgrades in place (migration
30, no statement) and code of migration 29 then refuses it.

Since migration 31 (no statement either) the message in such a body leaves out its default
`"aborted":false`; every read gives it back (the plain transcript read puts it back), bodies
written with it read as they did, and code of migration 30 refuses the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_database
from tests.store.helpers import as_of, frozen_before_key
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
from wakeful.messages import Message, assistant, user
from wakeful.store import SqlStore, _postgres, _sqlite, open_store
from wakeful.store._migrations import LATEST, MIGRATIONS
from wakeful.store._session_key import SESSION_KEY

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
        assert len(body) == len(_full(event)) - len('"v":1,"type":"message.added",') - len(
            ',"aborted":false'
        )
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
            tx.send(
                f"UPDATE event_log SET data = ? WHERE sk = {SESSION_KEY} AND seq = ?",
                (full, sid, seq),
            )
    assert (store.messages(sid), store.plain_messages(sid), store.events(sid)) == lean
    assert [p.data for p in store.plain_events(sid)] == [
        e.event.model_dump(mode="json", exclude_none=True) for e in lean[2]
    ]
    assert [h.session.id for h in store.search("word3").hits] == [sid]
    assert [h.session.id for h in store.search("word4").hits] == [sid]
    store.append(sid, [MessageAdded(message=user("word99 later"))])
    assert [h.session.id for h in store.search("word99").hits] == [sid]
    assert [m.text() for m in store.messages(sid)][-1] == "word99 later"


def _written_as_of(old: pytest.MonkeyPatch, migration: int) -> None:
    """`dump_event` as code of `migration` wrote a message body: with the envelope (29), or
    lean with its `"aborted":false` (30)."""
    if migration < 30:
        old.setattr(_codec, "_LEAN_LEAVES_OUT", {})
        old.setattr(_codec, "_LEAN_UNABORTED", {})
    else:
        old.setattr(_codec, "_LEAN_UNABORTED", _codec._LEAN_LEAVES_OUT)


def _upgraded_reads_whole(url: str, backend: Any, migration: int) -> None:
    """The store code of `migration` wrote (five messages, with the envelope at 29, lean with
    their `"aborted":false` at 30) upgrades and reads back whole; code of that migration then
    refuses it. Since migration 33 today's code cannot write those schemas: the stores are
    frozen, written by main at bb11560 (`tests/fixtures/make_before_key.py`)."""
    read = frozen_before_key(f"lean_envelope_{migration}", url)
    sid, plain = read["sid"], read["plain"]
    events = [MessageAdded.model_validate(e) for e in read["events"]]
    assert all(m["aborted"] is False for m in plain)
    store = open_store(url)
    try:
        with store.backend.transaction(write=False) as tx:
            rows = tx.all("SELECT data FROM events WHERE session_id = ? ORDER BY seq", (sid,))
            assert tx.one("SELECT MAX(version) FROM schema_migrations") == (LATEST,)
        head = MESSAGE_ADDED_HEADS[1] if migration < 30 else MESSAGE_ADDED_HEAD
        assert sum(str(r[0]).startswith(head) for r in rows) == 5
        assert sum('"aborted":false' in str(r[0]) for r in rows) == 5
        typed = store.messages(sid)
        assert [m.model_dump(mode="json") for m in typed] == read["messages"]
        assert store.plain_messages(sid) == plain
        assert [e.event for e in store.events(sid, types=("message.added",))] == events
        later = MessageAdded(message=assistant("after words"))
        store.append(sid, [later])
        assert store.messages(sid) == [*typed, later.message]
        assert store.plain_messages(sid) == [
            *plain,
            later.message.model_dump(mode="json", exclude_none=True),
        ]
        assert [h.session.id for h in store.search("before3").hits] == [sid]
        assert [h.session.id for h in store.search("after").hits] == [sid]
    finally:
        store.close()
    with pytest.MonkeyPatch.context() as old:  # code of that migration refuses it now
        as_of(old, backend, [m for m in MIGRATIONS if m[0] <= migration])
        with pytest.raises(MigrationError):
            open_store(url).close()


@pytest.mark.parametrize("migration", [29, 30])
def test_a_file_of_a_previous_schema_reads_back_whole(tmp_path: Path, migration: int) -> None:
    _upgraded_reads_whole(str(tmp_path / "s.db"), _sqlite, migration)


@pytest.mark.postgres
@pytest.mark.parametrize("migration", [29, 30])
def test_a_database_of_a_previous_schema_reads_back_whole(migration: int) -> None:
    with fresh_database() as url:
        _upgraded_reads_whole(url, _postgres, migration)


def _cut(text: str) -> Message:
    return assistant(text).model_copy(update={"aborted": True})


def test_a_message_body_leaves_out_its_default_aborted() -> None:
    for event in (MessageAdded(message=user("hi")), MessageAdded(message=_cut("half an ans"))):
        body = dump_event(event)
        written = json.loads(body)["message"]
        assert written.get("aborted", False) is event.message.aborted
        assert ("aborted" in written) is event.message.aborted
        with_it = _full(event).replace('"v":1,"type":"message.added",', "")
        assert len(body) == len(with_it) - (0 if event.message.aborted else len(',"aborted":false'))
        assert load_event(body) == event == load_event(with_it)
        assert (
            event_data(body)
            == event_data(with_it)
            == event.model_dump(mode="json", exclude_none=True)
        )
        assert messages_as_stored([body, with_it]) == [event.message, event.message]
        assert load_messages_added([body, with_it]) == [event, event]


def test_bodies_with_and_without_aborted_read_alike(store: SqlStore) -> None:
    # A session of migration 30's rows (each message with `"aborted":false`) going on with
    # rows that leave it out, and an aborted message among them: every read as before.
    sid = store.create_session().id
    with pytest.MonkeyPatch.context() as old:
        _written_as_of(old, 30)
        store.append(sid, [MessageAdded(message=user(f"old{i} words")) for i in range(3)])
    events = [MessageAdded(message=assistant("new words")), MessageAdded(message=_cut("cut sho"))]
    store.append(sid, events)
    with store.backend.transaction(write=False) as tx:
        rows = tx.all("SELECT data FROM events WHERE session_id = ? ORDER BY seq", (sid,))
    bodies = [str(r[0]) for r in rows if str(r[0]).startswith(MESSAGE_ADDED_HEAD)]
    assert ['"aborted"' in b for b in bodies] == [True, True, True, False, True]
    typed = store.messages(sid)
    assert [m.aborted for m in typed] == [False, False, False, False, True]
    expected = [m.model_dump(mode="json", exclude_none=True) for m in typed]
    plain = store.plain_messages(sid)
    assert plain == expected
    assert [list(m) for m in plain] == [list(m) for m in expected]  # the dump's key order too
    assert [json.dumps(m) for m in plain] == [json.dumps(m) for m in expected]
    assert [p.data for p in store.plain_events(sid)] == [
        e.event.model_dump(mode="json", exclude_none=True) for e in store.events(sid)
    ]
    assert [h.session.id for h in store.search("old1").hits] == [sid]
