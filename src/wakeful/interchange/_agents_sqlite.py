"""OpenAI Agents SDK `SQLiteSession` databases <-> wakeful sessions.

The SDK keeps each session's items as JSON rows of `agent_messages` (`session_id`,
`message_data`, `created_at`), with a row per session in `agent_sessions`. Every session of a
database becomes a wakeful session of the same id with one message per item, exactly as
`wakeful.integrations.openai_agents.WakefulSession` stores them (the items converter, the item
kept verbatim under `openai_agents.item` when the converter cannot give it back, message ids
derived from the session and the item as one batch), so the SDK can go on with the imported
session through `WakefulSession`. Export writes a database the SDK's `SQLiteSession` opens.
The bytes are read and written with SQLite's own (de)serialisation: no file is touched here.
Mapping table: `docs/interchange.md`.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from typing import Any

from ..errors import UsageError
from . import _items
from ._model import ExportedSession, ImportedSession, Written, source_id_of

FORMAT = "openai-agents"
KEPT = "items the converter cannot give back, verbatim, under the message's openai_agents metadata"
LOST = "each row's created_at time (export writes the time wakeful added the message)"

# The SDK's tables (agents/memory/sqlite_session.py, default names).
SCHEMA = """
CREATE TABLE agent_sessions (
    session_id TEXT PRIMARY KEY,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE agent_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    message_data TEXT NOT NULL,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (session_id) REFERENCES agent_sessions (session_id) ON DELETE CASCADE
);
CREATE INDEX idx_agent_messages_session_id ON agent_messages (session_id, created_at);
"""


def _rows(con: sqlite3.Connection, name: str) -> tuple[list[str], list[tuple[int, str, Any]]]:
    """The session ids and `(row id, session id, message_data)` rows of a database."""
    try:
        sessions = [
            r[0] for r in con.execute("SELECT session_id FROM agent_sessions ORDER BY rowid")
        ]
        rows = con.execute(
            "SELECT id, session_id, message_data FROM agent_messages ORDER BY id"
        ).fetchall()
    except sqlite3.DatabaseError as err:
        raise UsageError(f"{name}: not an Agents SDK SQLiteSession database ({err})") from None
    finally:
        con.close()
    return sessions, rows


def read_path(path: str) -> list[ImportedSession]:
    """`read` of the database file at `path`, opened read-only (so a WAL database's log is
    read too, which a copy of its main file would miss)."""
    from pathlib import Path

    if not Path(path).is_file():
        raise UsageError(f"{path}: no such file")
    con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    return _sessions(*_rows(con, path), path)


def read(raw: bytes, name: str) -> list[ImportedSession]:
    """One session per session of the database `raw` (its bytes, as a WAL database's main
    file once closed); `UsageError` naming the first bad row."""
    con = sqlite3.connect(":memory:")
    if raw[18:20] == b"\x02\x02":  # a WAL database's header: read its bytes as a rollback one
        raw = raw[:18] + b"\x01\x01" + raw[20:]
    try:
        con.deserialize(raw)
    except sqlite3.DatabaseError as err:
        con.close()
        raise UsageError(f"{name}: not an Agents SDK SQLiteSession database ({err})") from None
    return _sessions(*_rows(con, name), name)


def _sessions(
    session_ids: list[str], rows: list[tuple[int, str, Any]], name: str
) -> list[ImportedSession]:
    """One session per session of the database; `UsageError` naming the first bad row."""
    items: dict[str, list[dict[str, Any]]] = {sid: [] for sid in session_ids}
    wheres: dict[str, list[str]] = {sid: [] for sid in session_ids}
    for row_id, sid, data in rows:
        where = f"{name} agent_messages row {row_id}"
        if not isinstance(sid, str) or not sid:
            raise UsageError(f"{where}: no session_id")
        try:
            item = json.loads(data) if isinstance(data, str | bytes) else None
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as err:
            raise UsageError(f"{where}: message_data is not JSON ({err})") from None
        try:
            items.setdefault(sid, []).append(_items.canonical(item))
            wheres.setdefault(sid, []).append(where)
        except UsageError as err:
            raise UsageError(f"{where}: {err}") from None
    out = []
    for sid, plain in items.items():
        ids = _items.message_ids(sid, "", plain)
        messages = tuple(_items.to_message(i, mid) for i, mid in zip(plain, ids, strict=True))
        out.append(ImportedSession(FORMAT, sid, sid, messages, where=tuple(wheres[sid])))
    return out


def write(session: ExportedSession) -> Written:
    """The session as a one-session `SQLiteSession` database, its items in order."""
    from ._model import iso_ms

    sid = source_id_of(session, FORMAT) or session.id
    rows: list[tuple[str, str, str]] = []
    dropped: Counter[str] = Counter()
    for message, at_ms in session.messages:
        try:
            items = _items.to_items(message)
        except UsageError:
            dropped[f"{message.role} message"] += 1
            continue
        stamp = iso_ms(at_ms).replace("T", " ")[:19]  # SQLite's CURRENT_TIMESTAMP shape
        rows += [(sid, json.dumps(i, ensure_ascii=False), stamp) for i in items]
    con = sqlite3.connect(":memory:")
    try:
        con.executescript(SCHEMA)
        con.execute("INSERT INTO agent_sessions (session_id) VALUES (?)", (sid,))
        con.executemany(
            "INSERT INTO agent_messages (session_id, message_data, created_at) VALUES (?, ?, ?)",
            rows,
        )
        con.commit()
        return Written(con.serialize(), dropped)
    finally:
        con.close()
