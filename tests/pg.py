"""PostgreSQL for tests: a fresh database per use, dropped afterwards.

Locally an unreachable server skips the test with its reason; under CI=true it fails.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

ADMIN_URL = os.environ.get("WAKEFUL_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def _base(url: str) -> str:
    return url.rsplit("/", 1)[0]


def require_postgres() -> None:
    """Skip (locally) or fail (CI=true) when the server does not answer."""
    try:
        psycopg.connect(ADMIN_URL, connect_timeout=3).close()
    except psycopg.Error as err:
        reason = f"PostgreSQL not reachable at {ADMIN_URL}: {str(err).strip().splitlines()[0]}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@contextmanager
def fresh_database() -> Iterator[str]:
    """Create an empty database and yield its URL; drop it afterwards."""
    require_postgres()
    name = f"wakeful_test_{secrets.token_hex(6)}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{_base(ADMIN_URL)}/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
