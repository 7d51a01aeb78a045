"""Migrations 11 to 20: commit order on PostgreSQL and leaner writes (cache usage, messages
without a second copy, the children index, message shapes, batched indexing). Released: nothing
here changes; a new need is a new number in the newest era module."""

from __future__ import annotations

from .._admit_sql import ADMIT_FUNCTION_11, QUIET_ADMIT
from ._statements import Migration

# Commit order without a database-wide lock (PostgreSQL; docs/store.md, "Instance-wide order").
# Every event records `tx`: the larger of its transaction's id and the `tx` of the session's
# previous event, set by a trigger, so a session's events never go back in (tx, id) order. The
# instance-wide follow reads in (tx, id) order and only `tx` below the reading snapshot's xmin:
# every transaction with such an id has ended, so nothing can still commit behind the reader.
# Events written before this migration keep `tx` 0 (they are all committed, in id order).
# The admission function takes the session's row lock instead of the append lock (its first
# parameter is now unused): its next statement's snapshot then sees every earlier admission.
_COMMIT_ORDER = (
    """
ALTER TABLE events ADD COLUMN tx xid8 NOT NULL DEFAULT '0';
CREATE INDEX events_position ON events (tx, id);
CREATE FUNCTION wakeful_event_position() RETURNS trigger AS $$
BEGIN
  NEW.tx := greatest(pg_current_xact_id(), coalesce((SELECT e.tx FROM events e
    WHERE e.session_id = NEW.session_id ORDER BY e.seq DESC LIMIT 1), '0'::xid8));
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
"""
    + ADMIT_FUNCTION_11
    + """;
CREATE TRIGGER events_position BEFORE INSERT ON events FOR EACH ROW
  EXECUTE FUNCTION wakeful_event_position()
"""
)  # (the trigger last: `statements` reads a CREATE TRIGGER up to an END, as SQLite's are)

_CACHE_USAGE = """
ALTER TABLE sessions ADD COLUMN cache_read_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0
"""

# The transcript projection keyed by its primary key alone (SQLite): as a rowid table, `messages`
# stored every row twice, once in the table and once in its `(session_id, seq)` key, and the
# transcript read went through the key to the row. WITHOUT ROWID keeps the rows in the key's
# b-tree: 47 fewer bytes per message, one b-tree search fewer per message read (docs/store.md,
# "Bytes per message"). PostgreSQL has no such table kind (its heap and key are separate by
# design): nothing changes there.
_LEAN_MESSAGES_SQLITE = """
CREATE TABLE messages_lean (
  session_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  message_id TEXT NOT NULL,
  role TEXT NOT NULL,
  turn_id TEXT,
  reverted BIGINT,
  body_seq BIGINT,
  PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
INSERT INTO messages_lean (session_id, seq, message_id, role, turn_id, reverted, body_seq)
  SELECT session_id, seq, message_id, role, turn_id, reverted, body_seq FROM messages;
DROP TABLE messages;
ALTER TABLE messages_lean RENAME TO messages;
CREATE INDEX messages_reverted ON messages (session_id) WHERE reverted IS NOT NULL
"""

# `sessions_parent` holds children only. As a full index, SQLite's planner took it for the
# listing's `parent_id IS NULL` (an equality it assumes selective), read every root and sorted
# them all: a first page of 100,000 sessions took ~37 ms instead of a walk of `sessions_roots`.
# A child lookup (`parent_id = ?`) still uses it: the equality implies `IS NOT NULL`.
_CHILDREN_INDEX = """
DROP INDEX sessions_parent;
CREATE INDEX sessions_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL
"""

# The shapes a session's stored message bodies were written under (`_append.append_events`):
# NULL while it has none, the digest of the event and message models' shapes
# (`wakeful.events.SHAPES_DIGEST`) while every body was written under those, '-' once bodies
# of two shapes (or of a store older than this migration) may be mixed. A transcript read
# returns the bodies of a session of today's digest as stored, without reshaping each one
# (docs/store.md, "Loading a transcript"); the sessions that already hold messages are '-'.
_MESSAGE_SHAPES = """
ALTER TABLE sessions ADD COLUMN message_shapes TEXT;
UPDATE sessions SET message_shapes = '-'
  WHERE EXISTS (SELECT 1 FROM messages m WHERE m.session_id = sessions.id)
"""

# Full-text indexing in batches (SQLite; issue 25). FTS5 writes a new segment, its structure
# record, an `_idx` row and the row's size at every commit that indexes anything: 7 of the 16.5
# WAL pages an appended message's commit wrote, and a third of its CPU. `search_indexed.upto`
# now says which `search_docs` rows the index holds: exactly those with `id <= upto`. A new row
# (still written in its message's transaction) above it waits, and costs its commit nothing
# more; the row whose id is a multiple of SEARCH_BATCH indexes every waiting row and itself as
# one segment, and a search first indexes what waits (`_search.index_pending`), so it finds
# every committed message as before. A row that gets an id at or below `upto` (ids are reused
# once the newest rows are deleted) is indexed at once; a deleted row leaves the index only if
# it was in it. PostgreSQL's index is written with each row as before (its GIN index keeps its
# own pending list). Migration 25 moved the mark to event ids (`_search_log`).
SEARCH_BATCH = 64  # part of migration 20: changed only by a new migration
# One trigger, so that no second one sees the mark this one moved (their order is SQLite's).
# A reused id (at or below the mark) has no waiting row above it: the range is that row alone.
_SEARCH_BATCHED = f"""
CREATE TABLE search_indexed (upto INTEGER NOT NULL);
INSERT INTO search_indexed (upto) SELECT COALESCE(MAX(id), 0) FROM search_docs;
DROP TRIGGER search_docs_added;
CREATE TRIGGER search_docs_added AFTER INSERT ON search_docs
WHEN new.id % {SEARCH_BATCH} = 0 OR new.id <= (SELECT upto FROM search_indexed) BEGIN
  INSERT INTO search_fts (rowid, body) SELECT id, body FROM search_docs
    WHERE id > (SELECT MIN(upto, new.id - 1) FROM search_indexed) ORDER BY id;
  UPDATE search_indexed SET upto = MAX(upto, new.id);
END;
DROP TRIGGER search_docs_removed;
CREATE TRIGGER search_docs_removed AFTER DELETE ON search_docs
WHEN old.id <= (SELECT upto FROM search_indexed) BEGIN
  INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', old.id, old.body);
END
"""

ERA: list[Migration] = [
    (
        # Instance-wide commit order without the append lock (`_COMMIT_ORDER`); SQLite has one
        # writer at a time, its ids commit in order.
        11,
        "commit_order",
        "",
        _COMMIT_ORDER,
    ),
    (
        # Sessions total the tokens read from and written to the providers' prompt caches.
        12,
        "cache_usage",
        _CACHE_USAGE,
        _CACHE_USAGE,
    ),
    (
        # `messages` without its second copy on SQLite (`_LEAN_MESSAGES_SQLITE`); nothing on
        # PostgreSQL.
        15,
        "lean_messages",
        _LEAN_MESSAGES_SQLITE,
        "",
    ),
    (
        # No NOTIFY inside the admission's transaction (`QUIET_ADMIT`); nothing on SQLite.
        17,
        "admit_after_commit_notify",
        "",
        QUIET_ADMIT,
    ),
    (
        # The children index without the roots (`_CHILDREN_INDEX`).
        18,
        "children_index",
        _CHILDREN_INDEX,
        _CHILDREN_INDEX,
    ),
    (
        # Which shapes a session's message bodies were written under (`_MESSAGE_SHAPES`).
        19,
        "message_shapes",
        _MESSAGE_SHAPES,
        _MESSAGE_SHAPES,
    ),
    (
        # Full-text indexing in batches on SQLite (`_SEARCH_BATCHED`); nothing on PostgreSQL.
        20,
        "search_batched",
        _SEARCH_BATCHED,
        "",
    ),
]
