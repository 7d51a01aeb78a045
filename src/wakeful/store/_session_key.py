"""The integer session key of the log and its transcript projection (migration 33, issue 36
item 5). A leaf module: the migrations import it, and so do the writers.

Invariant: `event_log` and `message_log` name their session by `sessions.k`, an integer given
once when the session's row is inserted (PostgreSQL: an identity column; SQLite: the trigger
`sessions_k`, one above the largest key) and never changed; the 29-character text id is
stored once, in `sessions`. Until migration 33 the id was stored in every event row, its key
`(session_id, seq)`, every `messages` row and the typed index: ~80 of the 656 bytes the log and
its projections took per message (docs/store.md, "Bytes per message").

Reads are unchanged: `events` and `messages` are views with the columns the tables had,
`session_id` among them, joined to `sessions` by key (a lookup by `session_id` finds the key
first and then walks the table's `(sk, seq)` key, as it walked `(session_id, seq)` before).
Writes go to the tables and name the session with `SESSION_KEY`, a subquery that turns the
text id a caller holds into the key: an insert, update or delete of a session's rows binds
the text id as before. A session's rows must go before its `sessions` row: the key of a
deleted session resolves to nothing (and a SQLite key may be given again once the largest
one is deleted).
"""

from __future__ import annotations

# The key of the session whose text id is bound at `?`: every write to the tables names its
# session through it.
SESSION_KEY = "(SELECT k FROM sessions WHERE id = ?)"


def session_keys(count: int) -> str:
    """The keys of `count` sessions whose text ids are bound in order (`sk IN` this)."""
    marks = ", ".join("?" for _ in range(count))
    return f"(SELECT k FROM sessions WHERE id IN ({marks}))"


# The views the readers read (both backends): the tables' rows with their session's text id
# (and its key, for a statement that joins a table to them). A view is never the right side of
# a LEFT JOIN: SQLite does not flatten a view that is a join there and copies all of it
# (`MATERIALIZE`) for each statement; such a statement joins the table and `sessions` itself.
_EVENTS_VIEW = """
CREATE VIEW events (id, session_id, seq, type, at_ms, data, epoch{TX}, sk) AS
  SELECT e.id, s.id, e.seq, e.type, e.at_ms, e.data, e.epoch{E_TX}, e.sk
  FROM event_log e JOIN sessions s ON s.k = e.sk
"""
EVENTS_VIEW_SQLITE = _EVENTS_VIEW.format(TX="", E_TX="")  # made again by migration 34
_VIEWS = (
    _EVENTS_VIEW
    + """;
CREATE VIEW messages (session_id, seq, message_id, role, turn_id, reverted, body_seq, sk) AS
  SELECT s.id, m.seq, m.message_id, m.role, m.turn_id, m.reverted, m.body_seq, m.sk
  FROM message_log m JOIN sessions s ON s.k = m.sk
"""
)

# The transcript projection keyed by the session's key (SQLite: WITHOUT ROWID, as since
# migration 15), its rows copied with their session's key. A row whose session is gone has no
# key: the copy then fails on `NOT NULL` and the migration rolls back, so that nothing is
# dropped unseen (so does the events' copy).
_MESSAGES = """
CREATE TABLE message_log (
  sk {INT} NOT NULL,
  seq BIGINT NOT NULL,
  message_id TEXT NOT NULL,
  role TEXT NOT NULL,
  turn_id TEXT,
  reverted BIGINT,
  body_seq BIGINT,
  PRIMARY KEY (sk, seq)
){WITHOUT};
INSERT INTO message_log (sk, seq, message_id, role, turn_id, reverted, body_seq)
  SELECT s.k, m.seq, m.message_id, m.role, m.turn_id, m.reverted, m.body_seq
  FROM messages m LEFT JOIN sessions s ON s.id = m.session_id;
DROP TABLE messages;
CREATE INDEX messages_reverted ON message_log (sk) WHERE reverted IS NOT NULL
"""

EVENT_INDEXES = """
CREATE INDEX events_type ON event_log (sk, type, seq) WHERE type <> 'message.added';
CREATE INDEX events_usage_at ON event_log (at_ms) WHERE type = 'usage.recorded'
"""

# SQLite's log (named `NAME`, its ids `ID`): migration 33 made it, migration 34 again.
EVENT_LOG_SQLITE = """CREATE TABLE {NAME} (
  id {ID},
  sk INTEGER NOT NULL,
  seq BIGINT NOT NULL,
  type TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  data TEXT NOT NULL,
  epoch BIGINT,
  UNIQUE (sk, seq)
)"""

# Migration 33, SQLite (between `_search_log.SEARCH_UNHOOK` and `SEARCH_REHOOK`: the search
# index's view and triggers read the tables and are made again over the new ones).
# `event_log` keeps the event ids (the index's rowids) and AUTOINCREMENT's high-water mark, so
# an id is never given twice.
SESSION_KEY_SQLITE = (
    """
ALTER TABLE sessions ADD COLUMN k INTEGER;
UPDATE sessions SET k = rowid;
CREATE UNIQUE INDEX sessions_k ON sessions (k);
CREATE TRIGGER sessions_k AFTER INSERT ON sessions WHEN new.k IS NULL BEGIN
  UPDATE sessions SET k = (SELECT COALESCE(MAX(k), 0) + 1 FROM sessions) WHERE rowid = new.rowid;
END;
"""
    + EVENT_LOG_SQLITE.format(NAME="event_log", ID="INTEGER PRIMARY KEY AUTOINCREMENT")
    + """;
INSERT INTO event_log (id, sk, seq, type, at_ms, data, epoch)
  SELECT e.id, s.k, e.seq, e.type, e.at_ms, e.data, e.epoch
  FROM events e LEFT JOIN sessions s ON s.id = e.session_id ORDER BY e.id;
UPDATE sqlite_sequence SET seq = MAX(seq, COALESCE(
  (SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)) WHERE name = 'event_log';
INSERT INTO sqlite_sequence (name, seq) SELECT 'event_log', seq FROM sqlite_sequence
  WHERE name = 'events' AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'event_log');
DROP TABLE events;
"""
    + EVENT_INDEXES
    + """;
"""
    + _MESSAGES.format(INT="INTEGER", WITHOUT=" WITHOUT ROWID")
    + ";"
    + _VIEWS.format(TX="", E_TX="")
)

# Migration 33, PostgreSQL (with `_admit_sql.KEYED_ADMIT` before it). `event_log` takes over
# the events' id sequence; the commit-order trigger (migration 11) is made again over the table
# (its rule unchanged: the session's previous event's `tx`).
SESSION_KEY_POSTGRES = (
    """
ALTER TABLE sessions ADD COLUMN k BIGINT GENERATED BY DEFAULT AS IDENTITY;
CREATE UNIQUE INDEX sessions_k ON sessions (k);
CREATE TABLE event_log (
  id BIGINT PRIMARY KEY,
  sk BIGINT NOT NULL,
  seq BIGINT NOT NULL,
  type TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  data TEXT NOT NULL,
  epoch BIGINT,
  tx xid8 NOT NULL DEFAULT '0',
  UNIQUE (sk, seq)
);
INSERT INTO event_log (id, sk, seq, type, at_ms, data, epoch, tx)
  SELECT e.id, s.k, e.seq, e.type, e.at_ms, e.data, e.epoch, e.tx
  FROM events e LEFT JOIN sessions s ON s.id = e.session_id;
ALTER SEQUENCE events_id_seq OWNED BY event_log.id;
ALTER TABLE event_log ALTER COLUMN id SET DEFAULT nextval('events_id_seq');
DROP TABLE events;
CREATE INDEX events_position ON event_log (tx, id);
"""
    + EVENT_INDEXES
    + """;
"""
    + _MESSAGES.format(INT="BIGINT", WITHOUT="")
    + ";"
    + _VIEWS.format(TX=", tx", E_TX=", e.tx")
    + """;
CREATE OR REPLACE FUNCTION wakeful_event_position() RETURNS trigger AS $$
BEGIN
  NEW.tx := greatest(pg_current_xact_id(), coalesce((SELECT e.tx FROM event_log e
    WHERE e.sk = NEW.sk ORDER BY e.seq DESC LIMIT 1), '0'::xid8));
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER events_position BEFORE INSERT ON event_log FOR EACH ROW
  EXECUTE FUNCTION wakeful_event_position()
"""
)  # (the trigger last: `statements` reads a CREATE TRIGGER up to an END, as SQLite's are)
