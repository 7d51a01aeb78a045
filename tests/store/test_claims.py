"""Claims as a drain and a worker use them: the claim taken with the first turn, batch takeovers
that concurrent workers split, and leases renewed together. Contract tests run unchanged on
SQLite and PostgreSQL; the last test shows that PostgreSQL workers do not wait on each other.
"""

from __future__ import annotations

import threading

import pytest

from tests.pg import fresh_database
from tests.store.helpers import add_message
from wakeful.clock import FakeClock
from wakeful.errors import ClaimLostError
from wakeful.events import MessageAdded, SessionCreated, ToolCallStarted, TurnEnded
from wakeful.execution._writes import start_drain
from wakeful.messages import Message, ToolCallBlock, assistant
from wakeful.store import Claim, SqlStore, fence, open_store

NEW = SessionCreated(title="t")
LEASE = 1000


def nobody_dead(_owner: str) -> bool:
    """An `is_dead` for owners that all run."""
    return False


def test_start_drain_claims_delivers_and_starts_the_turn_in_one_transaction(store: SqlStore):
    store.admit("ses_a", "i1", "user", {"text": "one"}, create=NEW)
    store.admit("ses_a", "i2", "user", {"text": "two"})
    before = store.get_session("ses_a").last_seq
    start = start_drain(store, "ses_a", "me", LEASE, start_turn="turn_1")
    assert start.claim is not None and not start.claim.taken_over and not start.busy
    assert [d.item.input_id for d in start.delivered] == ["i1", "i2"]
    written = store.events("ses_a", after=before)
    assert [e.type for e in written] == ["inbox.delivered", "inbox.delivered", "turn.started"]
    assert {e.seq for e in written} == set(range(before + 1, before + 4))
    [turn] = store.turns("ses_a")
    assert turn.turn_id == "turn_1" and turn.status == "running"
    assert store.current_claim("ses_a") == Claim(
        "ses_a", "me", start.claim.token, 1, start.claim.lease_until_ms
    )
    add_message(store, "ses_a", assistant("ok"), turn_id="turn_1", claim=fence(start.claim))


def test_start_drain_with_nothing_to_do_writes_nothing(store: SqlStore):
    store.admit("ses_a", "i1", "user", {"text": "later"}, delivery="queue", create=NEW)
    store.promote("ses_a", idle=True)  # the queued item is delivered; nothing is left
    before = store.get_session("ses_a")
    start = start_drain(store, "ses_a", "me", LEASE, start_turn="turn_1")
    assert start.claim is None and not start.busy and not start.delivered
    assert store.get_session("ses_a") == before and store.claims.held() == []


def test_start_drain_is_busy_while_a_live_driver_holds_the_claim(store: SqlStore):
    store.admit("ses_a", "i1", "user", {"text": "one"}, create=NEW)
    held = store.claims.acquire("ses_a", "other", LEASE)
    assert held is not None
    before = store.get_session("ses_a").last_seq
    start = start_drain(store, "ses_a", "me", LEASE, nobody_dead, start_turn="turn_1")
    assert start.claim is None and start.busy
    assert store.get_session("ses_a").last_seq == before
    assert [i.input_id for i in store.pending("ses_a")] == ["i1"]
    assert store.current_claim("ses_a") == held


def test_start_drain_takes_over_an_orphan_without_promoting(store: SqlStore, clock: FakeClock):
    store.admit("ses_a", "i1", "user", {"text": "one"}, create=NEW)
    crashed = start_drain(store, "ses_a", "crashed", LEASE, start_turn="turn_1")
    assert crashed.claim is not None
    store.admit("ses_a", "i2", "user", {"text": "two"})
    clock.advance(LEASE + 1)
    start = start_drain(store, "ses_a", "me", LEASE, start_turn="turn_2")
    assert start.claim is not None and start.claim.taken_over and start.claim.epoch == 2
    assert start.delivered == ()  # healing comes first; i2 waits for the drain's next promote
    assert [i.input_id for i in store.pending("ses_a")] == ["i2"]
    assert [t.turn_id for t in store.turns("ses_a")] == ["turn_1"]
    with pytest.raises(ClaimLostError):
        add_message(store, "ses_a", assistant("late"), claim=fence(crashed.claim))


def test_start_drain_over_a_released_claim_with_a_running_call_promotes_nothing(
    store: SqlStore,
):
    store.admit("ses_a", "i1", "user", {"text": "one"}, create=NEW)
    first = start_drain(store, "ses_a", "gone", LEASE, start_turn="turn_1")
    assert first.claim is not None
    call = ToolCallBlock(id="call_1", name="shell", input={"command": "true"})
    reply = Message(role="assistant", blocks=(call,))
    started = ToolCallStarted(call_id="call_1", message_id=reply.id, name="shell", input={})
    store.append(
        "ses_a", [MessageAdded(message=reply, turn_id="turn_1"), started], fence(first.claim)
    )
    store.append("ses_a", [TurnEnded(turn_id="turn_1", outcome="failed")], fence(first.claim))
    assert store.claims.release(first.claim)  # its result was never saved
    store.admit("ses_a", "i2", "user", {"text": "two"})
    start = start_drain(store, "ses_a", "me", LEASE, start_turn="turn_2")
    assert start.claim is not None and not start.claim.taken_over
    assert start.delivered == ()  # the call is settled first; i2 waits for the next promote
    assert [i.input_id for i in store.pending("ses_a")] == ["i2"]
    store.claims.release(start.claim)
    store.promote("ses_a", idle=True)  # with nothing pending, still taken: the call is orphaned
    assert start_drain(store, "ses_a", "me", LEASE, start_turn="turn_3").claim is not None


def orphans(store: SqlStore, n: int, owner: str) -> list[str]:
    sids = [f"ses_{owner.replace('/', '_')}_{i}" for i in range(n)]
    for sid in sids:
        store.admit(sid, "i1", "user", {"text": "x"}, create=NEW)
        assert start_drain(store, sid, owner, 60_000, start_turn=f"turn_{sid}").claim is not None
    return sids


def test_take_over_claims_takes_expired_and_dead_owners_only(store: SqlStore, clock: FakeClock):
    expired = orphans(store, 2, "gone-host/1/1")
    clock.advance(60_001)
    dead = orphans(store, 2, "here/7/7")
    alive = orphans(store, 2, "here/8/8")
    taken = store.claims.take_over(
        "me", LEASE, lambda owner: owner == "here/7/7", local_host="here", limit=10
    )
    assert sorted(c.session_id for c in taken) == sorted(expired + dead)
    assert all(c.taken_over and c.epoch == 2 and c.attempts == 1 for c in taken)
    assert {c.session_id for c in store.claims.held() if c.owner == "me"} == set(expired + dead)
    assert {c.session_id for c in store.claims.held() if c.owner == "here/8/8"} == set(alive)
    assert store.claims.take_over("me", LEASE, nobody_dead, local_host="here") == []


def test_live_claims_do_not_hide_dead_owners_orphans(store: SqlStore, clock: FakeClock):
    """A worker's own live claims (their leases end sooner) come first in lease order; a look
    limited to fewer rows than they are must still find the dead owner's orphans behind them
    (it found none, and `wakeful worker --once` ended with orphans left)."""
    dead = orphans(store, 3, "here/7/7")
    # the dead driver's leases run longer than the live ones below
    assert store.claims.renew(store.claims.held(), 3_600_000) == set(dead)
    mine = orphans(store, 3, "here/8/8")
    taken = store.claims.take_over(
        "here/8/8", LEASE, lambda owner: owner == "here/7/7", local_host="here", limit=2
    )
    assert len(taken) == 2 and {c.session_id for c in taken} <= set(dead)
    rest = store.claims.take_over(
        "here/8/8", LEASE, lambda owner: owner == "here/7/7", local_host="here", limit=2
    )
    assert {c.session_id for c in taken + rest} == set(dead)
    assert {c.session_id for c in store.claims.held() if c.owner == "here/8/8"} >= set(mine)


def test_take_over_claims_honours_its_limit(store: SqlStore, clock: FakeClock):
    sids = orphans(store, 5, "gone/1/1")
    clock.advance(60_001)
    first = store.claims.take_over("me", LEASE, nobody_dead, limit=3)
    second = store.claims.take_over("me", LEASE, nobody_dead, limit=3)
    assert len(first) == 3 and len(second) == 2
    assert sorted(c.session_id for c in first + second) == sorted(sids)


def test_concurrent_takeovers_are_disjoint(db_url: str, clock: FakeClock):
    """Two workers (two stores, as two processes would have) take over at the same moment."""
    a, b = open_store(db_url, clock=clock), open_store(db_url, clock=clock)
    try:
        sids = orphans(a, 12, "here/1/1")
        results: dict[str, list[Claim]] = {}
        go = threading.Barrier(2)

        def work(name: str, store: SqlStore) -> None:
            go.wait()
            taken: list[Claim] = []
            while batch := store.claims.take_over(
                name, LEASE, lambda o: o == "here/1/1", local_host="here", limit=2
            ):
                taken += batch
            results[name] = taken

        threads = [threading.Thread(target=work, args=(n, s)) for n, s in (("a", a), ("b", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        got = [c.session_id for c in results["a"] + results["b"]]
        assert sorted(got) == sorted(sids)  # every orphan taken, none twice
        assert all(c.epoch == 2 for c in results["a"] + results["b"])
    finally:
        a.close()
        b.close()


def test_renew_claims_renews_what_is_still_held(store: SqlStore, clock: FakeClock):
    for sid in ("ses_a", "ses_b", "ses_c"):
        store.create_session(sid)
    a, b, c = (store.claims.acquire(s, "me", LEASE) for s in ("ses_a", "ses_b", "ses_c"))
    assert a and b and c
    clock.advance(LEASE + 1)
    assert store.claims.acquire("ses_b", "thief", LEASE) is not None  # taken over
    assert store.claims.release(c)
    assert store.claims.renew([a, b, c], LEASE) == {"ses_a"}
    renewed = store.current_claim("ses_a")
    assert renewed is not None and renewed.lease_until_ms == clock.now_ms() + LEASE
    with pytest.raises(ClaimLostError):
        store.claims.renew_one(b, LEASE)


@pytest.mark.postgres
def test_postgres_takeovers_skip_locked_rows_instead_of_waiting(clock: FakeClock):
    """While another worker's takeover transaction holds some claims' rows (locked as
    `take_over_claims` locks them), a takeover takes the rest at once instead of waiting."""
    import psycopg

    with fresh_database() as url:
        store = open_store(url, clock=clock)
        try:
            sids = orphans(store, 6, "here/1/1")
            with psycopg.connect(url) as holder:
                held = holder.execute(
                    "SELECT session_id FROM claims ORDER BY session_id LIMIT 2 FOR UPDATE"
                ).fetchall()
                # (waiting for the held rows would end in the lock timeout's StoreBusyError)
                taken = store.claims.take_over("b", LEASE, lambda _o: True, local_host="here")
                holder.rollback()
            assert sorted(c.session_id for c in taken) == sorted(
                set(sids) - {sid for (sid,) in held}
            )
            assert len(store.claims.take_over("b", LEASE, lambda _o: True, local_host="here")) == 2
        finally:
            store.close()
