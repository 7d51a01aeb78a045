from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pg import fresh_database
from wakeful.clock import FakeClock
from wakeful.store import SqlStore, open_store


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
