"""One PostgreSQL transaction as the store's `Tx` (`PgTx`) over its connection's `Wire`:
statements sent in pipeline mode where a write allows it (`pipelined`: the transaction id asked
first, so a commit whose outcome was lost can be looked up), rows read when they are needed
(`_Sent`), the session row locks and the one-statement admission (`wakeful_admit`);
`_postgres.PostgresBackend` opens it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from ._backend import Params, Row, ServerAdmission
from ._pgwire import Slot, Wire, pg_sql

if TYPE_CHECKING:
    from ._cipher import Cipher

_IDLE = psycopg.pq.TransactionStatus.IDLE
_UNKNOWN = psycopg.pq.TransactionStatus.UNKNOWN
NO_LOCK = 0  # `wakeful_admit`'s first parameter, unused since migration 11
NO_CHANNEL = None  # `wakeful_admit` notifies on none (migration 17): the notifier announces

ADMIT = "SELECT o_outcome, o_seq, o_id FROM wakeful_admit(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


def admit_params(admission: ServerAdmission) -> Params:
    """`ADMIT`'s parameters for one admission (a unit's and the one-statement admission's)."""
    return (NO_LOCK, NO_CHANNEL, *admission)


@contextmanager
def pipelined(
    wire: Wire,
    committed: Callable[[str | None], bool],
    cipher: Cipher | None = None,
) -> Iterator[PgTx]:
    """One transaction in pipeline mode: BEGIN travels with the first read, COMMIT with the
    statements sent after the last one (`conn.transaction()` would add two round trips).

    The transaction's id travels with its first statement (`PgTx.xid`: with the session row
    lock, as a column of it, when that comes first, as in every append). When the connection
    is lost after COMMIT was sent, the server may have committed without the client hearing
    it: `committed(xid)` then asks the server (on another connection) and a committed
    transaction ends here as a success, an aborted one raises the connection's error (nothing
    committed: a retry is safe)."""
    conn = wire.conn
    tx: PgTx | None = None
    committing = False
    try:
        wire.begin()
        try:
            wire.send("BEGIN")
            tx = PgTx(wire, cipher, piped=True, writing=True)
            yield tx
            tx.xid_arrived()  # the id must be here before COMMIT
            committing = True
            late = tx.unanswered()
            wire.send("COMMIT")
        except BaseException:
            wire.end(quiet=True)  # (the error raised is the block's)
            raise
        wire.end()
        for slot in late:  # (answered with the commit: read after the block, see `unanswered`)
            slot.keep()
    except psycopg.Error as err:
        if not committing or _answered(conn, err):
            raise  # COMMIT never reached the server, or the server answered it: no ambiguity
        txid = None if tx is None else tx.xid()
        with contextlib.suppress(psycopg.Error):
            conn.close()  # whatever the server still holds of the transaction ends with it
        if not committed(txid):
            raise
    finally:
        if conn.info.transaction_status not in (_IDLE, _UNKNOWN):  # UNKNOWN: connection lost
            conn.execute("ROLLBACK")


@contextmanager
def reading(wire: Wire, cipher: Cipher | None = None, *, batched: bool) -> Iterator[PgTx]:
    """Reads without BEGIN and COMMIT (see `PostgresBackend.transaction`): `batched`, what is
    sent before a row is read travels together; otherwise each statement is answered as it is
    sent, its own implicit transaction, as on an autocommit connection."""
    wire.begin()
    try:
        yield PgTx(wire, cipher, piped=batched)
    except BaseException:
        wire.end(quiet=True)  # (the error raised is the block's)
        raise
    wire.end()


def _answered(conn: psycopg.Connection[Any], err: psycopg.Error) -> bool:
    """Whether `err`, raised after COMMIT was sent, is the server's answer that the transaction
    did not commit: an error it reported with a state, on a connection that lives on. Anything
    else leaves the outcome open: a lost connection; a FATAL error (`pg_terminate_backend` lands
    after the commit as well as before it); an error psycopg raised itself."""
    if conn.broken or conn.closed or err.sqlstate is None:
        return False
    return err.diag.severity_nonlocalized not in ("FATAL", "PANIC")


class _Sent:
    """A query sent on the wire. Reading its rows ends what was sent with a Sync: the server
    answers up to it and then waits *idle in transaction*, where the idle timeout can end a
    transaction whose client was paused. It costs no round trip: the read waits anyway. Rows
    that already arrived (with an earlier read's Sync, or the commit's) are read without one:
    a Sync then would be a round trip of its own, with nothing to wait for."""

    __slots__ = ("_slot",)

    def __init__(self, slot: Slot) -> None:
        self._slot = slot

    def one(self) -> Row | None:
        return self._slot.one()

    def all(self) -> list[Row]:
        return self._slot.rows()


_XID = "SELECT pg_current_xact_id()::text"
_LOCK = "SELECT last_seq, root_id, listed_ms, status FROM sessions WHERE id = %s FOR UPDATE"
_LOCK_XID = (
    "SELECT last_seq, root_id, listed_ms, status, pg_current_xact_id()::text FROM sessions "
    "WHERE id = %s FOR UPDATE"
)


class PgTx:
    """A transaction over a `Wire` (see `Tx.query`/`Tx.send`); `piped`, statements wait for a
    read or the commit, otherwise each is answered as it is sent."""

    kind = "postgres"

    def __init__(
        self, wire: Wire, cipher: Cipher | None = None, *, piped: bool, writing: bool = False
    ) -> None:
        self._wire = wire
        self.cipher = cipher
        self._piped = piped
        # A write's transaction id: the answer and column it arrives in (`xid`).
        self._xid: tuple[Slot, int] | None = None
        self._writing = writing  # a write transaction (`pipelined`): asks for its id
        self._queried: list[Slot] = []  # a write's queries (`query`, for `unanswered`)
        self.notified: set[str] = set()  # announced by the backend once the transaction commits
        self.admitted: set[str] = set()  # of those, the ones given new input (`WORK_CHANNEL`)

    def one(self, sql: str, params: Params = ()) -> Row | None:
        return self._send(sql, params).one()

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return self._send(sql, params).rows()

    def _send(self, sql: str, params: Params, *, converted: bool = False) -> Slot:
        if self._writing:
            self._ask_xid()
        slot = self._wire.send(sql if converted else pg_sql(sql), params)
        if not self._piped:
            self._wire.sync()
        return slot

    def _ask_xid(self) -> None:
        """Send `pg_current_xact_id()` (a write, before its first statement but the lock)."""
        if self._xid is None:
            self._xid = (self._wire.send(_XID), 0)

    def xid_arrived(self) -> None:
        """Make sure the transaction id has arrived (a round trip when nothing was read yet:
        it must be known before COMMIT is sent, see `pipelined`)."""
        self._ask_xid()
        assert self._xid is not None
        slot, _ = self._xid
        if not slot.ready:
            self._wire.sync()
        if self.xid() is None:  # the lock it came with found no row: ask on its own
            self._xid = None
            self._ask_xid()
            self._wire.sync()

    def xid(self) -> str | None:
        """The transaction id, when it has arrived (read from the result, not the rows: the
        lock's row is its caller's to read)."""
        if self._xid is None:
            return None
        slot, column = self._xid
        return slot.value(column)

    def run(self, sql: str, params: Params = ()) -> int:
        return self._send(sql, params).rowcount()  # (the row count arrives with the answer)

    def query(self, sql: str, params: Params = ()) -> _Sent:
        slot = self._send(sql, params)
        if self._writing:
            self._queried.append(slot)
        return _Sent(slot)

    def unanswered(self) -> list[Slot]:
        """A write's queries not answered yet, as its COMMIT is sent: they are answered with
        it, and `pipelined` loads their rows then, so a unit's last reads are read after the
        unit ended (`SessionWrite.opening`, `messages_after`, `release_and_look`) without a
        round trip of their own before the commit's."""
        late = [slot for slot in self._queried if not slot.ready]
        self._queried.clear()
        return late

    def send(self, sql: str, params: Params = ()) -> None:
        # Nobody reads the answer; an error still surfaces at the next Sync or the COMMIT.
        self._send(sql, params)

    def lock_session(self, session_id: str) -> Row | None:
        return self.lock_query(session_id).one()

    def lock_query(self, session_id: str) -> _Sent:
        if not self._writing or self._xid is not None:
            return _Sent(self._send(_LOCK, (session_id,), converted=True))
        # A write's first statement: the transaction id comes as a fifth column (one
        # statement fewer per append; the `tx` trigger does not care when the id is assigned).
        slot = self._wire.send(_LOCK_XID, (session_id,))
        self._xid = (slot, 4)
        return _Sent(slot)

    def event_ids(self, n: int) -> _Sent:
        return self.query(
            "SELECT nextval(pg_get_serial_sequence('event_log', 'id')) FROM generate_series(1, ?)",
            (n,),
        )

    def claim_and_ids(self, session_id: str, n: int) -> _Sent:
        return self.query(
            "SELECT c.token, c.epoch, c.released, ARRAY(SELECT nextval(pg_get_serial_sequence("
            "'event_log', 'id')) FROM generate_series(1, ?)) FROM (SELECT 1) AS one "
            "LEFT JOIN claims c ON c.session_id = ?",
            (n, session_id),
        )

    def admit_on_server(self, admission: ServerAdmission) -> _Sent:
        session_id = admission.session_id
        self.notified.add(session_id)  # (also when nothing is created: a spurious wake-up)
        self.admitted.add(session_id)
        return self.query(ADMIT, admit_params(admission))

    def notify(self, session_id: str) -> None:
        self.notified.add(session_id)

    def row_lock(self, *, skip_locked: bool = False, of: str | None = None) -> str:
        lock = " FOR UPDATE" if of is None else f" FOR UPDATE OF {of}"
        return lock + " SKIP LOCKED" if skip_locked else lock
