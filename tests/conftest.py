from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from tests.pg import fresh_database
from wakeful.clock import FakeClock
from wakeful.store import SqlStore, open_store

# `WAKEFUL_TEST_ENCRYPTION=1 pytest tests/execution/test_crash.py ...`: the parametrized run of a
# suite with encryption at rest on (docs/encryption.md). Every store the suite opens, in this
# process and in the `wakeful` processes it starts (they inherit the environment), is new and so
# encrypted from its first write, under one test master key and one keyring per test process.
TEST_MASTER_KEY = "d2FrZWZ1bCB0ZXN0IG1hc3RlciBrZXksIDMyIGJ5dGU="


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("WAKEFUL_TEST_ENCRYPTION") == "1":
        os.environ.setdefault("WAKEFUL_MASTER_KEY", TEST_MASTER_KEY)
        keyring = os.path.join(tempfile.gettempdir(), f"wakeful-test-{os.getpid()}.keyring")
        os.environ.setdefault("WAKEFUL_KEYRING", keyring)


@pytest.fixture
def own_keys() -> Iterator[None]:
    """For tests that name their own master keys and keyrings, or need a plain store: the
    encrypted suite run's key and keyring are not handed to them (a rotation there would
    rewrite the run's keyring for every test after it). A patch of its own, so a test's
    `monkeypatch.undo()` does not give them back."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("WAKEFUL_MASTER_KEY", "WAKEFUL_MASTER_KEY_FILE", "WAKEFUL_KEYRING"):
            patch.delenv(name, raising=False)
        yield


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """A fresh, empty database URL of each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "sessions.db")
    else:
        with fresh_database() as url:
            yield url


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[SqlStore]:
    s = open_store(db_url, clock=clock)
    yield s
    s.close()
