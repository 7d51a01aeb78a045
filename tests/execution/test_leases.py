"""The process-wide lease keeper: one renewal for every held claim, lost claims reported."""

from __future__ import annotations

from wakeful.clock import FakeClock
from wakeful.execution._leases import LeaseKeeper
from wakeful.store import SqlStore

LEASE = 1000


async def test_one_renewal_keeps_every_claim_and_reports_the_lost(
    store: SqlStore, clock: FakeClock
):
    claims = []
    for sid in ("ses_a", "ses_b", "ses_c"):
        store.create_session(sid)
        claim = store.claims.acquire(sid, "me", LEASE)
        assert claim is not None
        claims.append(claim)
    keeper = LeaseKeeper(store, LEASE)
    lost: list[str] = []
    for claim in claims:
        keeper.hold(claim, lambda sid=claim.session_id: lost.append(sid))
    clock.advance(LEASE + 1)
    assert store.claims.acquire("ses_b", "thief", LEASE) is not None  # its lease had lapsed
    await keeper.renew_now()
    assert lost == ["ses_b"]
    assert sorted(c.session_id for c in keeper.held()) == ["ses_a", "ses_c"]
    for sid in ("ses_a", "ses_c"):
        held = store.current_claim(sid)
        assert held is not None and held.owner == "me"
        assert held.lease_until_ms == clock.now_ms() + LEASE
    keeper.drop(claims[0])
    clock.advance(LEASE // 2)
    await keeper.renew_now()
    dropped = store.current_claim("ses_a")
    assert dropped is not None and dropped.lease_until_ms < clock.now_ms() + LEASE
    await keeper.aclose()
