"""The SQLite backend: one file, WAL, busy timeout, immediate write transactions.

A locked database surfaces as `StoreBusyError` and a full disk as `StoreFullError` (both
retryable), never as a crash. Followers in other processes see new events by polling
(`wait_for_change` sleeps a poll interval).

Invariant: the path never holds a half-made store. A new store is built in a temporary file and
linked into place whole, so an existing empty file is never a store of ours and is refused (it
would otherwise be taken silently for a new, empty store). A store whose file cannot be written
(a read-only file, directory or mount) opens read-only; a write then fails with one clear line.
A table whose first pages are damaged is found at open, before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .._defaults import SQLITE_BUSY_TIMEOUT_MS
from .._ids import random_hex
from ..errors import MigrationError, StoreBusyError, StoreError, StoreFullError
from ._backend import Params, Row, Rows, ServerAdmission
from ._event_ids import LAST_EVENT_ID
from ._records import last_seq_sql
from ._schema_version import NUMBERS
from ._search_log import register as register_search_text

if TYPE_CHECKING:
    from pathlib import Path

    from ._cipher import Cipher

_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
DISK_FULL = "the disk is full"
_RECOVER = "restore a backup, or salvage what is left with `sqlite3 {path} .recover`"


def _synchronous() -> str:
    """`FULL` (default: every commit reaches the disk, durable across power loss) or `NORMAL`
    (`WAKEFUL_SQLITE_SYNCHRONOUS=NORMAL`: WAL commits survive a killed process, not power loss)."""
    value = os.environ.get("WAKEFUL_SQLITE_SYNCHRONOUS", "FULL").upper()
    if value not in ("FULL", "NORMAL"):
        raise StoreError(f"WAKEFUL_SQLITE_SYNCHRONOUS must be FULL or NORMAL, not {value!r}")
    return value


def _translate(err: sqlite3.Error, path: str, *, creating: bool = False) -> Exception:
    code = (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF
    if creating:
        return StoreError(f"cannot create the database at {path}: {_io_reason(err, path)}")
    if code in _BUSY:
        return StoreBusyError(f"database {path} is busy (locked by another writer); retry")
    if code == sqlite3.SQLITE_READONLY:
        return StoreError(f"{path} is read-only: this needs to write to the store")
    if code in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR):
        reason = _io_reason(err, path)
        full = code == sqlite3.SQLITE_FULL or reason == DISK_FULL
        return (StoreFullError if full else StoreError)(f"cannot write to {path}: {reason}")
    if code == sqlite3.SQLITE_CORRUPT:
        return StoreError(f"{path} is damaged ({err}); " + _RECOVER.format(path=path))
    if isinstance(err, sqlite3.DatabaseError) and "not a database" in str(err):
        return StoreError(f"{path} is not a wakeful SQLite database (corrupt or foreign file)")
    return StoreError(f"sqlite error on {path}: {err}")


def _io_reason(err: sqlite3.Error, path: str) -> str:
    """SQLite says "disk I/O error" also when a write found no space: say which it was."""
    try:
        fs = os.statvfs(os.path.dirname(os.path.abspath(path)))
        if fs.f_bavail * fs.f_frsize < 1 << 20:
            return DISK_FULL
    except OSError:
        pass
    return str(err)


def _writable(path: str) -> bool:
    """Whether this process may write the file and its WAL files (making them beside it, or
    writing the ones that are there)."""
    folder = os.path.dirname(os.path.abspath(path))
    wal_files = all(os.access(path + suffix, os.W_OK) for suffix in ("-wal", "-shm"))
    return os.access(path, os.W_OK) and (os.access(folder, os.W_OK) or wal_files)


# The session's row as an append reads it first: its newest seq is the log's (`last_seq_sql`),
# and its `message_shapes` last (`_append._update_row` assigns them only when they change).
_LOCK_ROW = (
    f"SELECT {last_seq_sql('sqlite')}, root_id, listed_ms, status, message_shapes "
    "FROM sessions WHERE id = ?"
)


class _SqliteTx:
    kind = "sqlite"

    def __init__(self, conn: sqlite3.Connection, cipher: Cipher | None) -> None:
        self._conn = conn
        self.cipher = cipher

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
        return self.one(_LOCK_ROW, (session_id,))

    def lock_query(self, session_id: str) -> Rows:
        return Rows([] if (row := self.lock_session(session_id)) is None else [row])

    def event_ids(self, n: int) -> Rows:
        """The next ids after the highest ever given (`_event_ids`: the log's largest, or a
        larger one deleted since)."""
        row = self.one(LAST_EVENT_ID)
        base = 0 if row is None else int(row[0])
        return Rows([(base + i,) for i in range(1, n + 1)])

    def claim_and_ids(self, session_id: str, n: int) -> Rows:
        """`Tx.claim_and_ids`: the claim row, then `event_ids` (no round trips to save)."""
        row = self.one(
            "SELECT token, epoch, released FROM claims WHERE session_id = ?", (session_id,)
        )
        ids = [int(r[0]) for r in self.event_ids(n).all()]
        return Rows([(*(row or (None, None, None)), ids)])

    def notify(self, session_id: str) -> None:
        """Followers poll; nothing to send."""

    def row_lock(self, *, skip_locked: bool = False, of: str | None = None) -> str:
        """Nothing: BEGIN IMMEDIATE already serializes every writer."""
        return ""

    def admit_on_server(self, admission: ServerAdmission) -> None:
        """None: no round trips to save, the store runs the admission's statements."""
        return None


class _Group:
    """Writes that share one COMMIT; `error` is why it failed (then none of them committed)."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: Exception | None = None


class SqliteBackend:
    """A SQLite database file (created on first use; see the module docstring)."""

    kind = "sqlite"

    def __init__(
        self, path: str | Path, *, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS, poll_ms: int = 50
    ) -> None:
        self.path = str(path)
        self.url = self.path
        self.poll_s = poll_ms / 1000
        self.read_only = False
        self.cipher: Cipher | None = None
        self._lock = threading.RLock()
        self._group: _Group | None = None  # the writes waiting for one COMMIT (`_write`)
        self._arriving = 0  # writes waiting for `_lock` (they may join the open group)
        self._arrivals_lock = threading.Lock()
        self._busy_timeout_ms = int(busy_timeout_ms)
        if self.path != ":memory:":
            self._prepare_file()
            self.read_only = not _writable(self.path)
        # The connection that checked (and migrated) the file reads from then on; writes get
        # their own on the first write (`_conn`): a process that only reads parses the schema
        # once. A `:memory:` or read-only store has one connection for both.
        opened = self._open(self.path, read_only=self.read_only)
        self._reader, self._read_lock = opened, threading.RLock()
        self._writer: sqlite3.Connection | None = None
        if self.path == ":memory:" or self.read_only:
            self._writer, self._read_lock = opened, self._lock

    @property
    def _conn(self) -> sqlite3.Connection:
        """The write connection (used under `_lock`), connected on the first write."""
        conn = self._writer
        if conn is None:
            with self._lock:
                if self._writer is None:
                    self._writer = self._connect_writer()
                conn = self._writer
        return conn

    def _configure(self, conn: sqlite3.Connection) -> None:
        """What every connection of this backend sets (the writer, the reader, a read-only
        one): the busy timeout, temporary storage in memory (a write's savepoint journal
        spilled to a file in /var/tmp once per turn step otherwise), and the function the
        full-text index computes a message's text with (`_search_log`)."""
        conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        conn.execute("PRAGMA temp_store = MEMORY")
        register_search_text(conn, _search_text)  # the index reads its text from the log

    def _connect_writer(self) -> sqlite3.Connection:
        """A file store's write connection (the file was checked, migrated and put in WAL by
        the open: this one only sets what a writer needs, as `_open` does)."""
        timeout = self._busy_timeout_ms / 1000
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=timeout
            )
            self._configure(conn)
            conn.execute(f"PRAGMA synchronous = {_synchronous()}")
            conn.execute("PRAGMA foreign_keys = OFF")
        except sqlite3.Error as err:
            if conn is not None:
                conn.close()
            raise _translate(err, self.path) from None
        return conn

    def _prepare_file(self) -> None:
        """Refuse an empty file; build a missing store aside and link it into place whole."""
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            size = os.path.getsize(self.path) if os.path.exists(self.path) else None
        except OSError as err:
            raise StoreError(f"cannot create the database at {self.path}: {err.strerror}") from None
        if size == 0:
            raise StoreError(
                f"{self.path} is an empty file, not a wakeful database (a new store is never "
                "left empty): remove it to start a new store, or point --db at the right file"
            )
        if size is None:
            self._create()

    def _create(self) -> None:
        """Make a new store at a temporary path, then hard-link it to `path` (which fails if
        another process created the store first: then theirs is used). It is built with a
        rollback journal, so every committed page is in the file itself when it is linked (a
        WAL would hold them beside it, and its checkpoint at close can fail unseen on a full
        disk); the first ordinary open switches it to WAL."""
        tmp = f"{self.path}.{random_hex(4)}.new"
        try:
            self._open(tmp, read_only=False, shown=self.path, creating=True).close()
            os.link(tmp, self.path)
        except FileExistsError:
            pass  # another process created the store meanwhile
        except OSError as err:
            if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV):
                raise StoreError(
                    f"cannot create the database at {self.path}: {err.strerror}"
                ) from None
            # No hard links here (some network or FAT filesystems): create it in place.
        finally:
            for leftover in (tmp, f"{tmp}-wal", f"{tmp}-shm", f"{tmp}-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)

    def _open(
        self, path: str, *, read_only: bool, shown: str | None = None, creating: bool = False
    ) -> sqlite3.Connection:
        """Connect, check and migrate; a read-only store is opened as it is. Errors name
        `shown` (the store's path when `path` is the temporary file of a new store)."""
        shown = shown or path
        timeout = self._busy_timeout_ms / 1000
        try:
            if read_only:
                conn = self._connect_read_only(path, timeout)
            else:
                conn = sqlite3.connect(
                    path, isolation_level=None, check_same_thread=False, timeout=timeout
                )
        except sqlite3.Error as err:
            raise _translate(err, shown, creating=creating) from None
        try:
            self._configure(conn)
            # Refuse a foreign, newer or damaged file before anything writes to it: switching
            # to WAL rewrites the file header.
            done = _applied(conn, shown)
            _probe(conn)
            if read_only:
                if not _current(done):
                    raise MigrationError(
                        f"{shown} is read-only and has schema version {max(done, default=0)}; "
                        f"this wakeful needs {NUMBERS[-1]}: open it once with write access"
                    )
                return conn
            if not creating:  # a new store is built with a rollback journal: see `_create`
                self._enter_wal(conn)
            conn.execute(f"PRAGMA synchronous = {_synchronous()}")
            conn.execute("PRAGMA foreign_keys = OFF")
            _migrate(conn, path, done)
        except BaseException as err:
            conn.close()
            if isinstance(err, sqlite3.Error):
                raise _translate(err, shown, creating=creating) from None
            raise
        return conn

    @staticmethod
    def _connect_read_only(path: str, timeout: float) -> sqlite3.Connection:
        """A read-only connection. A WAL database needs its `-shm` file, which a read-only
        directory cannot hold: then the file is opened as immutable (no one can change it)."""
        from urllib.parse import quote

        uri = f"file:{quote(os.path.abspath(path))}?mode=ro"
        conn = sqlite3.connect(
            uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout
        )
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return conn
        except sqlite3.OperationalError:
            conn.close()
        return sqlite3.connect(
            uri + "&immutable=1",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=timeout,
        )

    def _enter_wal(self, conn: sqlite3.Connection) -> None:
        """Switch to WAL, waiting out other openers: the switch needs the file to itself, and
        SQLite answers "locked" at once instead of calling the busy handler."""
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as err:
                code = getattr(err, "sqlite_errorcode", 0) & 0xFF
                if code not in _BUSY or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    @contextmanager
    def transaction(self, *, write: bool, batched: bool = False) -> Iterator[_SqliteTx]:
        """Open a transaction (a write joins the open group commit, see `_Group`); a write
        returns once its group committed. A read runs on a connection of its own (a file
        store), so it sees only committed data and never waits for a commit's fsync."""
        if write:
            with self._write() as tx:
                yield tx
            return
        with self._read_lock:
            if self._reader is self._writer:
                self._settle()  # a read never sees writes that are not durable yet
            try:
                self._reader.execute("BEGIN")
            except sqlite3.Error as err:
                raise _translate(err, self.path) from None
            try:
                yield _SqliteTx(self._reader, self.cipher)
                self._reader.execute("COMMIT")
            except sqlite3.Error as err:
                if self._reader.in_transaction:
                    self._reader.execute("ROLLBACK")
                raise _translate(err, self.path) from None
            except BaseException:
                if self._reader.in_transaction:
                    self._reader.execute("ROLLBACK")
                raise

    @contextmanager
    def _write(self) -> Iterator[_SqliteTx]:
        """One write: its statements run under a savepoint of the open group (BEGIN IMMEDIATE
        starts one), then the caller waits for the group's COMMIT (`_settle`), which covers
        every write that joined meanwhile: concurrent writers of this process share one fsync
        instead of paying one each. A write that fails is rolled back to its savepoint alone;
        an error that ended the whole transaction fails the group's other writes too (none of
        them is committed, each raises)."""
        with self._arrivals_lock:
            self._arriving += 1
        with self._lock:
            with self._arrivals_lock:
                self._arriving -= 1
            # The write that opens the group is its first: alone in the transaction while it
            # runs (others join only once it let go of the lock), so a failure rolls the whole
            # transaction back and it needs no savepoint (two statements fewer per lone write).
            opens = self._group is None
            if opens:
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as err:
                    raise _translate(err, self.path) from None
                self._group = _Group()
            group = self._group
            assert group is not None
            try:
                if not opens:
                    self._conn.execute("SAVEPOINT write")
                yield _SqliteTx(self._conn, self.cipher)
                if not opens:
                    self._conn.execute("RELEASE write")
            except BaseException as err:
                if opens:
                    self._rollback()  # nothing else is in the group: the whole of it goes
                    self._group = None
                else:
                    self._undo(group)
                self._settle()  # the others' writes (nothing waits to join a failed one)
                if isinstance(err, sqlite3.Error):
                    raise _translate(err, self.path) from None
                raise
        if self._arriving:  # let writers waiting for the lock join this group before it commits
            time.sleep(0)  # (alone, no yield: on a busy machine it costs a time slice)
        with self._lock:
            self._settle()
        if group.error is not None:
            raise group.error

    def _undo(self, group: _Group) -> None:
        """Roll back the failed write of `group` (under the lock)."""
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK TO write")
                self._conn.execute("RELEASE write")
                return
            except sqlite3.Error:
                pass
        # SQLite ended the whole transaction (a full disk, an I/O error): the group is lost.
        self._rollback()
        group.error = StoreError(f"database {self.path}: a write of the same commit failed")
        self._group = None

    def _settle(self) -> None:
        """Commit the open group, if any (under the lock)."""
        group, self._group = self._group, None
        if group is None:
            return
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as err:
            self._rollback()
            group.error = _translate(err, self.path)

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def admit_alone(self, admission: ServerAdmission) -> None:
        """None (nothing written): the store admits in one transaction here."""
        return None

    def watch_commits(self, on_commit: Callable[[], None]) -> Callable[[], None]:
        """Nothing to watch: SQLite tells no one of commits, readers poll. Returns a no-op."""
        return lambda: None

    def wait_for_change(self, timeout_s: float) -> None:
        """Sleep one poll interval (bounded by the timeout)."""
        time.sleep(min(self.poll_s, max(timeout_s, 0.0)))

    def wait_for_work(self, timeout_s: float) -> None:
        """Sleep `timeout_s`: a worker's own poll interval (`[execution] poll_interval_ms`).
        Nothing announces an admission here, so that interval is how soon another process's
        input is found; the backend's shorter poll (for followers of a log) would make an idle
        worker look at the store twenty times a second (issue 36 item 1)."""
        time.sleep(max(timeout_s, 0.0))

    def announce_interrupt(self, session_id: str, request_id: int) -> None:
        """Nothing to announce to: a watcher polls (`wait_for_interrupts`)."""

    def wait_for_interrupts(self, timeout_s: float) -> None:
        """None at once: nothing announces an interrupt request here, a watcher polls the
        store (`Feed.interrupts_after`)."""
        return None

    def vacuum(self) -> None:
        """Rewrite the file without its free pages (`VACUUM`, with `secure_delete` so no page
        keeps what was deleted) and move the WAL into it, emptied (`wakeful store encrypt`)."""
        with self._lock:
            self._settle()
            try:
                self._conn.execute("PRAGMA secure_delete = ON")
                self._conn.execute("VACUUM")
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as err:
                raise _translate(err, self.path) from None

    def close(self) -> None:
        """Close the connections (after committing an open group)."""
        with self._lock:
            if self._writer is not None:  # (none when nothing was written)
                self._settle()
                self._writer.close()
        with self._read_lock:
            self._reader.close()


def _applied(conn: sqlite3.Connection, path: str) -> set[int]:
    """The recorded migrations; refuse a foreign file or a newer schema (reads only)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return set()
    columns = {r[1] for r in conn.execute("PRAGMA table_info(schema_migrations)")}
    done: set[int] = set()
    if {"version", "name", "applied_ms"} <= columns:
        done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
    if not done or not all(isinstance(v, int) for v in done):
        raise StoreError(f"{path} is a SQLite database, but not a wakeful one")
    if max(done) > NUMBERS[-1]:
        raise MigrationError(
            f"{path} has schema version {max(done)}; this wakeful knows up to "
            f"{NUMBERS[-1]}. Upgrade wakeful; the database was not touched."
        )
    return done


def _search_text(data: str | None, enqueued: str | None) -> str | None:
    """`_search_text.search_text`, imported on the first call (opening a store imports no
    message model)."""
    from ._search_text import search_text

    return search_text(data, enqueued)


def _probe(conn: sqlite3.Connection) -> None:
    """Read the first row of every table, so a damaged root or first page is an error now,
    before a write lands in a file that a later read would find broken (a full check would
    read the whole file: `PRAGMA quick_check` is for the operator). One statement: a scalar
    subquery per table, each `NOT INDEXED` so it reads the table's own b-tree and not a
    smaller covering index (`tests/store/test_bad_input.py` checks its bytecode opens every
    table's root page)."""
    conn.execute(probe_sql(conn)).fetchall()


def probe_sql(conn: sqlite3.Connection) -> str:
    """`_probe`'s statement for the tables of `conn`'s schema (a virtual table's rows are its
    shadow tables': read there)."""
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
        )
    ]
    quoted = [name.replace('"', '""') for name in names]
    reads = ", ".join(f'(SELECT 1 FROM "{q}" NOT INDEXED)' for q in quoted)
    return f"SELECT {reads or 1}"


def _current(done: set[int]) -> bool:
    """Every migration is applied (`_schema_version` has their numbers)."""
    return done.issuperset(NUMBERS)


def _migrate(conn: sqlite3.Connection, path: str, done: set[int]) -> None:
    """Apply the migrations not in `done`; an up-to-date store imports none of their SQL."""
    if _current(done):
        return
    from ._migrations import MIGRATIONS, statements

    newest = max(done, default=0)
    todo = [m for m in MIGRATIONS if m[0] not in done]
    if not todo:
        return
    if done and path != ":memory:":
        backup = f"{path}.v{newest}.bak"
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        import shutil

        shutil.copyfile(path, backup)
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms INTEGER NOT NULL)"
        )
        done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
        for number, name, sql, _pg in todo:
            if number in done:  # another process migrated while we waited
                continue
            for stmt in statements(sql):
                conn.execute(stmt)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                (number, name, time.time_ns() // 1_000_000),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
