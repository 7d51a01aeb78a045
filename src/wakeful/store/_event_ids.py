"""SQLite's global event ids without AUTOINCREMENT's counter (migration 34, issue 36). A leaf
module: the migrations import it, and so does the SQLite backend.

Invariant: an event id is never given twice, also after the events that held it are deleted
(a follower's cursor and the search index's rowids are event ids). The next id is one above
the larger of the log's largest id and `event_ids.upto`, the largest id ever deleted, which the
trigger `event_ids_kept` raises as a row above it goes, whatever statement deletes it.

Until migration 34 `event_log` was an AUTOINCREMENT table: SQLite kept the high-water mark in
`sqlite_sequence` and rewrote that row at every insert, one WAL page in every commit that adds
an event (an append wrote 5.67 pages, an admission 9.18; docs/store.md, "WAL pages per
commit"). The largest id is the last row of the log's own b-tree, a page the insert writes
anyway, and `event_ids` is written only when the newest events are deleted.
"""

from __future__ import annotations

from ._session_key import EVENT_LOG_SQLITE

# The id the next event takes is one above this (`_sqlite._SqliteTx.event_ids`).
LAST_EVENT_ID = "SELECT MAX(upto, COALESCE((SELECT MAX(id) FROM event_log), 0)) FROM event_ids"

# Migration 34, SQLite: `event_log` again without AUTOINCREMENT, its rows copied with their ids,
# and `event_ids` holding AUTOINCREMENT's high-water mark (an id given to a row since deleted).
# Between `_search_log.SEARCH_UNHOOK` and `SEARCH_REHOOK` (the search triggers read the log),
# and `_session_key.EVENTS_VIEW` made again over the new table.
EVENT_IDS_SQLITE = (
    """
DROP VIEW events;
CREATE TABLE event_ids (upto INTEGER NOT NULL);
INSERT INTO event_ids (upto)
  SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'event_log'), 0);
"""
    + EVENT_LOG_SQLITE.format(NAME="event_log_kept", ID="INTEGER PRIMARY KEY")
    + """;
INSERT INTO event_log_kept (id, sk, seq, type, at_ms, data, epoch)
  SELECT id, sk, seq, type, at_ms, data, epoch FROM event_log ORDER BY id;
DROP TABLE event_log;
DELETE FROM sqlite_sequence WHERE name = 'event_log';
ALTER TABLE event_log_kept RENAME TO event_log;
CREATE TRIGGER event_ids_kept AFTER DELETE ON event_log
WHEN old.id > (SELECT upto FROM event_ids) BEGIN
  UPDATE event_ids SET upto = old.id;
END
"""
)
