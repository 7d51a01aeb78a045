"""Count the SQL statements, commits and round trips of this process, on the client.

Loaded by Python at start-up as `sitecustomize` when `bench/_counting` is on `PYTHONPATH`
(`bench._counting.counting_env` puts it there); it does nothing unless `WAKEFUL_COUNT_DIR` names a
directory, into which the process writes its counts as JSON when it exits (`bench._counting.total`
sums them). So a bench counts every process it starts (workers, a baseline tree's workers)
without any code in wakeful itself.

- SQLite: every statement the library runs, through the connection's trace callback, each
  once: the statements of triggers and of FTS5's shadow tables are left out (they are part of
  the statement that fired them). FTS5's come with a leading `-- `; a trigger program is
  reported again with the text of the statement that fired it (Python passes
  `sqlite3_expanded_sql` of the running statement, not SQLite's `-- TRIGGER name`), so a report
  repeating the one before it on its connection with no call made in between (`execute`,
  `executescript`, `commit`, `rollback`) is a trigger's. `executemany` counts its rows itself
  (two equal rows give two equal reports) and ignores the reports of its call. One limit: in an
  `executescript`, a statement repeating the one before it verbatim is taken for a trigger's.
  A commit is a `COMMIT` (read transactions' included; a group commit is one) or a statement
  run outside any transaction; no round trips (in process).
- PostgreSQL (psycopg): every `Cursor.execute`/`executemany` (a `COMMIT` is a statement and a
  commit); a statement outside a `BEGIN` block on an autocommit connection is a commit of its
  own, as the server counts it; a round trip is a statement sent outside pipeline mode, or a
  pipeline's sync (an explicit one, and the one at its end). wakeful's own pipeline
  (`wakeful.store._pgwire.Wire`, which sends through libpq without a cursor) the same way:
  every `Wire.send` a statement in pipeline mode, every `Wire.sync` a round trip.

A commit is a write commit when its transaction ran an `INSERT`, `UPDATE`, `DELETE`, `REPLACE`,
took the write lock (`BEGIN IMMEDIATE`) or called a wakeful function (`SELECT wakeful_...`).
psycopg is patched when (and if) the process imports it, so a SQLite-only process pays nothing
for it.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
from typing import Any

_DIR = os.environ.get("WAKEFUL_COUNT_DIR", "")
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "BEGIN IMMEDIATE", "SELECT WAKEFUL_")


class _Counts:
    """This process's counts; `add` is called from any thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.figures = {"statements": 0, "commits": 0, "write_commits": 0, "round_trips": 0}
        self.open: dict[int, bool] = {}  # connection id -> in a transaction block: wrote?
        self.implicit: dict[int, bool] = {}  # connection -> piped statements unsynced: wrote?

    def statement(
        self, conn: int, sql: str, *, implicit_tx: bool, round_trip: bool, piped: bool = False
    ) -> None:
        """Count one statement on connection `conn` (see the module docstring); `piped`: sent
        in pipeline mode, where statements outside a block up to the next sync are one
        implicit transaction (the extended query protocol's), committed at that sync."""
        head = sql.lstrip()[:32].upper()
        with self.lock:
            f = self.figures
            f["statements"] += 1
            f["round_trips"] += round_trip
            writes = head.startswith(_WRITES)
            if piped and implicit_tx and conn not in self.open and not head.startswith("BEGIN"):
                self.implicit[conn] = self.implicit.get(conn, False) or writes
                return
            if head.startswith(("BEGIN", "START TRANSACTION")):
                self.open[conn] = writes
            elif head.startswith(("COMMIT", "END")):
                f["commits"] += 1
                f["write_commits"] += self.open.pop(conn, False)
            elif head.startswith("ROLLBACK") and not head.startswith("ROLLBACK TO"):
                self.open.pop(conn, None)
            elif conn in self.open:
                self.open[conn] = self.open[conn] or writes
            elif implicit_tx:
                f["commits"] += 1
                f["write_commits"] += writes

    def sync(self, conn: int) -> None:
        """A pipeline's sync on connection `conn`: a round trip, and the commit of the implicit
        transaction its statements since the last sync made, if any."""
        with self.lock:
            f = self.figures
            f["round_trips"] += 1
            if conn in self.implicit:
                f["commits"] += 1
                f["write_commits"] += self.implicit.pop(conn)

    def dump(self) -> None:
        """Write the counts to `WAKEFUL_COUNT_DIR/<pid>.json` (with the command line)."""
        out = dict(self.figures, argv=" ".join(sys.argv))
        path = os.path.join(_DIR, f"{os.getpid()}.json")
        try:
            with open(path, "w") as f:
                json.dump(out, f)
        except OSError:
            pass


COUNTS = _Counts()


class _Traced:
    """One connection's place in its trace reports (see `_sqlite`)."""

    __slots__ = ("key", "last", "many")

    def __init__(self, key: int) -> None:
        self.key = key
        self.last: str | None = None  # the text of the last statement counted since a call
        self.many = False  # in an `executemany`, whose rows are counted by the call

    def report(self, sql: str) -> None:
        """The trace callback: count `sql` unless it is a trigger's or FTS5's own."""
        if self.many or sql == self.last or sql.startswith("--") or "'main'.'" in sql:
            return
        self.last = sql
        COUNTS.statement(self.key, sql, implicit_tx=True, round_trip=False)


def _counted_classes(base: Any) -> Any:
    """A subclass of the connection class `base` whose calls mark a new statement in its
    `_Traced` (and a cursor class doing the same)."""
    import sqlite3

    def fresh(conn: Any) -> _Traced:
        traced: _Traced = conn._wakeful_traced
        traced.last = None
        return traced

    def many(traced: _Traced, run: Any, sql: str, rows: Any) -> Any:
        rows = list(rows)
        for _ in rows:
            COUNTS.statement(traced.key, sql, implicit_tx=True, round_trip=False)
        traced.many = True
        try:
            return run(sql, rows)
        finally:
            traced.many = False
            traced.last = None

    class Cursor(sqlite3.Cursor):
        def execute(self, sql: str, *args: Any) -> Any:
            fresh(self.connection)
            return super().execute(sql, *args)

        def executemany(self, sql: str, rows: Any) -> Any:
            return many(fresh(self.connection), super().executemany, sql, rows)

        def executescript(self, script: str) -> Any:
            fresh(self.connection)
            return super().executescript(script)

    class Connection(base):  # type: ignore[misc, valid-type]
        def cursor(self, factory: Any = Cursor) -> Any:
            return super().cursor(factory)

        def execute(self, sql: str, *args: Any) -> Any:
            fresh(self)
            return super().execute(sql, *args)

        def executemany(self, sql: str, rows: Any) -> Any:
            return many(fresh(self), super().executemany, sql, rows)

        def executescript(self, script: str) -> Any:
            fresh(self)
            return super().executescript(script)

        def commit(self) -> None:
            fresh(self)
            super().commit()

        def rollback(self) -> None:
            fresh(self)
            super().rollback()

    return Connection


def _sqlite() -> None:
    import sqlite3

    connect = sqlite3.connect
    classes: dict[Any, Any] = {}

    def counted_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        base = kwargs.pop("factory", sqlite3.Connection)
        if base not in classes:
            classes[base] = _counted_classes(base)
        conn = connect(*args, factory=classes[base], **kwargs)
        conn._wakeful_traced = traced = _Traced(id(conn))  # type: ignore[attr-defined]
        conn.set_trace_callback(traced.report)
        return conn

    sqlite3.connect = counted_connect


def _psycopg(module: Any) -> None:
    cursor = module.Cursor
    execute, executemany = cursor.execute, cursor.executemany
    off = module.pq.PipelineStatus.OFF

    def note(cur: Any, query: Any) -> None:
        conn = cur.connection
        sql = query if isinstance(query, str) else getattr(query, "as_string", lambda _c: "")(conn)
        if isinstance(sql, bytes):
            sql = sql.decode(errors="replace")
        piped = conn.pgconn.pipeline_status != off
        COUNTS.statement(
            id(conn), str(sql), implicit_tx=bool(conn.autocommit), round_trip=not piped, piped=piped
        )

    def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        note(self, query)
        return execute(self, query, *args, **kwargs)

    def counted_executemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        note(self, query)
        return executemany(self, query, *args, **kwargs)

    cursor.execute, cursor.executemany = counted_execute, counted_executemany
    pipeline = module.Pipeline
    sync, leave = pipeline.sync, pipeline.__exit__

    def counted_sync(self: Any) -> Any:
        COUNTS.sync(id(self._conn))
        return sync(self)

    def counted_exit(self: Any, *exc: Any) -> Any:
        COUNTS.sync(id(self._conn))
        return leave(self, *exc)

    pipeline.sync, pipeline.__exit__ = counted_sync, counted_exit


def _wire(module: Any) -> None:
    wire = module.Wire
    send, sync = wire.send, wire.sync

    def counted_send(self: Any, sql: Any, *args: Any, **kwargs: Any) -> Any:
        COUNTS.statement(id(self.conn), str(sql), implicit_tx=True, round_trip=False, piped=True)
        return send(self, sql, *args, **kwargs)

    def counted_sync(self: Any) -> Any:
        COUNTS.sync(id(self.conn))
        return sync(self)

    wire.send, wire.sync = counted_send, counted_sync


_PATCHES = {"psycopg": _psycopg, "wakeful.store._pgwire": _wire}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patch psycopg and wakeful's wire right after they are imported (a process that never
    imports them pays nothing)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            patch(module)

        loader.exec_module = exec_module
        return spec


if _DIR:
    _sqlite()
    sys.meta_path.insert(0, _PatchOnImport())
    atexit.register(COUNTS.dump)

if os.environ.get("WAKEFUL_PROFILE_DIR"):  # `bench_fleet.py --profile`: see `_profile.py`
    import _profile  # noqa: F401  (this folder is on the path; it starts profiling)
