"""The ready queue (`store/_ready.py`): which sessions a worker may start now, reserved for it
in one transaction, disjoint between workers. Contract tests run unchanged on SQLite and
PostgreSQL; the PostgreSQL test shows a reservation passing over rows another transaction
holds instead of waiting for them.
"""

from __future__ import annotations

import threading

import pytest

from tests.pg import fresh_database
from wakeful.clock import FakeClock
from wakeful.events import MessageAdded, SessionCreated, ToolCallStarted
from wakeful.messages import Message, ToolCallBlock
from wakeful.store import Reservation, SqlStore, fence, open_store

NEW = SessionCreated(title="t")
LEASE = 1000


def nobody_dead(_owner: str) -> bool:
    """An `is_dead` for owners that all run."""
    return False


def ready(store: SqlStore, n: int, prefix: str = "ses_r") -> list[str]:
    """`n` sessions with one pending input each."""
    sids = [f"{prefix}{i:03d}" for i in range(n)]
    for sid in sids:
        store.admit(sid, f"in_{sid}", "user", {"text": "go"}, create=NEW)
    return sids


def ids(reserved: list[Reservation]) -> list[str]:
    return sorted(r.claim.session_id for r in reserved)


def test_reserve_takes_ready_sessions_and_delivers_nothing(store: SqlStore):
    sids = ready(store, 3)
    store.create_session("ses_idle")  # nothing pending: not ready
    held = store.claims.acquire(sids[0], "other", LEASE)  # a live driver's: not ready
    assert held is not None
    before = {sid: store.get_session(sid).last_seq for sid in sids}
    got = store.claims.reserve("me", LEASE, limit=10)
    assert ids(got) == sids[1:]
    for r in got:
        assert r.claim.owner == "me" and r.claim.epoch == 1 and not r.claim.taken_over
        assert not r.running_call and r.location is None
        assert store.current_claim(r.claim.session_id) == r.claim
        assert store.get_session(r.claim.session_id).last_seq == before[r.claim.session_id]
        assert [i.input_id for i in store.pending(r.claim.session_id)] == [
            f"in_{r.claim.session_id}"
        ]
    assert store.claims.reserve("me", LEASE, limit=10) == []  # all held now
    assert store.claims.look(nobody_dead) == (False, False)


def test_a_released_claim_is_reserved_at_the_next_epoch(store: SqlStore):
    [sid] = ready(store, 1)
    first = store.claims.acquire(sid, "earlier", LEASE)
    assert first is not None and store.claims.release(first)
    [again] = store.claims.reserve("me", LEASE, limit=1)
    assert again.claim.epoch == 2 and again.claim.attempts == 0
    assert store.current_claim(sid) == again.claim
    assert store.claims.release_all([first, again.claim]) == {sid}  # only the live one
    assert store.current_claim(sid) is None


def test_reserve_honours_limit_skip_and_places(store: SqlStore):
    sids = ready(store, 4)
    there = SessionCreated(title="t", location="/srv/there")
    store.admit("ses_there", "in_t", "user", {"text": "go"}, create=there)
    got = store.claims.reserve("me", LEASE, limit=2, skip=[sids[0]], places=(None, ["/srv/there"]))
    assert len(got) == 2 and sids[0] not in ids(got)
    rest = store.claims.reserve("me", LEASE, limit=10, places=(None, ["/srv/there"]))
    assert ids(got + rest) == sids  # the skipped one too, once not skipped
    assert store.claims.look(nobody_dead, places=(["/srv/there"], [])) == (False, True)
    [far] = store.claims.reserve("me", LEASE, limit=10, places=(["/srv/there"], []))
    assert far.claim.session_id == "ses_there" and far.location == "/srv/there"


def test_awaiting_approval_is_ready_only_for_a_decision(store: SqlStore):
    store.admit("ses_a", "i1", "user", {"text": "go"}, create=NEW)
    store.promote("ses_a", idle=True)
    with store.backend.transaction(write=True) as tx:  # as a turn waiting on approval leaves it
        tx.run("UPDATE sessions SET status = 'awaiting_approval' WHERE id = ?", ("ses_a",))
    store.admit("ses_a", "i2", "user", {"text": "queued meanwhile"}, delivery="queue")
    assert store.claims.look(nobody_dead) == (False, False)
    assert store.claims.reserve("me", LEASE, limit=5) == []
    store.admit("ses_a", "d1", "approval", {"call_id": "c1", "decision": "allow"})
    assert store.claims.look(nobody_dead) == (False, True)
    assert ids(store.claims.reserve("me", LEASE, limit=5)) == ["ses_a"]


def test_a_call_left_running_is_reported_with_the_reservation(store: SqlStore):
    store.admit("ses_a", "i1", "user", {"text": "go"}, create=NEW)
    claim = store.claims.acquire("ses_a", "earlier", LEASE)
    assert claim is not None
    reply = Message(role="assistant", blocks=(ToolCallBlock(id="c1", name="t", input={}),))
    store.append(
        "ses_a",
        [MessageAdded(message=reply), ToolCallStarted(call_id="c1", message_id=reply.id, name="t")],
        fence(claim),
    )
    store.claims.release(claim)  # released with its call running (a result it could not save)
    [r] = store.claims.reserve("me", LEASE, limit=1)
    assert r.running_call


def test_look_sees_orphans_by_lease_and_by_dead_owner(store: SqlStore, clock: FakeClock):
    store.create_session("ses_a")
    store.create_session("ses_b")
    assert store.claims.acquire("ses_a", "here/1/1", 60_000) is not None
    assert store.claims.look(nobody_dead, local_host="here") == (False, False)
    assert store.claims.look(lambda o: o == "here/1/1", local_host="here") == (True, False)
    assert store.claims.look(lambda o: True, local_host="elsewhere") == (False, False)
    assert store.claims.acquire("ses_b", "far/2/2", LEASE) is not None
    clock.advance(LEASE + 1)
    assert store.claims.look(nobody_dead) == (True, False)


def test_concurrent_reservations_are_disjoint(db_url: str, clock: FakeClock):
    """Three workers (three stores, as three processes would have) reserve at once."""
    stores = [open_store(db_url, clock=clock) for _ in range(3)]
    try:
        sids = ready(stores[0], 30)
        results: dict[int, list[Reservation]] = {}
        go = threading.Barrier(len(stores))

        def work(n: int, store: SqlStore) -> None:
            go.wait()
            taken: list[Reservation] = []
            while batch := store.claims.reserve(f"w{n}", LEASE, limit=3):
                taken += batch
            results[n] = taken

        threads = [threading.Thread(target=work, args=(n, s)) for n, s in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        got = [r.claim.session_id for rs in results.values() for r in rs]
        assert sorted(got) == sids  # every ready session reserved, none twice
        assert all(r.claim.epoch == 1 for rs in results.values() for r in rs)
    finally:
        for s in stores:
            s.close()


@pytest.mark.postgres
def test_postgres_reservations_skip_locked_rows_instead_of_waiting(clock: FakeClock):
    """While another transaction holds some ready sessions' rows (as a reservation or an
    admission locks them), a reservation takes the rest at once instead of waiting."""
    import psycopg

    with fresh_database() as url:
        store = open_store(url, clock=clock)
        try:
            sids = ready(store, 6)
            with psycopg.connect(url) as holder:
                held = holder.execute(
                    "SELECT id FROM sessions ORDER BY id LIMIT 2 FOR UPDATE"
                ).fetchall()
                # (waiting for the held rows would end in the lock timeout's StoreBusyError)
                taken = store.claims.reserve("b", LEASE, limit=10)
                holder.rollback()
            assert ids(taken) == sorted(set(sids) - {sid for (sid,) in held})
            assert len(store.claims.reserve("b", LEASE, limit=10)) == 2
        finally:
            store.close()


def test_release_and_look_frees_the_claim_and_sees_pending_input(store: SqlStore):
    [sid] = ready(store, 1)
    [r] = store.claims.reserve("me", LEASE, limit=1)
    assert store.claims.release_and_look(r.claim) == (True, True)  # its input still waits
    assert store.current_claim(sid) is None
    assert store.claims.release_and_look(r.claim) == (False, True)  # not ours any more
    [again] = store.claims.reserve("me", LEASE, limit=1)
    store.promote(sid, idle=True, claim=fence(again.claim))
    assert store.claims.release_and_look(again.claim) == (True, False)
