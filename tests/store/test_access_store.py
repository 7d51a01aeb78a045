"""Users' tokens, owners and share links in the store (docs/access.md), on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from wakeful.clock import FakeClock
from wakeful.errors import NotFoundError, UsageError
from wakeful.store import SqlStore, cookie_digest, open_store, parse_scopes, token_digest


def test_a_token_is_kept_as_its_hash_and_matches_until_revoked(store: SqlStore):
    made, secret = store.access.create_token("alice", ("read", "drive"), label="laptop")
    assert secret.startswith("wk_") and len(secret) > 40
    assert made.user == "alice" and made.scopes == ("read", "drive")
    found = store.access.token_by(digest=token_digest(secret))
    assert found is not None and found.id == made.id
    cookie = cookie_digest(token_digest(secret))
    by_cookie = store.access.token_by(cookie=cookie)
    assert by_cookie is not None and by_cookie.id == made.id
    assert store.access.token_by(digest=token_digest(secret + "x")) is None
    assert [t.id for t in store.access.tokens("alice")] == [made.id]
    assert store.access.users() == ["alice"]
    store.access.revoke_token(made.id)
    assert store.access.token_by(digest=token_digest(secret)) is None
    assert store.access.token_by(cookie=cookie) is None
    assert store.access.tokens()[0].revoked_ms is not None
    with pytest.raises(NotFoundError):
        store.access.revoke_token("tok_0000000000000000")


def test_the_secret_is_nowhere_in_the_sqlite_file(tmp_path: Path):
    store = open_store(str(tmp_path / "s.db"))
    _, secret = store.access.create_token("bob", ("admin",))
    store.close()
    for f in tmp_path.iterdir():
        assert secret.encode() not in f.read_bytes(), f


def test_scopes_and_names_are_checked():
    assert parse_scopes("drive, read") == ("read", "drive")
    with pytest.raises(UsageError, match="unknown scope 'root'"):
        parse_scopes("read,root")
    with pytest.raises(UsageError, match="at least one scope"):
        parse_scopes(" , ")


def test_an_owner_is_read_through_the_root(store: SqlStore):
    root = store.create_session(title="r")
    child = store.create_session(parent_id=root.id)
    other = store.create_session()
    store.access.set_owner(root.id, "alice")
    assert store.access.owner_of(child.id) == "alice"
    assert store.access.owner_of(other.id) is None
    assert store.access.owned_roots("alice") == {root.id}
    assert store.access.owned("alice", [root.id, child.id, other.id]) == {root.id, child.id}
    store.access.set_owner(root.id, None)
    assert store.access.owner_of(root.id) is None


def test_a_share_link_expires_and_is_revoked(store: SqlStore, clock: FakeClock):
    sid = store.create_session().id
    now = clock.now_ms()
    link, secret = store.access.create_share(sid, expires_ms=now + 60_000, by="alice")
    assert store.access.share_by(secret) == link
    assert store.access.share_by(secret + "x") is None
    clock.advance(60_000)
    assert store.access.share_by(secret) is None
    link2, secret2 = store.access.create_share(sid, expires_ms=now + 10_000_000)
    assert store.access.revoke_share(link2.id).revoked_ms is not None
    assert store.access.share_by(secret2) is None
    with pytest.raises(UsageError):
        store.access.create_share(sid, expires_ms=1)
    with pytest.raises(NotFoundError):
        store.access.create_share("ses_none", expires_ms=now + 10_000_000)


def test_an_expired_token_matches_nothing_and_says_why(tmp_path: Path):
    clock = FakeClock()
    store = open_store(str(tmp_path / "s.db"), clock=clock)
    made, secret = store.access.create_token("carl", ("read",), expires_ms=clock.now_ms() + 60_000)
    assert store.access.token_by(digest=token_digest(secret)) is not None
    clock.advance(60_000)
    assert store.access.token_by(digest=token_digest(secret)) is None
    held = store.access.find_token(digest=token_digest(secret))
    assert held is not None and held.refusal(clock.now_ms()) == (
        f"the token {made.id} expired at 2023-11-14 22:14 UTC"
    )
    with pytest.raises(UsageError, match="expire in the future"):
        store.access.create_token("carl", ("read",), expires_ms=clock.now_ms())
    store.close()
