"""The PostgreSQL backend: a connection pool, row locks for per-session order, LISTEN/NOTIFY.

Invariant: every write transaction that appends events takes a transaction-scoped advisory lock
before it allocates global event ids, so ids become visible in id order and a cross-session
follower reading `id > last` never skips an event committed late with a smaller id.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from ..errors import MigrationError, StoreBusyError, StoreError
from ._backend import Params, Row
from ._migrations import MIGRATIONS, statements

CHANNEL = "wakeful_events"
_APPEND_LOCK = 0x57414B45  # "WAKE"
_MIGRATE_LOCK = 0x57414B46


def _sql(sql: str) -> str:
    return sql.replace("?", "%s")


def _redact(url: str) -> str:
    """The URL without its password, for error messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


@contextmanager
def _pipelined(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Pipeline]:
    """One transaction in pipeline mode: BEGIN travels with the first read, COMMIT with the
    statements sent after the last one (`conn.transaction()` would add two round trips)."""
    try:
        with conn.pipeline() as pipeline:
            conn.execute("BEGIN")
            yield pipeline
            conn.execute("COMMIT")
    finally:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")


class _Sent:
    """A query sent in pipeline mode; reading its rows waits for its result only."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    def one(self) -> Row | None:
        row: Row | None = self._cursor.fetchone()
        return row

    def all(self) -> list[Row]:
        return self._cursor.fetchall()


class _PgTx:
    """A transaction; a write transaction runs in pipeline mode (see `Tx.query`/`Tx.send`)."""

    admits_on_server = True

    def __init__(self, conn: psycopg.Connection[Any], pipeline: psycopg.Pipeline | None) -> None:
        self._conn = conn
        self._pipeline = pipeline
        self._appending = False

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self._conn.execute(_sql(sql), params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return self._conn.execute(_sql(sql), params).fetchall()

    def run(self, sql: str, params: Params = ()) -> int:
        cursor = self._conn.execute(_sql(sql), params)
        if self._pipeline is not None:
            self._pipeline.sync()  # the row count arrives with the result
        return cursor.rowcount

    def query(self, sql: str, params: Params = ()) -> _Sent:
        return _Sent(self._conn.execute(_sql(sql), params))

    def send(self, sql: str, params: Params = ()) -> None:
        self._conn.execute(_sql(sql), params)

    def lock_session(self, session_id: str) -> Row | None:
        return self.lock_query(session_id).one()

    def lock_query(self, session_id: str) -> _Sent:
        if not self._appending:
            self.send("SELECT pg_advisory_xact_lock(?)", (_APPEND_LOCK,))
            self._appending = True
        return self.query(
            "SELECT last_seq, root_id, listed_ms FROM sessions WHERE id = ? FOR UPDATE",
            (session_id,),
        )

    def event_ids(self, n: int) -> _Sent:
        return self.query(
            "SELECT nextval(pg_get_serial_sequence('events', 'id')) FROM generate_series(1, ?)",
            (n,),
        )

    def admit_on_server(
        self, session_id: str, input_id: str, kind: str, delivery: str, digest: str,
        event_type: str, data: str, now_ms: int,
    ) -> _Sent:  # fmt: skip
        self._appending = True  # the function takes the append lock
        return self.query(
            "SELECT o_outcome, o_seq, o_id FROM wakeful_admit(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (_APPEND_LOCK, CHANNEL, session_id, input_id, kind, delivery, digest, event_type,
             data, now_ms),
        )  # fmt: skip

    def notify(self, session_id: str) -> None:
        self.send("SELECT pg_notify(?, ?)", (CHANNEL, session_id))

    def row_lock(self, *, skip_locked: bool = False) -> str:
        return " FOR UPDATE SKIP LOCKED" if skip_locked else " FOR UPDATE"


class PostgresBackend:
    """A PostgreSQL database reached by URL (`postgresql://user@host:port/db`)."""

    kind = "postgres"
    admits_on_server = True

    def __init__(self, url: str, *, max_size: int = 8, connect_timeout_s: float = 5.0) -> None:
        self.url = url
        self._listen: psycopg.Connection[Any] | None = None
        # A pooled connection serves one thread at a time, and so does its cursor.
        self._admit_cursors: dict[psycopg.Connection[Any], psycopg.Cursor[Any]] = {}
        self._cursors_lock = threading.Lock()
        self._listen_lock = threading.Lock()
        try:
            probe = psycopg.connect(url, connect_timeout=int(connect_timeout_s), autocommit=True)
            probe.close()
        except psycopg.Error as err:
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise StoreError(f"cannot reach PostgreSQL at {_redact(url)}: {reason}") from None
        self._pool = ConnectionPool(
            url, min_size=1, max_size=max_size, open=True, kwargs={"autocommit": True}
        )
        try:
            self._migrate()
        except BaseException as err:
            self._pool.close()  # a refused database leaves no pool threads behind
            if isinstance(err, psycopg.Error):
                raise MigrationError(f"cannot migrate {_redact(url)}: {err}") from None
            raise

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[_PgTx]:
        """Open a transaction; serialization failures and lock timeouts become StoreBusyError."""
        with self._errors(), self._pool.connection() as conn:
            if not write:
                with conn.transaction():
                    yield _PgTx(conn, None)
                return
            with _pipelined(conn) as pipeline:
                yield _PgTx(conn, pipeline)

    def admit_alone(
        self, session_id: str, input_id: str, kind: str, delivery: str, digest: str,
        event_type: str, data: str, now_ms: int,
    ) -> Row | None:  # fmt: skip
        """A whole admission as one statement outside any transaction block: the server runs
        a single statement as its own transaction, so it commits or not as one, and nothing
        else travels (no BEGIN, no COMMIT, no pipeline). Returns `(outcome, seq, event_id)`."""
        with self._errors(), self._pool.connection() as conn:
            cursor = self._admit_cursors.get(conn)
            if cursor is None:  # one per pooled connection, kept: admissions are the hot path
                with self._cursors_lock:
                    for gone in [c for c in self._admit_cursors if c.closed]:  # pool replaced it
                        del self._admit_cursors[gone]
                    cursor = self._admit_cursors[conn] = conn.cursor()
            row: Row | None = cursor.execute(
                "SELECT o_outcome, o_seq, o_id FROM wakeful_admit("
                "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (_APPEND_LOCK, CHANNEL, session_id, input_id, kind, delivery, digest, event_type,
                 data, now_ms),
            ).fetchone()  # fmt: skip
        return row

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Serialization failures and lock timeouts become StoreBusyError, a lost server
        StoreError naming the URL (password masked)."""
        try:
            yield
        except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected) as err:
            raise StoreBusyError(f"PostgreSQL write conflict; retry ({err.sqlstate})") from None
        except psycopg.errors.LockNotAvailable as err:
            raise StoreBusyError(f"PostgreSQL lock timeout; retry ({err.sqlstate})") from None
        except psycopg.OperationalError as err:
            raise StoreError(f"PostgreSQL at {_redact(self.url)} failed: {err}") from None

    def wait_for_change(self, timeout_s: float) -> None:
        """Block on LISTEN until a NOTIFY arrives or the timeout passes."""
        with self._listen_lock:
            if self._listen is None:
                self._listen = psycopg.connect(self.url, autocommit=True)
                self._listen.execute(f"LISTEN {CHANNEL}")
            for _ in self._listen.notifies(timeout=max(timeout_s, 0.001), stop_after=1):
                break
            # Drain what else is queued so one burst wakes us once.
            for _ in self._listen.notifies(timeout=0.001):
                pass

    def close(self) -> None:
        """Close the pool and the listening connection."""
        self._pool.close()
        with self._listen_lock:
            if self._listen is not None:
                self._listen.close()
                self._listen = None

    def _migrate(self) -> None:
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms BIGINT NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            if not all(isinstance(v, int) for v in done):
                raise StoreError(f"{_redact(self.url)} has a schema_migrations table not wakeful's")
            newest = max(done, default=0)
            if newest > MIGRATIONS[-1][0]:
                raise MigrationError(
                    f"{_redact(self.url)} has schema version {newest}; this wakeful knows up to "
                    f"{MIGRATIONS[-1][0]}. Upgrade wakeful; the database was not touched."
                )
            for number, name, _sqlite, sql in MIGRATIONS:
                if number in done:
                    continue
                for stmt in statements(sql):
                    conn.execute(stmt)  # type: ignore[call-overload]
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (%s, %s, %s)",
                    (number, name, time.time_ns() // 1_000_000),
                )
