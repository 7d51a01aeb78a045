"""The SQLite backend: one file, WAL, busy timeout, immediate write transactions.

A locked database surfaces as `StoreBusyError` (retryable), never as a crash. Followers in other
processes see new events by polling (`wait_for_change` sleeps a poll interval).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import MigrationError, StoreBusyError, StoreError
from ._backend import Params, Row, Rows
from ._migrations import MIGRATIONS, statements

_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


def _synchronous() -> str:
    """`FULL` (default: every commit reaches the disk, durable across power loss) or `NORMAL`
    (`WAKEFUL_SQLITE_SYNCHRONOUS=NORMAL`: WAL commits survive a killed process, not power loss)."""
    value = os.environ.get("WAKEFUL_SQLITE_SYNCHRONOUS", "FULL").upper()
    if value not in ("FULL", "NORMAL"):
        raise StoreError(f"WAKEFUL_SQLITE_SYNCHRONOUS must be FULL or NORMAL, not {value!r}")
    return value


def _translate(err: sqlite3.Error, path: str) -> Exception:
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) in _BUSY:
        return StoreBusyError(f"database {path} is busy (locked by another writer); retry")
    if isinstance(err, sqlite3.DatabaseError) and "not a database" in str(err):
        return StoreError(f"{path} is not a wakeful SQLite database (corrupt or foreign file)")
    return StoreError(f"sqlite error on {path}: {err}")


class _SqliteTx:
    admits_on_server = False  # no round trips to save: the store runs the statements

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self._conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return self._conn.execute(sql, params).fetchall()

    def run(self, sql: str, params: Params = ()) -> int:
        return self._conn.execute(sql, params).rowcount

    def query(self, sql: str, params: Params = ()) -> Rows:
        return Rows(self.all(sql, params))

    def send(self, sql: str, params: Params = ()) -> None:
        self._conn.execute(sql, params)

    def lock_session(self, session_id: str) -> Row | None:
        # BEGIN IMMEDIATE already holds the database write lock.
        return self.one(
            "SELECT last_seq, root_id, listed_ms FROM sessions WHERE id = ?", (session_id,)
        )

    def lock_query(self, session_id: str) -> Rows:
        return Rows([] if (row := self.lock_session(session_id)) is None else [row])

    def event_ids(self, n: int) -> Rows:
        """The next ids after the highest ever used (AUTOINCREMENT's own counter)."""
        row = self.one("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
        base = 0 if row is None else int(row[0])
        return Rows([(base + i,) for i in range(1, n + 1)])

    def notify(self, session_id: str) -> None:
        """Followers poll; nothing to send."""

    def row_lock(self, *, skip_locked: bool = False) -> str:
        """Nothing: BEGIN IMMEDIATE already serializes every writer."""
        return ""


class SqliteBackend:
    """A SQLite database file (created on first use)."""

    kind = "sqlite"
    admits_on_server = False

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 5000, poll_ms: int = 50) -> None:
        self.path = str(path)
        self.url = self.path
        self.poll_s = poll_ms / 1000
        self._lock = threading.RLock()
        if self.path != ":memory:":
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(
                    f"cannot create the database at {self.path}: {err.strerror}"
                ) from None
        try:
            self._conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=busy_timeout_ms / 1000,
            )
        except sqlite3.Error as err:
            raise _translate(err, self.path) from None
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            # Refuse a foreign or newer file before anything writes to it: switching to WAL
            # rewrites the file header.
            done = self._applied()
            self._enter_wal(busy_timeout_ms)
            self._conn.execute(f"PRAGMA synchronous = {_synchronous()}")
            self._conn.execute("PRAGMA foreign_keys = OFF")
            self._migrate(done)
        except BaseException as err:
            self._conn.close()
            if isinstance(err, sqlite3.Error):
                raise _translate(err, self.path) from None
            raise

    def _enter_wal(self, busy_timeout_ms: int) -> None:
        """Switch to WAL, waiting out other openers: the switch needs the file to itself, and
        SQLite answers "locked" at once instead of calling the busy handler."""
        deadline = time.monotonic() + busy_timeout_ms / 1000
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as err:
                code = getattr(err, "sqlite_errorcode", 0) & 0xFF
                if code not in _BUSY or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[_SqliteTx]:
        """Open a transaction (BEGIN IMMEDIATE for writes); commit on success."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as err:
                raise _translate(err, self.path) from None
            try:
                yield _SqliteTx(self._conn)
                self._conn.execute("COMMIT")
            except sqlite3.Error as err:
                self._rollback()
                raise _translate(err, self.path) from None
            except BaseException:
                self._rollback()
                raise

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def wait_for_change(self, timeout_s: float) -> None:
        """Sleep one poll interval (bounded by the timeout)."""
        time.sleep(min(self.poll_s, max(timeout_s, 0.0)))

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def _applied(self) -> set[int]:
        """The recorded migrations; refuse a foreign file or a newer schema (reads only)."""
        tables = {
            r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if not tables:
            return set()
        columns = {r[1] for r in self._conn.execute("PRAGMA table_info(schema_migrations)")}
        done: set[int] = set()
        if {"version", "name", "applied_ms"} <= columns:
            done = {r[0] for r in self._conn.execute("SELECT version FROM schema_migrations")}
        if not done or not all(isinstance(v, int) for v in done):
            raise StoreError(f"{self.path} is a SQLite database, but not a wakeful one")
        if max(done) > MIGRATIONS[-1][0]:
            raise MigrationError(
                f"{self.path} has schema version {max(done)}; this wakeful knows up to "
                f"{MIGRATIONS[-1][0]}. Upgrade wakeful; the database was not touched."
            )
        return done

    def _migrate(self, done: set[int]) -> None:
        newest = max(done, default=0)
        todo = [m for m in MIGRATIONS if m[0] not in done]
        if not todo:
            return
        if done and self.path != ":memory:":
            backup = f"{self.path}.v{newest}.bak"
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            shutil.copyfile(self.path, backup)
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms INTEGER NOT NULL)"
            )
            done = {r[0] for r in self._conn.execute("SELECT version FROM schema_migrations")}
            for number, name, sql, _pg in todo:
                if number in done:  # another process migrated while we waited
                    continue
                for stmt in statements(sql):
                    self._conn.execute(stmt)
                self._conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                    (number, name, time.time_ns() // 1_000_000),
                )
            self._conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
