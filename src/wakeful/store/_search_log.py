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

SEARCH_TEXT_FUNCTION = "wakeful_search_text"
SEARCH_BATCH = 64  # events between two batches (part of migration 25)

# The event holding a `messages` row's message (`b`: its own, or the edit that replaced its
# text) and the input a version-2 delivery derives it from (`q`), for the row `{m}` whose own
# event is `e`.
_SOURCES = (
    "JOIN events b ON b.session_id = e.session_id AND b.seq = COALESCE({m}.body_seq, {m}.seq) "
    "LEFT JOIN inbox i ON b.type = 'inbox.delivered' AND i.session_id = e.session_id "
    "AND i.settled_seq = {m}.seq "
    "LEFT JOIN events q ON q.session_id = i.session_id AND q.seq = i.seq"
)
_TEXT = f"{SEARCH_TEXT_FUNCTION}(b.data, q.data)"
_EVENT_ID = "(SELECT id FROM events WHERE session_id = {m}.session_id AND seq = {m}.seq)"


def flush_range(low: str, high: str) -> str:
    """The statement that indexes the `messages` rows whose own event id is in
    `(low, high]` (two SQL expressions), in id order: events lead (their rowid range), each
    finds its row by key."""
    return (
        f"INSERT INTO search_fts (rowid, body) SELECT e.id, {_TEXT} "
        f"FROM events e CROSS JOIN messages m ON m.session_id = e.session_id AND m.seq = e.seq "
        f"{_SOURCES.format(m='m')} WHERE e.id > {low} AND e.id <= {high} ORDER BY e.id"
    )


def _unindex(row: str) -> str:
    """The statement that takes the entry of the `messages` row `row` (`old` or `new`) out."""
    return (
        f"INSERT INTO search_fts (search_fts, rowid, body) SELECT 'delete', e.id, {_TEXT} "
        f"FROM events e {_SOURCES.format(m=row)} "
        f"WHERE e.session_id = {row}.session_id AND e.seq = {row}.seq"
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
        f"INSERT INTO search_fts {head} e.id, {_TEXT} FROM messages m "
        f"JOIN events e ON e.session_id = m.session_id AND e.seq = m.seq {_SOURCES.format(m='m')} "
        "WHERE m.session_id = ? AND e.id <= (SELECT upto FROM search_indexed)"
    )


# What a search indexes first (`_search.index_pending`): every row still waiting.
SEARCH_FLUSH = (
    flush_range("(SELECT upto FROM search_indexed)", "(SELECT MAX(id) FROM events)"),
    "UPDATE search_indexed SET upto = COALESCE((SELECT MAX(id) FROM events), upto)",
)
SEARCH_WAITING = (
    "SELECT 1 FROM events e CROSS JOIN messages m ON m.session_id = e.session_id "
    "AND m.seq = e.seq WHERE e.id > (SELECT upto FROM search_indexed) LIMIT 1"
)

_NEW_ID, _OLD_ID = _EVENT_ID.format(m="new"), _EVENT_ID.format(m="old")
_UPTO = "(SELECT upto FROM search_indexed)"

# Migration 25 (SQLite). The title rows keep their text (a title is also `sessions.title`,
# but the row must hold what the index took in, for its delete); a message's row goes.
SEARCH_FROM_LOG_SQLITE = f"""
DROP TRIGGER search_docs_added;
DROP TRIGGER search_docs_removed;
DROP TABLE search_fts;
DELETE FROM search_docs WHERE seq <> 0;
CREATE VIEW search_text (id, body) AS
  SELECT e.id, {_TEXT} FROM events e CROSS JOIN messages m
    ON m.session_id = e.session_id AND m.seq = e.seq {_SOURCES.format(m="m")}
  UNION ALL SELECT -id, body FROM search_docs;
CREATE VIRTUAL TABLE search_fts USING fts5(
  body, content = 'search_text', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 0'
);
CREATE TRIGGER search_titles_added AFTER INSERT ON search_docs BEGIN
  INSERT INTO search_fts (rowid, body) VALUES (-new.id, new.body);
END;
CREATE TRIGGER search_titles_removed AFTER DELETE ON search_docs BEGIN
  INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', -old.id, old.body);
END;
CREATE TRIGGER search_messages_added AFTER INSERT ON messages
WHEN {_NEW_ID} >= {_UPTO} + {SEARCH_BATCH} OR {_NEW_ID} <= {_UPTO} BEGIN
  {flush_range(f"(SELECT MIN(upto, {_NEW_ID} - 1) FROM search_indexed)", _NEW_ID)};
  UPDATE search_indexed SET upto = MAX(upto, {_NEW_ID});
END;
CREATE TRIGGER search_messages_removed AFTER DELETE ON messages
WHEN {_OLD_ID} <= {_UPTO} BEGIN
  {_unindex("old")};
END;
CREATE TRIGGER search_messages_edited AFTER UPDATE OF body_seq ON messages
WHEN old.body_seq IS NOT new.body_seq AND {_NEW_ID} <= {_UPTO} BEGIN
  {_unindex("old")};
  INSERT INTO search_fts (rowid, body) SELECT e.id, {_TEXT}
    FROM events e {_SOURCES.format(m="new")}
    WHERE e.session_id = new.session_id AND e.seq = new.seq;
END;
UPDATE search_indexed SET upto = (SELECT COALESCE(MAX(id), 0) FROM events);
INSERT INTO search_fts (search_fts) VALUES ('rebuild')
"""


def register(
    conn: sqlite3.Connection, text: Callable[[str | None, str | None], str | None]
) -> None:
    """Give `conn` the function the index's view and triggers compute a message's text with
    (`_search_text.search_text`, passed in: this module holds SQL only)."""
    conn.create_function(SEARCH_TEXT_FUNCTION, 2, text, deterministic=True)
