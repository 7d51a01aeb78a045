"""The PostgreSQL backend: a connection pool, row locks for per-session order, LISTEN/NOTIFY.

Invariant: appends to different sessions share no lock (a session's row lock orders its own
`seq`); the instance-wide follow reads in commit-safe (tx, id) order below the snapshot's xmin
(migration 11, docs/store.md "Instance-wide order"), so an event committed late with a smaller
id is never skipped. No data-writing transaction sends NOTIFY (its commit would take
PostgreSQL's cluster-wide notify lock): `PgTx.notify` only records the session, and after the
commit `_pgnotify.Notifier` announces it from a connection of its own (docs/store.md, "LISTEN").

Faults stay bounded (docs/store.md, "Faults"): every pooled connection carries a lock timeout, a
statement timeout and an idle-in-transaction timeout (`[store]` of wakeful.toml), so a paused
process holding a session's row lock is cut off by the server and stalls the other writers no longer
than that; a pooled connection the server ended is replaced before use; the listening connection
is reopened after a loss. Timeouts surface as `StoreBusyError`, a lost or unreachable server as
`StoreUnavailableError` (both retryable), a value PostgreSQL cannot hold as `UsageError`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import ConnectionPool

from .._defaults import (
    PG_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    PG_LOCK_TIMEOUT_MS,
    PG_STATEMENT_TIMEOUT_MS,
)
from ..errors import (
    CommitUnknownError,
    MigrationError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from ._backend import Row, ServerAdmission
from ._migrations import MIGRATIONS, statements
from ._pgnotify import FOLLOW_LOCK, FOLLOW_SQL, INTERRUPT_CHANNEL, Notifier
from ._pgtx import ADMIT, PgTx, admit_params, pipelined, reading
from ._pgwire import Wire, pg_sql

if TYPE_CHECKING:
    from ..config import StoreConfig
    from ._cipher import Cipher

CHANNEL = "wakeful_events"  # every committed append and admission (followers, the hub)
# Admissions only: new input, the one change that makes a session startable (a worker waits on
# this channel, so other sessions' appends do not wake every worker of a fleet).
WORK_CHANNEL = "wakeful_work"
_MIGRATE_LOCK = 0x57414B46

log = logging.getLogger("wakeful.store")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _alive(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle pooled connection still works, as far as can be told cheaply: an idle
    connection has nothing to read unless the server ended it (its last message, then EOF);
    only then is a round trip spent to be sure."""
    if conn.closed or conn.broken:
        return False
    try:
        poller = select.poll()  # (not select(): it fails for descriptors above 1023)
        poller.register(conn.fileno(), select.POLLIN)
        if poller.poll(0):
            conn.execute("")
    except (psycopg.Error, OSError):
        return False
    return True


def _redact(url: str) -> str:
    """The URL without its password, for error messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


class _Listener:
    """A LISTENing connection on one channel, opened on first use (one waiter at a time); a
    `follows` one (the events channel) holds `FOLLOW_LOCK` too, for as long as it is open, so
    that notifiers announce events (`_pgnotify`: only while someone follows)."""

    def __init__(self, channel: str, *, follows: bool) -> None:
        self.channel = channel
        self.follows = follows
        self.conn: psycopg.Connection[Any] | None = None
        self.lock = threading.Lock()
        # A pipe whose byte ends a wait early (`wake`), open while `conn` is: closing the
        # store does not wait out a waiter's timeout (a coordinator's watcher waits a poll
        # interval at a time, and `Runtime.aclose` closed its store that much later).
        self._pipe: tuple[int, int] | None = None
        self._pipe_lock = threading.Lock()

    def open(self, conn: psycopg.Connection[Any]) -> None:
        """Take `conn` (under `lock`), LISTENing already."""
        self.conn = conn
        with self._pipe_lock:
            if self._pipe is None:
                self._pipe = os.pipe()
                for end in self._pipe:
                    os.set_blocking(end, False)

    def heard(self, timeout_s: float) -> list[str]:
        """(under `lock`, `conn` open) The payloads received already, or else those of the
        first notifications that arrive within `timeout_s`; none once `wake` is called."""
        assert self.conn is not None and self._pipe is not None
        heard = [n.payload for n in self.conn.notifies(timeout=0)]
        if heard:
            return heard
        poller = select.poll()  # (not select(): it fails for descriptors above 1023)
        poller.register(self.conn.fileno(), select.POLLIN)
        poller.register(self._pipe[0], select.POLLIN)
        poller.poll(max(timeout_s, 0.001) * 1000)
        with contextlib.suppress(OSError):  # (empty: BlockingIOError)
            os.read(self._pipe[0], 4096)
        return [n.payload for n in self.conn.notifies(timeout=0)]

    def wake(self) -> None:
        """End the current wait, if any, early (from any thread)."""
        with self._pipe_lock, contextlib.suppress(OSError):
            if self._pipe is not None:
                os.write(self._pipe[1], b"\0")

    def drop(self) -> None:
        """Close the connection (under `lock`): the next wait opens another."""
        if self.conn is not None:
            with contextlib.suppress(psycopg.Error):
                self.conn.close()
            self.conn = None
        with self._pipe_lock:
            if self._pipe is not None:
                for end in self._pipe:
                    os.close(end)
                self._pipe = None


class PostgresBackend:
    """A PostgreSQL database reached by URL (`postgresql://user@host:port/db`)."""

    kind = "postgres"

    def __init__(
        self,
        url: str,
        *,
        max_size: int = 8,
        connect_timeout_s: float = 5.0,
        options: StoreConfig | None = None,
    ) -> None:
        self.url = url
        self.cipher: Cipher | None = None
        self._max_size = max_size
        self._connect_timeout_s = connect_timeout_s
        # The `[store]` timeouts; without options their defaults, and no configuration model.
        if options is None:
            self._lock_ms = PG_LOCK_TIMEOUT_MS
            self._statement_ms = PG_STATEMENT_TIMEOUT_MS
            self._idle_ms = PG_IDLE_IN_TRANSACTION_TIMEOUT_MS
        else:
            self._lock_ms = options.lock_timeout_ms
            self._statement_ms = options.statement_timeout_ms
            self._idle_ms = options.idle_in_transaction_timeout_ms
        self._listeners = {
            CHANNEL: _Listener(CHANNEL, follows=True),
            WORK_CHANNEL: _Listener(WORK_CHANNEL, follows=False),
            INTERRUPT_CHANNEL: _Listener(INTERRUPT_CHANNEL, follows=False),
        }
        # A pooled connection serves one thread at a time, and so does its wire.
        self._wires: dict[psycopg.Connection[Any], Wire] = {}
        self._wires_lock = threading.Lock()
        self._notifier = Notifier(CHANNEL, WORK_CHANNEL, self._notify_connection)
        try:
            probe = psycopg.connect(url, connect_timeout=int(connect_timeout_s), autocommit=True)
            probe.close()
        except psycopg.Error as err:
            raise StoreError(
                f"cannot reach PostgreSQL at {_redact(url)}: {_first_line(err)}"
            ) from None
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            open=True,
            configure=self._configure,
            kwargs={"autocommit": True, "connect_timeout": int(connect_timeout_s)},
        )
        try:
            self._migrate()
        except BaseException as err:
            self._pool.close()  # a refused database leaves no pool threads behind
            if isinstance(err, psycopg.Error):
                raise MigrationError(f"cannot migrate {_redact(url)}: {err}") from None
            raise

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Give a new pooled connection the `[store]` timeouts (one round trip, once). From
        PostgreSQL 17 on, a whole transaction is also bounded by the statement timeout: that
        ends even a transaction whose client paused while the server waited mid-message.
        psycopg prepares nothing on it: the connection's `Wire` prepares its statements, and
        psycopg's own cache would deallocate them all (`DEALLOCATE ALL`) on some commands."""
        conn.prepare_threshold = None
        settings = {
            "lock_timeout": self._lock_ms,
            "statement_timeout": self._statement_ms,
            "idle_in_transaction_session_timeout": self._idle_ms,
        }
        if conn.info.server_version >= 170000:
            settings["transaction_timeout"] = self._statement_ms
        conn.execute(
            "SELECT " + ", ".join("set_config(%s, %s, false)" for _ in settings),
            [v for name, ms in settings.items() for v in (name, f"{ms}ms")],
        )

    def _notify_connection(self) -> psycopg.Connection[Any]:
        """The notifier's connection: the store's timeouts, and commits that wait for no WAL
        flush (a notify-only transaction still writes a commit record; losing it in a crash
        loses only a hint), so the notify lock is held for a moment only."""
        conn = psycopg.connect(
            self.url, autocommit=True, connect_timeout=int(self._connect_timeout_s)
        )
        try:
            self._configure(conn)
            conn.execute("SET synchronous_commit = off")
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection that is not known to be dead: one the server ended while it
        sat in the pool (a restart, `pg_terminate_backend`) is closed, so the pool replaces
        it, and the next one is tried."""
        for _ in range(self._max_size + 1):
            with self._pool.connection() as conn:
                if _alive(conn):
                    yield conn
                    return
                with contextlib.suppress(psycopg.Error):
                    conn.close()
        raise StoreUnavailableError(f"no working connection to PostgreSQL at {_redact(self.url)}")

    def _wire(self, conn: psycopg.Connection[Any]) -> Wire:
        """The connection's `Wire`, made on its first use and kept with it (its transformer
        and prepared statements serve every transaction on that connection)."""
        wire = self._wires.get(conn)
        if wire is None:
            with self._wires_lock:
                for gone in [c for c in self._wires if c.closed]:  # the pool replaced it
                    del self._wires[gone]
                wire = self._wires[conn] = Wire(conn)
        return wire

    @contextmanager
    def transaction(self, *, write: bool, batched: bool = False) -> Iterator[PgTx]:
        """Open a transaction; faults are translated as `_errors` says. A read sends its
        statements without BEGIN and COMMIT: under READ COMMITTED every statement of a
        transaction block takes its own snapshot anyway and reads lock nothing, so the block
        would only cost two round trips per read (`docs/store.md`, "Round trips"). A `batched`
        read sends what it sends with `query` before reading a row together, answered in one
        round trip. Every statement goes through the connection's `Wire` (`_pgwire.py`). The
        sessions a write notified are announced once it has committed (`Notifier`)."""
        with self._errors(), self._connection() as conn:
            wire = self._wire(conn)
            if not write:
                with reading(wire, self.cipher, batched=batched) as tx:
                    yield tx
                return
            with pipelined(wire, self._committed, self.cipher) as tx:
                yield tx
        self._notifier.send(tx.notified, work=tx.admitted)

    def _committed(self, xid: str | None) -> bool:
        """Whether the transaction `xid`, whose COMMIT was sent on a connection lost before
        the answer came, committed after all. Asks the server on a new connection until it
        knows: a transaction still in progress (its backend has not noticed the lost client
        yet) ends by the idle-in-transaction or statement timeout at the latest, so the asking
        stops a little after both; `CommitUnknownError` when no answer can be had by then (the
        write may or may not be durable)."""
        wait_ms = max(self._idle_ms, self._statement_ms) + 1_000
        deadline = time.monotonic() + wait_ms / 1000
        problem = "its transaction id never arrived"
        while xid is not None:
            try:
                with psycopg.connect(
                    self.url, autocommit=True, connect_timeout=int(self._connect_timeout_s)
                ) as conn:
                    row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
                status = None if row is None else row[0]
            except psycopg.Error as err:
                status, problem = "unknown", _first_line(err)
            if status == "committed":
                log.warning("connection lost during COMMIT; transaction %s committed", xid)
                return True
            if status == "aborted":
                return False
            if status != "unknown":
                problem = f"its status stayed {status or 'unknown'}"
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)  # "in progress" (its backend is still ending) or no answer yet
        raise CommitUnknownError(
            f"the connection to PostgreSQL at {_redact(self.url)} was lost during COMMIT and "
            f"whether it committed cannot be told ({problem}); read the store before retrying"
        )

    def admit_alone(self, admission: ServerAdmission) -> Row | None:
        """A whole admission as one statement outside any transaction block: the server runs
        a single statement as its own transaction, so it commits or not as one, and nothing
        else travels (no BEGIN, no COMMIT: the statement and a Sync). Returns `(outcome, seq, event_id)`;
        a created item is announced after the statement (`Notifier`)."""
        with self._errors(), self._connection() as conn:
            wire = self._wire(conn)
            wire.begin()
            try:
                slot = wire.send(pg_sql(ADMIT), admit_params(admission))
                wire.sync()
            finally:
                wire.end()
            row = slot.one()
        if row is not None and row[0] == "created":
            self._notifier.send((admission.session_id,), work=(admission.session_id,))
        return row

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Conflicts and timeouts become `StoreBusyError`; a lost or unreachable server (also
        one that ended a paused transaction) `StoreUnavailableError` naming the URL (password
        masked); a value PostgreSQL cannot hold (a NUL character in text) `UsageError`."""
        try:
            yield
        except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected) as err:
            raise StoreBusyError(f"PostgreSQL write conflict; retry ({err.sqlstate})") from None
        except psycopg.errors.LockNotAvailable as err:
            raise StoreBusyError(f"PostgreSQL lock timeout; retry ({err.sqlstate})") from None
        except psycopg.errors.QueryCanceled as err:
            raise StoreBusyError(f"PostgreSQL statement timeout; retry ({err.sqlstate})") from None
        except psycopg.errors.IdleInTransactionSessionTimeout as err:
            raise StoreUnavailableError(
                f"PostgreSQL at {_redact(self.url)} ended a transaction left idle past "
                f"idle_in_transaction_timeout_ms (was this process paused?); retry ({err.sqlstate})"
            ) from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as err:
            raise StoreUnavailableError(
                f"PostgreSQL at {_redact(self.url)} failed: {_first_line(err)}"
            ) from None
        except psycopg.DataError as err:
            raise UsageError(f"PostgreSQL cannot store a value: {_first_line(err)}") from None

    def wait_for_change(self, timeout_s: float) -> None:
        """Block on LISTEN until a NOTIFY of any commit arrives or the timeout passes; the
        listening connection is a follower's (`FOLLOW_LOCK`), so other processes announce their
        commits while it is open (the first ones at most `_pgnotify.RECHECK_S` late). A lost
        listening connection is dropped and reopened by the next call; meanwhile the wait is a
        sleep (callers read the store after every wait, so nothing is missed, only noticed
        later)."""
        self._wait(self._listeners[CHANNEL], timeout_s)

    def wait_for_work(self, timeout_s: float) -> None:
        """`wait_for_change` for admissions only (`WORK_CHANNEL`)."""
        self._wait(self._listeners[WORK_CHANNEL], timeout_s)

    def announce_interrupt(self, session_id: str, request_id: int) -> None:
        """Announce the committed interrupt request `request_id` of `session_id` on the
        interrupt channel, whoever follows (`Notifier`)."""
        self._notifier.send((), interrupts=[(request_id, session_id)])

    def wait_for_interrupts(self, timeout_s: float) -> tuple[bool, list[tuple[int, str]]]:
        """Block on LISTEN on the interrupt channel until a request is announced or the
        timeout passes; return whether the LISTEN began in this call (a first call, or one
        after a lost connection: what was announced before it was missed, read the store)
        and the requests heard, as (request event id, session id)."""
        fresh, heard = self._wait(self._listeners[INTERRUPT_CHANNEL], timeout_s)
        requests = []
        for payload in heard:
            request_id, _, session_id = payload.partition(" ")
            if request_id.isdigit() and session_id:
                requests.append((int(request_id), session_id))
        return fresh, requests

    def _wait(self, listener: _Listener, timeout_s: float) -> tuple[bool, list[str]]:
        """Wait on `listener`; return whether its LISTEN began (or failed) in this call, so
        that what was announced before may have been missed, and the payloads heard."""
        heard: list[str] = []
        fresh = False
        with listener.lock:
            try:
                if listener.conn is None:
                    fresh = True
                    conn = psycopg.connect(
                        self.url, autocommit=True, connect_timeout=int(self._connect_timeout_s)
                    )
                    listener.open(conn)
                    conn.execute(f"LISTEN {listener.channel}")
                    if listener.follows:
                        conn.execute(FOLLOW_SQL, FOLLOW_LOCK)
                heard = listener.heard(timeout_s)  # (a burst wakes us once)
            except psycopg.Error:
                listener.drop()
                time.sleep(max(timeout_s, 0.0))
                fresh = True
        return fresh, heard

    def watch_commits(self, on_commit: Callable[[], None]) -> Callable[[], None]:
        """A daemon thread LISTENs (`wait_for_change`) and calls `on_commit` after every NOTIFY
        or quarter second; a failed listening connection is logged and retried a second later
        (readers poll meanwhile). The returned function stops and joins the thread and closes
        the listening connection (the next `wait_for_change` opens another), so no LISTEN is
        left unread: an unread one would hold back the server's notification queue."""
        stopping = threading.Event()

        def listen() -> None:
            while not stopping.is_set():
                try:
                    self.wait_for_change(0.25)
                except Exception:  # the listening connection failed: polling still covers it
                    log.warning("LISTEN for new events failed; relying on polling", exc_info=True)
                    stopping.wait(1.0)
                    continue
                on_commit()

        thread = threading.Thread(target=listen, name="wakeful-listen", daemon=True)
        thread.start()

        def stop() -> None:
            stopping.set()
            thread.join()
            listener = self._listeners[CHANNEL]
            with listener.lock:
                listener.drop()

        return stop

    def close(self) -> None:
        """Send the notifications still queued (waiting up to the connect timeout), then close
        the notifier, the pool and the listening connections."""
        self._notifier.close(self._connect_timeout_s)
        self._pool.close()
        self._wires.clear()
        for listener in self._listeners.values():
            listener.wake()  # (a waiter returns now, not at its timeout)
        for listener in self._listeners.values():
            with listener.lock:
                listener.drop()

    def _migrate(self) -> None:
        with self._pool.connection() as conn, conn.transaction():
            # A migration may wait for another opener's and take long: no store timeouts here.
            conn.execute("SET LOCAL lock_timeout = 0")
            conn.execute("SET LOCAL statement_timeout = 0")
            if conn.info.server_version >= 170000:
                conn.execute("SET LOCAL transaction_timeout = 0")
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
                    conn.execute(stmt)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (%s, %s, %s)",
                    (number, name, time.time_ns() // 1_000_000),
                )
