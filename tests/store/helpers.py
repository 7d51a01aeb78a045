"""Small writes the store tests share."""

from __future__ import annotations

import collections
import json
import shutil
import sqlite3
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest

from wakeful.events import MessageAdded, StoredEvent
from wakeful.messages import Message
from wakeful.store import ClaimToken, SqlStore, _migrations, _postgres, _sqlite, open_store
from wakeful.store._migrations import Migration


def add_message(
    store: SqlStore,
    session_id: str,
    message: Message,
    *,
    turn_id: str | None = None,
    claim: ClaimToken | None = None,
) -> StoredEvent:
    """Append one transcript message (a `message.added`) and return it as stored."""
    return store.append(session_id, [MessageAdded(message=message, turn_id=turn_id)], claim)[0]


def recent_events(
    store: SqlStore, session_id: str, window: int, types: Sequence[str]
) -> list[StoredEvent]:
    """`SessionRead.recent_events` of one read."""
    with store.read(session_id) as r:
        return r.recent_events(window, types)


def wal_pages_by_table(store: SqlStore, path: Path, write: Callable[[], object]) -> dict[str, int]:
    """The WAL frames `write` adds to the SQLite file `path` of `store`, by the b-tree (table
    or index) of their page: the WAL emptied first, then not checkpointed while it runs."""
    conn: sqlite3.Connection = store.backend._conn  # type: ignore[attr-defined]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    try:
        write()
    finally:
        conn.execute("PRAGMA wal_autocheckpoint = 1000")
    data = Path(f"{path}-wal").read_bytes()
    size = struct.unpack(">I", data[8:12])[0]
    owner = {int(p): str(name) for name, p in conn.execute("SELECT name, pageno FROM dbstat")}
    frames = range(32, len(data) - 23, 24 + size)
    pages = collections.Counter(owner.get(struct.unpack(">I", data[f : f + 4])[0]) for f in frames)
    return {str(name): count for name, count in pages.items()}


def as_of(patch: pytest.MonkeyPatch, backend: ModuleType, migrations: list[Migration]) -> None:
    """Make `backend` (`_sqlite` or `_postgres`) the code of an earlier schema: it knows only
    `migrations`. SQLite reads their numbers from `_schema_version` when opening and its
    scripts from `_migrations` only when one is to run; PostgreSQL has both in its list."""
    if backend is _sqlite:
        patch.setattr(_migrations, "MIGRATIONS", migrations)
        patch.setattr(_sqlite, "NUMBERS", tuple(n for n, *_ in migrations))
    else:
        patch.setattr(backend, "MIGRATIONS", migrations)


def load_pg_rows(url: str, dump: dict[str, Any]) -> None:
    """Put a frozen database's rows (`tests/fixtures/make_schema_v30.py`: each table's rows as
    `json_agg` wrote them, its sequences' values) into the database at `url`, whose schema is
    the one they were dumped from."""
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for table, rows in dump["rows"].items():
            if rows and table != "schema_migrations":
                stored = conn.execute(  # (a generated column is computed again)
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "AND is_generated = 'NEVER' ORDER BY ordinal_position",
                    (table,),
                ).fetchall()
                cols = ", ".join(c for (c,) in stored)
                conn.execute(
                    f"INSERT INTO {table} ({cols}) SELECT {cols} "
                    f"FROM json_populate_recordset(NULL::{table}, %s)",
                    (json.dumps(rows),),
                )
        for name, value in dump["sequences"].items():
            if value is not None:
                conn.execute("SELECT setval(%s, %s)", (name, value))


BEFORE_KEY = Path(__file__).resolve().parents[1] / "fixtures" / "before_key"


def frozen_before_key(name: str, target: str) -> dict[str, Any]:
    """Make `target` (a SQLite file's path, or an empty PostgreSQL database's URL) the frozen
    store `name` of `tests/fixtures/make_before_key.py` and return what its version read back
    from it (its schema is one before migration 33: today's code cannot write it)."""
    if not target.startswith("postgresql"):
        shutil.copyfile(BEFORE_KEY / f"{name}.db", target)
        return dict(json.loads((BEFORE_KEY / f"{name}.json").read_text()))
    dump = json.loads((BEFORE_KEY / f"{name}_pg.json").read_text())
    with pytest.MonkeyPatch.context() as old:
        as_of(old, _postgres, [m for m in _migrations.MIGRATIONS if m[0] in dump["migrations"]])
        open_store(target).close()
    load_pg_rows(target, dump)
    return dict(dump)


def frozen_v30_pg(url: str) -> dict[str, Any]:
    """Make the empty PostgreSQL database at `url` the frozen one of migration 30
    (`tests/fixtures/make_schema_v30.py`) and return its dump (`read`: what main read back)."""
    dump = json.loads((BEFORE_KEY.parent / "schema_v30_pg.json").read_text())
    with pytest.MonkeyPatch.context() as old:
        as_of(old, _postgres, [m for m in _migrations.MIGRATIONS if m[0] <= 30])
        open_store(url).close()
    load_pg_rows(url, dump)
    return dict(dump)
