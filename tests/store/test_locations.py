"""Session locations in the store: recorded at creation, inherited, backfilled by migration 8,
and found exactly through the `sessions_location` and `sessions_parent` indexes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from wakeful.clock import FakeClock
from wakeful.events import SessionCreated, SessionMoved, location_id
from wakeful.store import SqlStore, open_store


def test_location_is_recorded_and_inherited_by_children_and_forks(store: SqlStore):
    root = store.create_session(title="r", location="/w/a", metadata={"workspace": "/w/a", "k": 1})
    assert (root.location, root.location_id) == ("/w/a", location_id("/w/a"))
    assert root.location_id is not None and root.location_id.startswith("loc_")
    child = store.create_session(parent_id=root.id)
    assert child.location == "/w/a"
    fork = store.fork(root.id)
    assert fork.location == "/w/a" and fork.is_fork
    created = store.events(fork.id)[0].event
    assert isinstance(created, SessionCreated)
    assert created.location == "/w/a" and created.metadata == {"workspace": "/w/a", "k": 1}
    assert [r.id for r in store.children(root.id)] == [child.id]
    assert store.get_session(root.id).to_json()["location_id"] == location_id("/w/a")


def test_moved_event_changes_the_location(store: SqlStore):
    row = store.create_session(location="/w/a")
    store.claims.note_waits({row.id: "/w/a"})
    assert store.get_session(row.id).waiting_for == "/w/a"
    store.append(row.id, [SessionMoved(location="/w/b", previous="/w/a")])
    moved = store.get_session(row.id)
    assert (moved.location, moved.waiting_for) == ("/w/b", None)
    assert store.latest_session("/w/b") == moved
    assert store.latest_session("/w/a") is None


def test_latest_session_is_exact_per_location_among_thousands(store: SqlStore, clock: FakeClock):
    locations = ["/w/a", "/w/b", "/w/c"]
    newest: dict[str, str] = {}
    for i in range(900):
        clock.advance(3)  # rows closer together than the listing slack
        loc = locations[i % 3]
        newest[loc] = store.create_session(location=loc).id
    # The oldest session of /w/a is touched last: it is that location's newest now.
    first = store.list_sessions(limit=1000).sessions[-1]
    assert first.location == "/w/a"
    clock.advance(2)
    store.update_session(first.id, title="touched")
    newest["/w/a"] = first.id
    for loc in locations:
        assert store.latest_session(loc).id == newest[loc]  # type: ignore[union-attr]
    assert store.latest_session().id == first.id  # type: ignore[union-attr]
    assert store.latest_session("/w/none") is None


def _drop_migration_8(store: SqlStore) -> None:
    """Put the database back to schema 7 (as if written before locations existed)."""
    with store.backend.transaction(write=True) as tx:
        tx.run("DROP INDEX sessions_location")
        tx.run("DROP INDEX sessions_parent")
        tx.run("DROP TABLE session_waits")
        tx.run("ALTER TABLE sessions DROP COLUMN location")
        tx.run("DELETE FROM schema_migrations WHERE version = 8")


@pytest.mark.usefixtures("own_keys")  # plain: a store of an earlier schema with sessions
def test_migration_backfills_locations(db_url: str, clock: FakeClock):
    def make(store: SqlStore, **fields: object) -> str:
        return store.create_session(**fields).id  # type: ignore[arg-type]

    store = open_store(db_url, clock=clock)
    try:
        a = make(store, metadata={"workspace": "/w/a"})
        child = make(store, parent_id=a, metadata={"delegation": "foreground"})
        fork = make(store, forked_from=a, fork_seq=1)
        bare = make(store, metadata={"imported_from": "x"})
        none = make(store)
        _drop_migration_8(store)
    finally:
        store.close()
    store = open_store(db_url, clock=clock)
    try:
        got: Callable[[str], str | None] = lambda sid: store.get_session(sid).location  # noqa: E731
        assert [got(s) for s in (a, child, fork, bare, none)] == [
            "/w/a",
            "/w/a",
            "/w/a",
            None,
            None,
        ]
        assert store.latest_session("/w/a").id in (a, fork)  # type: ignore[union-attr]
        assert [r.id for r in store.children(a)] == [child]
    finally:
        store.close()


def test_a_move_is_delivered_only_at_an_idle_boundary_with_its_event_and_message(
    store: SqlStore,
):
    row = store.create_session(location="/w/a")
    store.admit(row.id, "in_1", "user", {"text": "before"})
    store.admit(row.id, "mv", "move", {"location": "/w/b"})
    store.admit(row.id, "in_2", "user", {"text": "after"})
    assert [d.item.input_id for d in store.promote(row.id, idle=False)] == ["in_1"]
    assert store.promote(row.id, idle=False) == []  # mid-turn: the move waits, and so does in_2
    assert store.get_session(row.id).location == "/w/a"
    [moved] = store.promote(row.id, idle=True)
    assert moved.item.input_id == "mv" and moved.message is None
    assert store.get_session(row.id).location == "/w/b"
    kinds = [e.event.type for e in store.events(row.id)][-3:]
    assert kinds == ["inbox.delivered", "session.moved", "message.added"]
    assert store.messages(row.id)[-1].role == "system"
    assert [d.item.input_id for d in store.promote(row.id, idle=False)] == ["in_2"]


def test_a_move_without_an_absolute_location_is_rejected(store: SqlStore):
    row = store.create_session(location="/w/a")
    store.admit(row.id, "mv", "move", {"location": "relative"})
    assert store.promote(row.id, idle=True) == []
    assert store.input(row.id, "mv").status == "rejected"
    assert store.get_session(row.id).location == "/w/a"
