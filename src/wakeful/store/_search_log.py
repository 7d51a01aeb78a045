"""SQLite's full-text index over the log's own text (migration 25, issue 36 item 5).

Invariant: the FTS5 index `search_fts` holds one entry per `messages` row (at the id of the
event at the row's `seq`, whose text is read from the event that holds the row's message:
its own, a history edit's, or for a version-2 delivery the enqueued input) and one per title
row of `search_docs` (at the row's id, negated). No text is copied for a message: the index
is an *external content* table over the view `search_text`, which computes each entry's text
from the log with `wakeful_search_text` (`_search_text.search_text`), a function every
connection of the SQLite backend registers (`register`). The triggers on `messages` keep the index in step: a deleted row, or
one whose body moves to an edit, takes out what it put in, computed from the same events
(which are never changed, and outlive the row in every delete). New entries wait for their
batch as since migration 20 (`search_indexed.upto`, now an event id); a search indexes what
waits first. Changing what `searchable_text` yields for a stored message needs a migration
that rebuilds the index (`INSERT INTO search_fts (search_fts) VALUES ('rebuild')`): the
triggers must take out exactly what was put in.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ._session_key import SESSION_KEY

SEARCH_TEXT_FUNCTION = "wakeful_search_text"
SEARCH_BATCH = 64  # events between two batches (part of migration 25)

# The two shapes of the tables the index reads. Migration 25 wrote its view and triggers over
# `events` and `messages` keyed by the text session id (`_TEXT_KEYED`, frozen: a store migrating
# from before 25 runs them as written); since migration 33 they read the tables that hold the
# rows, keyed by the session's integer key (`_session_key`), and every statement of this module
# run today is built for that shape (`_INT_KEYED`). `{E}`/`{M}`: the event and message tables,
# `{K}`: their session column, `{SID}`: the text id of the session of the event `e`.
_TEXT_KEYED = {"E": "events", "M": "messages", "K": "session_id", "SID": "e.session_id"}
_INT_KEYED = {
    "E": "event_log",
    "M": "message_log",
    "K": "sk",
    "SID": "(SELECT id FROM sessions WHERE k = e.sk)",
}


def _sources(shape: dict[str, str], m: str) -> str:
    """The event holding a `messages` row's message (`b`: its own, or the edit that replaced
    its text) and the input a version-2 delivery derives it from (`q`), for the row `m` whose
    own event is `e`."""
    e, k, sid = shape["E"], shape["K"], shape["SID"]
    q = "q.session_id = i.session_id" if k == "session_id" else "q.sk = e.sk"
    return (
        f"JOIN {e} b ON b.{k} = e.{k} AND b.seq = COALESCE({m}.body_seq, {m}.seq) "
        f"LEFT JOIN inbox i ON b.type = 'inbox.delivered' AND i.session_id = {sid} "
        f"AND i.settled_seq = {m}.seq "
        f"LEFT JOIN {e} q ON {q} AND q.seq = i.seq"
    )


_TEXT = f"{SEARCH_TEXT_FUNCTION}(b.data, q.data)"


def _event_id(shape: dict[str, str], m: str) -> str:
    """The id of the event at the row `m`'s `seq`."""
    e, k = shape["E"], shape["K"]
    return f"(SELECT id FROM {e} WHERE {k} = {m}.{k} AND seq = {m}.seq)"


def _flush_range(shape: dict[str, str], low: str, high: str) -> str:
    e, m, k = shape["E"], shape["M"], shape["K"]
    return (
        f"INSERT INTO search_fts (rowid, body) SELECT e.id, {_TEXT} "
        f"FROM {e} e CROSS JOIN {m} m ON m.{k} = e.{k} AND m.seq = e.seq "
        f"{_sources(shape, 'm')} WHERE e.id > {low} AND e.id <= {high} ORDER BY e.id"
    )


def flush_range(low: str, high: str) -> str:
    """The statement that indexes the `messages` rows whose own event id is in
    `(low, high]` (two SQL expressions), in id order: events lead (their rowid range), each
    finds its row by key."""
    return _flush_range(_INT_KEYED, low, high)


def _unindex(shape: dict[str, str], row: str) -> str:
    """The statement that takes the entry of the `messages` row `row` (`old` or `new`) out."""
    e, k = shape["E"], shape["K"]
    return (
        f"INSERT INTO search_fts (search_fts, rowid, body) SELECT 'delete', e.id, {_TEXT} "
        f"FROM {e} e {_sources(shape, row)} "
        f"WHERE e.{k} = {row}.{k} AND e.seq = {row}.seq"
    )


def session_entries(action: str) -> str:
    """The statement that puts in (`action` "insert") or takes out ("delete") the indexed
    entries of one session's messages (`?`: the session id), computed from its events as they
    are now: around a rewrite of the events' bytes (`wakeful store encrypt`)."""
    head = (
        "(rowid, body) SELECT"
        if action == "insert"
        else "(search_fts, rowid, body) SELECT 'delete',"
    )
    return (
        f"INSERT INTO search_fts {head} e.id, {_TEXT} FROM message_log m "
        f"JOIN event_log e ON e.sk = m.sk AND e.seq = m.seq {_sources(_INT_KEYED, 'm')} "
        f"WHERE m.sk = {SESSION_KEY} AND e.id <= (SELECT upto FROM search_indexed)"
    )


# What a search indexes first (`_search.index_pending`): every row still waiting.
SEARCH_FLUSH = (
    flush_range("(SELECT upto FROM search_indexed)", "(SELECT MAX(id) FROM event_log)"),
    "UPDATE search_indexed SET upto = COALESCE((SELECT MAX(id) FROM event_log), upto)",
)
SEARCH_WAITING = (
    "SELECT 1 FROM event_log e CROSS JOIN message_log m ON m.sk = e.sk "
    "AND m.seq = e.seq WHERE e.id > (SELECT upto FROM search_indexed) LIMIT 1"
)

_UPTO = "(SELECT upto FROM search_indexed)"


def _view(shape: dict[str, str]) -> str:
    """The view the index reads each message's text from, over the tables of `shape`."""
    e, m, k = shape["E"], shape["M"], shape["K"]
    return f"""CREATE VIEW search_text (id, body) AS
  SELECT e.id, {_TEXT} FROM {e} e CROSS JOIN {m} m
    ON m.{k} = e.{k} AND m.seq = e.seq {_sources(shape, "m")}
  UNION ALL SELECT -id, body FROM search_docs"""


def _triggers(shape: dict[str, str]) -> str:
    """The triggers on the message table of `shape` that keep the index in step with it."""
    e, m, k = shape["E"], shape["M"], shape["K"]
    new_id, old_id = _event_id(shape, "new"), _event_id(shape, "old")
    low = f"(SELECT MIN(upto, {new_id} - 1) FROM search_indexed)"
    return f"""CREATE TRIGGER search_messages_added AFTER INSERT ON {m}
WHEN {new_id} >= {_UPTO} + {SEARCH_BATCH} OR {new_id} <= {_UPTO} BEGIN
  {_flush_range(shape, low, new_id)};
  UPDATE search_indexed SET upto = MAX(upto, {new_id});
END;
CREATE TRIGGER search_messages_removed AFTER DELETE ON {m}
WHEN {old_id} <= {_UPTO} BEGIN
  {_unindex(shape, "old")};
END;
CREATE TRIGGER search_messages_edited AFTER UPDATE OF body_seq ON {m}
WHEN old.body_seq IS NOT new.body_seq AND {new_id} <= {_UPTO} BEGIN
  {_unindex(shape, "old")};
  INSERT INTO search_fts (rowid, body) SELECT e.id, {_TEXT}
    FROM {e} e {_sources(shape, "new")}
    WHERE e.{k} = new.{k} AND e.seq = new.seq;
END"""


# Migration 25 (SQLite). The title rows keep their text (a title is also `sessions.title`,
# but the row must hold what the index took in, for its delete); a message's row goes.
SEARCH_FROM_LOG_SQLITE = f"""
DROP TRIGGER search_docs_added;
DROP TRIGGER search_docs_removed;
DROP TABLE search_fts;
DELETE FROM search_docs WHERE seq <> 0;
{_view(_TEXT_KEYED)};
CREATE VIRTUAL TABLE search_fts USING fts5(
  body, content = 'search_text', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 0'
);
CREATE TRIGGER search_titles_added AFTER INSERT ON search_docs BEGIN
  INSERT INTO search_fts (rowid, body) VALUES (-new.id, new.body);
END;
CREATE TRIGGER search_titles_removed AFTER DELETE ON search_docs BEGIN
  INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', -old.id, old.body);
END;
{_triggers(_TEXT_KEYED)};
UPDATE search_indexed SET upto = (SELECT COALESCE(MAX(id), 0) FROM events);
INSERT INTO search_fts (search_fts) VALUES ('rebuild')
"""

# Part of migration 33 (`_session_key`): the view and the triggers dropped before the tables
# they read are rebuilt, and made again over the new ones. The index's entries stay (its
# rowids are event ids, which the rebuilt `event_log` keeps).
SEARCH_UNHOOK = """
DROP TRIGGER search_messages_added;
DROP TRIGGER search_messages_removed;
DROP TRIGGER search_messages_edited;
DROP VIEW search_text
"""
SEARCH_REHOOK = f"{_view(_INT_KEYED)};\n{_triggers(_INT_KEYED)}"


def register(
    conn: sqlite3.Connection, text: Callable[[str | None, str | None], str | None]
) -> None:
    """Give `conn` the function the index's view and triggers compute a message's text with
    (`_search_text.search_text`, passed in: this module holds SQL only)."""
    conn.create_function(SEARCH_TEXT_FUNCTION, 2, text, deterministic=True)
