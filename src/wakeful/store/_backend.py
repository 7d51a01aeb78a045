"""The seam between the store's SQL and a database driver.

The store writes its SQL once, with `?` placeholders; a backend runs it in a transaction.
Invariant: a write transaction on one session is serialized against every other writer of that
session (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: `SELECT ... FOR UPDATE` on the session row via
`lock_session`), which is what makes per-session `seq` gap-free.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:
    from ._cipher import Cipher

Row = tuple[Any, ...]
Params = Sequence[Any]


class ServerAdmission(NamedTuple):
    """A whole admission as a server-side call takes it (`Tx.admit_on_server`,
    `Backend.admit_alone`; built by `_inbox.server_admission`): the content digest and the
    event's JSON as stored (keyed and sealed in an encrypted store)."""

    session_id: str
    input_id: str
    kind: str
    delivery: str
    digest: str
    event_type: str
    data: str
    now_ms: int


_T = TypeVar("_T")


class Pending(Protocol):
    """The rows of a query sent earlier in the transaction, read on demand."""

    def one(self) -> Row | None:
        """The first row, or None (waits for the server when it has not answered yet)."""
        ...

    def all(self) -> list[Row]:
        """Every row (waits for the server when it has not answered yet)."""
        ...


class Rows:
    """A `Pending` whose rows are already here (a backend without round trips)."""

    __slots__ = ("_rows",)

    def __init__(self, rows: list[Row]) -> None:
        self._rows = rows

    def one(self) -> Row | None:
        """The first row, or None."""
        return self._rows[0] if self._rows else None

    def all(self) -> list[Row]:
        """Every row."""
        return self._rows


class Tx(Protocol):
    """One open transaction.

    `query` and `send` let a backend with round trips (PostgreSQL) pipeline: everything sent
    before the first read travels together, and statements sent after the last read travel
    with the commit. SQLite runs each at once.
    """

    kind: str  # "sqlite" or "postgres": the few statements that differ pick theirs by it
    cipher: Cipher | None  # an encrypted store's keys (`_cipher.py`), None when it is not

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """Run a query and return its first row, or None."""
        ...

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        """Run a query and return every row."""
        ...

    def run(self, sql: str, params: Params = ()) -> int:
        """Run a statement and return the number of rows it changed."""
        ...

    def query(self, sql: str, params: Params = ()) -> Pending:
        """Send a query now and read its rows later (after sending what else is known)."""
        ...

    def send(self, sql: str, params: Params = ()) -> None:
        """Run a statement whose outcome the caller does not read.

        PostgreSQL sends it with the next read or the commit; an error it causes raises there
        at the latest, and the transaction rolls back as usual.
        """
        ...

    def lock_session(self, session_id: str) -> Row | None:
        """Lock a session row for this transaction; return (last_seq, root_id, listed_ms,
        status, ...) or None (SQLite's ends with `message_shapes`)."""
        ...

    def lock_query(self, session_id: str) -> Pending:
        """`lock_session` as a pending query, so later queries share its round trip."""
        ...

    def event_ids(self, n: int) -> Pending:
        """Reserve `n` new global event ids, one per row, ascending.

        Call it after `lock_session`/`lock_query` in the same transaction: a session's appends
        are then serialized, so its ids grow with its `seq` (ids of different sessions may
        commit out of order on PostgreSQL: docs/store.md, "Instance-wide order").
        """
        ...

    def claim_and_ids(self, session_id: str, n: int) -> Pending:
        """The session's claim row and `n` new event ids, as one row: `(token, epoch,
        released, ids)` (the first three None when the session has no claim row; `ids` a list,
        ascending, as `event_ids` reserves them). One statement where a fenced append sent two.
        Call it after the session's lock, as `event_ids`: the claim is then read after the
        lock was granted (a takeover that committed meanwhile is seen)."""
        ...

    def admit_on_server(self, admission: ServerAdmission) -> Pending | None:
        """Send a whole admission as one server-side call (`_admit_sql.ADMIT_FUNCTION`) whose
        row `(outcome, seq, event_id)` is read later; None when the database has no such call
        (SQLite: no round trips to save, the store runs the statements itself)."""
        ...

    def notify(self, session_id: str) -> None:
        """Tell followers in other processes that the session has new events, once the
        transaction has committed (never when it rolls back; PostgreSQL: after the commit, from
        a connection of its own, so no data-writing transaction takes the notify lock)."""
        ...

    def row_lock(self, *, skip_locked: bool = False, of: str | None = None) -> str:
        """The clause that ends a SELECT locking its rows for this transaction.

        PostgreSQL: ``FOR UPDATE`` (``FOR UPDATE SKIP LOCKED`` to pass over rows another
        transaction holds, so concurrent callers take disjoint rows; `of` names the one table
        of a join whose rows are locked). SQLite: empty, because its
        write transaction already holds the database lock.
        """
        ...


class Backend(Protocol):
    """A database the store can use."""

    kind: str
    url: str
    cipher: Cipher | None  # set when the store is encrypted (`_cipher.attach`)

    def transaction(self, *, write: bool, batched: bool = False) -> AbstractContextManager[Tx]:
        """Open a transaction; commit when the block ends, roll back on an exception.
        `batched` (reads): the queries sent with `Tx.query` before the first row is read
        travel together (one round trip on PostgreSQL; nothing changes on SQLite)."""
        ...

    def admit_alone(self, admission: ServerAdmission) -> Row | None:
        """Run a whole admission as one statement that is its own transaction (PostgreSQL's
        `wakeful_admit`) and return its `(outcome, seq, event_id)`; None, having written
        nothing, when the database has no such statement (SQLite: the store admits in a
        transaction)."""
        ...

    def wait_for_change(self, timeout_s: float) -> None:
        """Block until another writer may have committed something, or the timeout passes."""
        ...

    def wait_for_work(self, timeout_s: float) -> None:
        """`wait_for_change` for admissions only (new input: what may make a session
        startable), or the timeout."""
        ...

    def announce_interrupt(self, session_id: str, request_id: int) -> None:
        """Tell other processes of the committed interrupt request `request_id` (PostgreSQL:
        NOTIFY on the interrupt channel, whoever follows; SQLite: nothing, watchers poll)."""
        ...

    def wait_for_interrupts(self, timeout_s: float) -> tuple[bool, list[tuple[int, str]]] | None:
        """Block until an interrupt request is announced or the timeout passes; return whether
        listening began in this call (what was announced before may have been missed) and the
        requests heard as (request event id, session id). None at once when nothing is
        announced (SQLite): a watcher polls the store."""
        ...

    def watch_commits(self, on_commit: Callable[[], None]) -> Callable[[], None]:
        """Call `on_commit` (from another thread) whenever any process may have committed,
        as far as the database can tell without polling; return the function that stops
        watching. PostgreSQL: a LISTEN thread; SQLite: nothing to watch (readers poll)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def iter_chunks(rows: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    """Yield `rows` in slices of at most `size` (for bounded IN (...) lists)."""
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def sha256_hex(data: bytes) -> str:
    """The hex SHA-256 of `data`; `hashlib` (and OpenSSL) load on the first digest, not when the
    store is imported (cold start, issue 25)."""
    import hashlib

    return hashlib.sha256(data).hexdigest()
