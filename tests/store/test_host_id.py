"""The host id in a claim's owner: overridable, and never shared by hosts that only share a
machine id (containers made from one image) — else a live driver there would look dead here."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from wakeful.errors import UsageError
from wakeful.store._owner import current_owner, host_id, owner_is_dead


@pytest.fixture(autouse=True)
def fresh_id() -> Iterator[None]:
    host_id.cache_clear()
    yield
    host_id.cache_clear()


def test_the_default_names_the_hostname(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("WAKEFUL_HOST_ID", raising=False)
    assert host_id().endswith(socket.gethostname())


def test_a_host_sharing_only_the_machine_id_is_another_host(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("WAKEFUL_HOST_ID", raising=False)
    mine = host_id()
    other = mine[: -len(socket.gethostname())] + "another-container"
    assert not owner_is_dead(f"{other}/999999999/123")  # its lease decides, not our pid table
    assert owner_is_dead(f"{mine}/999999999/123")  # a process of this host that is gone


def test_the_override_wins_and_is_checked(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WAKEFUL_HOST_ID", "rack7-node3")
    assert host_id() == "rack7-node3" and current_owner().startswith("rack7-node3/")
    host_id.cache_clear()
    monkeypatch.setenv("WAKEFUL_HOST_ID", "a/b")
    with pytest.raises(UsageError, match="may not contain"):
        host_id()
