"""A pooled PostgreSQL connection's statements sent through libpq's pipeline directly (`Wire`).

psycopg's cursor, in pipeline mode, costs per statement what libpq itself costs per
transaction: a cursor with its adapters and transformer, then a wait on the socket and a
`send` before the next statement may be queued (`pipeline_communicate`), so every statement
leaves in a packet of its own. A `Wire` keeps one transformer per connection (the dumpers and
loaders it finds are kept), queues each statement in libpq's buffer, and sends what was queued
with the Sync that asks for the answers: a transaction's statements up to a read leave
together, and are answered together (docs/store.md, "Round trips"). Measured on one
transaction of a BEGIN, four reads, two updates and COMMIT in two round trips: ~480 µs of
client CPU through cursors, ~115 µs so.

Statements run often are prepared on the server (parsed and planned once per connection):
the `PREPARE_AFTER`-th use of a statement (its text and parameter types) sends a Parse of it
by name, in the same pipeline, and runs it by that name from then on, as psycopg's
`prepare_threshold` does for its cursors. A Parse the server did not answer (the pipeline
failed before it) is forgotten, so the next use prepares again.

Errors are the server's, as psycopg raises them (`psycopg.errors`): the first statement that
failed raises at the Sync that brought its answer (the statements after it up to that Sync
were not run); a lost connection raises psycopg's `OperationalError`.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors, generators, pq
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer

from ._backend import Params, Row

if TYPE_CHECKING:
    from psycopg.pq.abc import PGresult

PREPARE_AFTER = 2  # uses of a statement before it is prepared on the connection
PREPARED_MAX = 512  # prepared statements per connection (then the rest run unprepared)
_COUNTED_MAX = 4_096  # statements counted towards PREPARE_AFTER (then the counts start over)

_FATAL = pq.ExecStatus.FATAL_ERROR
_ABORTED = pq.ExecStatus.PIPELINE_ABORTED
_SYNC = pq.ExecStatus.PIPELINE_SYNC
_OFF = pq.PipelineStatus.OFF

_Key = tuple[bytes, Any]

log = logging.getLogger("wakeful.store")


def _sql(sql: str) -> str:
    return sql.replace("?", "%s")


_SQL: dict[str, str] = {}  # the store's `?` statements in psycopg's `%s` style
# psycopg's conversion of a statement: its text for libpq, and the formats its parameters want
_SHAPES: dict[str, tuple[bytes, list[Any]]] = {}


def pg_sql(sql: str) -> str:
    """`sql` with `%s` placeholders, the same string object each time (psycopg's query
    conversion is cached by the string)."""
    got = _SQL.get(sql)
    if got is None:
        if len(_SQL) > 8_192:  # statements built with a varying shape: keep the cache bounded
            _SQL.clear()
        got = _SQL[sql] = _sql(sql)
    return got


class Slot:
    """The answer to one statement sent on a `Wire`: its result once the Sync after it was
    read (`ready`), or the error it met."""

    __slots__ = ("_kept", "_wire", "error", "result")

    def __init__(self, wire: Wire) -> None:
        self._wire = wire
        self.result: PGresult | None = None
        self.error: psycopg.Error | None = None
        self._kept: list[Row] | None = None  # the rows `keep` loaded

    def keep(self) -> None:
        """Load the rows that arrived now (with the commit), so they can be read after the
        connection went back to the pool (its transformer is another thread's by then);
        nothing for an answer that has not arrived or has no rows."""
        if self.result is not None and self._kept is None:
            self._kept = self._wire.load(self.result) if self.result.ntuples else []

    @property
    def ready(self) -> bool:
        return self.result is not None or self.error is not None

    def _arrived(self) -> PGresult:
        if not self.ready:
            self._wire.sync()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def rows(self) -> list[Row]:
        """Every row (a Sync first when the answer has not arrived)."""
        if self._kept is not None:
            return self._kept
        result = self._arrived()
        if not result.ntuples:
            return []
        return self._wire.load(result)

    def one(self) -> Row | None:
        """The first row, or None."""
        if self._kept is not None:
            return self._kept[0] if self._kept else None
        result = self._arrived()
        if not result.ntuples:
            return None
        return self._wire.load(result, 1)[0]

    def rowcount(self) -> int:
        """The rows the statement changed (-1 when the server does not say)."""
        count = self._arrived().command_tuples
        return -1 if count is None else count

    def value(self, column: int) -> str | None:
        """The text of the first row's `column`, when the answer has arrived with a row (no
        Sync is sent for it)."""
        result = self.result
        if result is None or result.ntuples == 0:
            return None
        raw = result.get_value(0, column)
        return None if raw is None else bytes(raw).decode()


class _Parse(Slot):
    """The answer to the Parse of a statement being prepared: forgotten unless it succeeded."""

    __slots__ = ("key",)

    def __init__(self, wire: Wire, key: _Key) -> None:
        super().__init__(wire)
        self.key = key


class Wire:
    """One pooled connection's pipeline (see the module): `begin`, `send` statements, `sync`
    to read their answers, `end`. One thread at a time, as the connection."""

    __slots__ = (
        "_counts",
        "_names",
        "_next",
        "_pending",
        "conn",
        "encoding",
        "pgconn",
        "transformer",
    )

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.pgconn = conn.pgconn
        self.transformer = Transformer(conn)
        self.encoding = conn.info.encoding
        self._names: dict[_Key, bytes] = {}  # prepared on the server
        self._counts: dict[_Key, int] = {}
        self._next = 0
        self._pending: deque[Slot] = deque()  # sent, not answered yet

    @property
    def closed(self) -> bool:
        return self.conn.closed

    @property
    def active(self) -> bool:
        """Whether the connection is in pipeline mode (between `begin` and `end`)."""
        return self.pgconn.pipeline_status != _OFF

    def begin(self) -> None:
        """Enter pipeline mode (the connection must be idle)."""
        self.pgconn.enter_pipeline_mode()

    def _convert(self, sql: str, params: Params) -> tuple[bytes, Any, Any, Any]:
        """The statement as libpq takes it: its text with `$n` placeholders, the parameters
        dumped, their types and formats. The text and the formats wanted are psycopg's
        conversion of `sql`, made once per statement (`_SHAPES`); the dumping is the
        connection's transformer's (its dumpers found once)."""
        shape = _SHAPES.get(sql)
        if shape is None or len(params) != len(shape[1]):
            pgq = PostgresQuery(self.transformer)
            pgq.convert(sql, params)
            formats = getattr(pgq, "_want_formats", None)  # (psycopg's own name for them)
            if formats is not None and len(_SHAPES) < 8_192 and "%(" not in sql:
                _SHAPES[sql] = (pgq.query, list(formats))
            return pgq.query, pgq.params, pgq.types, pgq.formats
        tx = self.transformer
        dumped = tx.dump_sequence(params, shape[1])
        return shape[0], dumped, tx.types or (), tx.formats

    def send(self, sql: str, params: Params = ()) -> Slot:
        """Queue `sql` (psycopg's `%s` placeholders) with `params`; its answer comes with the
        next `sync`."""
        query, dumped, types, formats = self._convert(sql, params)
        key: _Key = (query, types)
        name = self._names.get(key)
        pgconn = self.pgconn
        if name is None:
            count = self._counts.get(key, 0) + 1
            if count < PREPARE_AFTER or len(self._names) >= PREPARED_MAX:
                if len(self._counts) >= _COUNTED_MAX:
                    self._counts.clear()
                self._counts[key] = count
                pgconn.send_query_params(query, dumped, param_formats=formats, param_types=types)
                return self._queued(Slot(self))
            self._counts.pop(key, None)
            name = self._names[key] = b"_wk%d" % self._next
            self._next += 1
            pgconn.send_prepare(name, query, param_types=types)
            self._pending.append(_Parse(self, key))
        pgconn.send_query_prepared(name, dumped, param_formats=formats)
        return self._queued(Slot(self))

    def _queued(self, slot: Slot) -> Slot:
        self._pending.append(slot)
        return slot

    def sync(self) -> None:
        """Send a Sync with everything queued, and read the answers up to it: one round trip.
        Raises the first error among them (after reading them all)."""
        conn, pgconn, pending = self.conn, self.pgconn, self._pending
        pgconn.pipeline_sync()
        conn.wait(generators.send(pgconn))
        first: psycopg.Error | None = None
        while True:
            try:
                results = conn.wait(generators.fetch_many(pgconn))
            except psycopg.Error:
                if first is not None:  # (the server said why, then ended the connection)
                    raise first from None
                raise
            if not results:  # nothing owed, yet no Sync: not a state libpq should be in
                pending.clear()
                raise psycopg.InterfaceError("a pipeline Sync went unanswered")
            result = results[-1]
            status = result.status
            if status == _SYNC:
                break
            slot = pending.popleft()
            if status == _FATAL:
                slot.error = errors.error_from_result(result, encoding=self.encoding)
                if first is None:
                    first = slot.error
            elif status == _ABORTED:
                slot.error = first or psycopg.OperationalError("the pipeline was aborted")
            else:
                slot.result = result
            if isinstance(slot, _Parse) and slot.error is not None:
                self._names.pop(slot.key, None)
        if pending:  # (answers for statements sent after the Sync cannot come before it)
            pending.clear()
            raise psycopg.InterfaceError("a pipeline Sync was answered before its statements")
        if first is not None:
            raise first

    def end(self, *, quiet: bool = False) -> None:
        """Read what is still unanswered (a `sync`, raising its error; `quiet`, after an error
        of the caller's, logging it instead, as psycopg's pipeline does, so the caller's is the
        one raised) and leave pipeline mode. A connection that cannot leave it cleanly (lost,
        or answers still owed after an error) is closed: the pool replaces it."""
        try:
            if self._pending:
                self.sync()
        except psycopg.Error as err:
            if not quiet:
                raise
            log.warning("error ignored ending a PostgreSQL pipeline: %s", err)
        finally:
            if self.active:
                if self._pending or self.pgconn.status != pq.ConnStatus.OK:
                    self._pending.clear()
                    self.conn.close()
                else:
                    self.pgconn.exit_pipeline_mode()

    def load(self, result: PGresult, limit: int | None = None) -> list[Row]:
        """The rows of `result` as tuples (the first `limit` of them)."""
        tx = self.transformer
        tx.set_pgresult(result)
        n = result.ntuples if limit is None else min(limit, result.ntuples)
        rows: list[Row] = tx.load_rows(0, n, tuple)
        return rows
