"""The PostgreSQL wire (`_pgwire.Wire`): a transaction's statements leave together with the
Sync that asks for their answers, hot statements are prepared once per connection, and an
error raises at the Sync that brought it, with the statements after it not run."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.pg import fresh_database
from wakeful.store import open_store
from wakeful.store._pgwire import PREPARE_AFTER, Wire

pytestmark = pytest.mark.postgres


@pytest.fixture
def conn() -> Iterator[psycopg.Connection[object]]:
    with fresh_database() as url, psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        yield c


def _prepared(conn: psycopg.Connection[object]) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT name FROM pg_prepared_statements")}


def test_statements_leave_with_the_sync_and_are_answered_in_order(conn):
    wire = Wire(conn)
    wire.begin()
    wire.send("BEGIN")
    inserted = wire.send("INSERT INTO t VALUES (%s, %s), (%s, %s)", (1, "a", 2, None))
    first = wire.send("SELECT id, v FROM t WHERE id = %s", (1,))
    every = wire.send("SELECT id, v FROM t ORDER BY id")
    assert not first.ready  # nothing was read yet: nothing waited for
    assert first.one() == (1, "a")  # the Sync: every answer so far arrives
    assert every.ready and inserted.rowcount() == 2
    assert every.rows() == [(1, "a"), (2, None)]
    wire.send("COMMIT")
    wire.end()
    assert not wire.active
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)


def test_a_statement_used_again_is_prepared_once_per_connection(conn):
    wire = Wire(conn)
    for n in range(PREPARE_AFTER + 2):
        wire.begin()
        slot = wire.send("SELECT %s::int + 1", (n,))
        wire.end()
        assert slot.one() == (n + 1,)
    assert len(_prepared(conn)) == 1


def test_an_error_raises_at_its_sync_and_the_statements_after_it_do_not_run(conn):
    wire = Wire(conn)
    wire.begin()
    wire.send("INSERT INTO t VALUES (%s, %s)", (1, "a"))
    wire.sync()
    dup = wire.send("INSERT INTO t VALUES (%s, %s)", (1, "b"))
    after = wire.send("INSERT INTO t VALUES (%s, %s)", (2, "c"))
    with pytest.raises(psycopg.errors.UniqueViolation):
        wire.sync()
    with pytest.raises(psycopg.errors.UniqueViolation):
        dup.rowcount()
    with pytest.raises(psycopg.Error):
        after.rowcount()
    wire.end()  # nothing owed: the connection leaves pipeline mode and lives on
    assert not conn.closed
    assert conn.execute("SELECT id, v FROM t ORDER BY id").fetchall() == [(1, "a")]


def test_a_prepare_the_server_never_ran_is_forgotten(conn):
    wire = Wire(conn)
    sql = "SELECT v FROM t WHERE id = %s"
    wire.begin()
    for _ in range(PREPARE_AFTER - 1):
        wire.send(sql, (1,))
    wire.sync()
    wire.send("SELECT 1/0")  # fails: the Parse sent after it is skipped
    wire.send(sql, (1,))
    with pytest.raises(psycopg.errors.DivisionByZero):
        wire.sync()
    for _ in range(PREPARE_AFTER):  # counted again from the start, then prepared: it works
        assert wire.send(sql, (1,)).one() is None
    wire.end()
    assert len(_prepared(conn)) == 1


def test_a_connection_lost_mid_pipeline_is_closed_by_end(conn):
    wire = Wire(conn)
    with psycopg.connect(conn.info.dsn, autocommit=True) as killer:
        wire.begin()
        wire.send("BEGIN")
        wire.send("SELECT 1")
        killer.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        with pytest.raises(psycopg.OperationalError):
            wire.end()
    assert conn.closed


def test_a_blocks_own_error_is_the_one_raised_and_the_connection_serves_on():
    with fresh_database() as url:
        store = open_store(url)
        try:
            with pytest.raises(ValueError), store.backend.transaction(write=True) as tx:
                tx.send("SELECT 1/0")  # unanswered when the block fails: its error is logged
                raise ValueError("the block's own")
            for _ in range(3):  # (the pool's connections, each used again)
                with store.backend.transaction(write=False) as tx:
                    assert tx.one("SELECT 2") == (2,)
        finally:
            store.close()
