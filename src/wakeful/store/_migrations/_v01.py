"""Migrations 1 to 10: the first schema and what grew on it (search, locations, schedules,
rewind). Released: nothing here changes; a new need is a new number in the newest era module."""

from __future__ import annotations

from .._admit_sql import ADMIT_FUNCTION, ADMIT_FUNCTION_2
from ._statements import Migration

_TABLES = """
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  parent_id TEXT,
  root_id TEXT NOT NULL,
  forked_from TEXT,
  fork_seq BIGINT,
  title TEXT,
  agent TEXT,
  model TEXT,
  status TEXT NOT NULL DEFAULT 'idle',
  archived_ms BIGINT,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  last_seq BIGINT NOT NULL DEFAULT 0,
  input_tokens BIGINT NOT NULL DEFAULT 0,
  output_tokens BIGINT NOT NULL DEFAULT 0,
  cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
  metadata TEXT
);
CREATE INDEX sessions_list ON sessions (updated_ms DESC, id DESC);
CREATE INDEX sessions_roots ON sessions (updated_ms DESC, id DESC) WHERE parent_id IS NULL;
CREATE INDEX sessions_root ON sessions (root_id);
CREATE TABLE events (
  id {ID},
  session_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  type TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  data TEXT NOT NULL,
  UNIQUE (session_id, seq)
);
CREATE TABLE messages (
  session_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  message_id TEXT NOT NULL,
  role TEXT NOT NULL,
  turn_id TEXT,
  PRIMARY KEY (session_id, seq)
);
CREATE TABLE inbox (
  session_id TEXT NOT NULL,
  input_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  kind TEXT NOT NULL,
  delivery TEXT NOT NULL,
  digest TEXT NOT NULL,
  status TEXT NOT NULL,
  settled_seq BIGINT,
  message_id TEXT,
  PRIMARY KEY (session_id, input_id)
);
CREATE INDEX inbox_pending ON inbox (session_id, seq) WHERE status = 'pending';
CREATE TABLE tool_calls (
  session_id TEXT NOT NULL,
  message_id TEXT NOT NULL,
  call_id TEXT NOT NULL,
  name TEXT NOT NULL,
  status TEXT NOT NULL,
  started_seq BIGINT NOT NULL,
  ended_seq BIGINT,
  PRIMARY KEY (session_id, message_id, call_id)
);
CREATE TABLE turns (
  session_id TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  status TEXT NOT NULL,
  started_seq BIGINT NOT NULL,
  ended_seq BIGINT,
  error TEXT,
  PRIMARY KEY (session_id, turn_id)
);
CREATE TABLE receipts (
  session_id TEXT NOT NULL,
  receipt_id TEXT NOT NULL,
  turn_id TEXT,
  step BIGINT NOT NULL,
  attempt BIGINT NOT NULL,
  request_digest TEXT NOT NULL,
  seq BIGINT NOT NULL,
  PRIMARY KEY (session_id, receipt_id)
);
CREATE TABLE blobs (
  digest TEXT PRIMARY KEY,
  size BIGINT NOT NULL,
  data {BLOB} NOT NULL,
  created_ms BIGINT NOT NULL
);
CREATE TABLE blob_refs (
  session_id TEXT NOT NULL,
  digest TEXT NOT NULL,
  PRIMARY KEY (session_id, digest)
);
CREATE INDEX blob_refs_digest ON blob_refs (digest);
CREATE TABLE claims (
  session_id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  token TEXT NOT NULL,
  epoch BIGINT NOT NULL,
  lease_until_ms BIGINT NOT NULL,
  attempts BIGINT NOT NULL DEFAULT 0,
  released BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE retry_state (
  session_id TEXT PRIMARY KEY,
  turn_id TEXT,
  step BIGINT NOT NULL,
  attempt BIGINT NOT NULL,
  deadline_ms BIGINT NOT NULL,
  error_kind TEXT NOT NULL,
  error TEXT NOT NULL
);
CREATE TABLE work_state (
  session_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  value TEXT NOT NULL,
  seq BIGINT NOT NULL,
  PRIMARY KEY (session_id, kind)
);
CREATE TABLE instruction_state (
  session_id TEXT NOT NULL,
  source_key TEXT NOT NULL,
  digest TEXT NOT NULL,
  seq BIGINT NOT NULL,
  PRIMARY KEY (session_id, source_key)
);
"""

_INDEXES = """
CREATE INDEX inbox_settled ON inbox (session_id, settled_seq);
CREATE INDEX events_type ON events (session_id, type, seq)
"""

# An input's settled seq is NULL until it is delivered or rejected: index only the settled ones
# (the transcript's join asks for `settled_seq = m.seq`), so an admission adds no entry here.
# The listing indexes move from `updated_ms`, which every event changes, to `listed_ms`, which
# trails it by less than a second and changes at most once a second per session: the session row's
# other updates are then HOT on PostgreSQL (no new index entries) and touch no index page on SQLite.
# Listing stays exact by `updated_ms` (`_retention.list_page`).
_LEAN_WRITES = """
DROP INDEX inbox_settled;
CREATE INDEX inbox_settled ON inbox (session_id, settled_seq) WHERE settled_seq IS NOT NULL;
ALTER TABLE sessions ADD COLUMN listed_ms BIGINT NOT NULL DEFAULT 0;
UPDATE sessions SET listed_ms = updated_ms;
DROP INDEX sessions_list;
DROP INDEX sessions_roots;
CREATE INDEX sessions_list ON sessions (listed_ms DESC, id DESC);
CREATE INDEX sessions_roots ON sessions (listed_ms DESC, id DESC) WHERE parent_id IS NULL
"""

# Full-text search over session content (`_search.py`). `search_docs` holds the indexed text of
# each message (and the title at seq 0), written by the projections in the event's transaction
# with the same SQL on both backends. SQLite keeps an FTS5 index over it, in step through
# triggers; PostgreSQL a generated `tsvector` with a GIN index. Both tokenize alike: a word is a
# run of letters and digits (every other character separates), lowercased, no stemming, accents
# kept. PostgreSQL's parser would keep `notes.txt`, `a@b.com` or `3.14` whole, so its ASCII
# punctuation (in a `$$` string: it holds a semicolon) becomes spaces first, as unicode61 splits.
# `search_backfill` marks that sessions written before this migration still need indexing
# (`_search.backfill`, at open).
_SEARCH_SQLITE = """
CREATE TABLE search_docs (
  id INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX search_docs_session ON search_docs (session_id, seq);
CREATE VIRTUAL TABLE search_fts USING fts5(
  body, content = 'search_docs', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 0'
);
CREATE TRIGGER search_docs_added AFTER INSERT ON search_docs BEGIN
  INSERT INTO search_fts (rowid, body) VALUES (new.id, new.body);
END;
CREATE TRIGGER search_docs_removed AFTER DELETE ON search_docs BEGIN
  INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', old.id, old.body);
END;
CREATE TABLE search_backfill (after_id TEXT NOT NULL);
INSERT INTO search_backfill (after_id) VALUES ('')
"""

_SEARCH_POSTGRES = """
CREATE TABLE search_docs (
  id BIGSERIAL PRIMARY KEY,
  session_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  body TEXT NOT NULL,
  tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple',
    translate(body, $$!"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~$$, repeat(' ', 32)))) STORED
);
CREATE INDEX search_docs_session ON search_docs (session_id, seq);
CREATE INDEX search_docs_tsv ON search_docs USING GIN (tsv);
CREATE TABLE search_backfill (after_id TEXT NOT NULL);
INSERT INTO search_backfill (after_id) VALUES ('')
"""

# Where each session lives (`docs/locations.md`). The column is backfilled from the workspace
# the creating driver wrote into the metadata (`{JSON}` reads it: SQLite's `json_extract`,
# PostgreSQL's `->>`); a fork takes its origin's, a child its root's (a session without either
# keeps NULL: it runs where its driver is). `sessions_location` mirrors `sessions_roots` per
# location, so `--continue` reads the newest root of one location from the index alone;
# `sessions_parent` finds a session's children. `session_waits` notes the sessions that a
# worker left because it does not serve their location.
_LOCATIONS = """
ALTER TABLE sessions ADD COLUMN location TEXT;
UPDATE sessions SET location = {JSON} WHERE metadata LIKE '%"workspace"%';
UPDATE sessions SET location = (SELECT f.location FROM sessions f WHERE f.id = sessions.forked_from)
  WHERE location IS NULL AND forked_from IS NOT NULL;
UPDATE sessions SET location = (SELECT r.location FROM sessions r WHERE r.id = sessions.root_id)
  WHERE location IS NULL AND parent_id IS NOT NULL;
CREATE INDEX sessions_location ON sessions (location, listed_ms DESC, id DESC)
  WHERE parent_id IS NULL;
CREATE INDEX sessions_parent ON sessions (parent_id);
CREATE TABLE session_waits (
  session_id TEXT PRIMARY KEY,
  location TEXT NOT NULL,
  noted_ms BIGINT NOT NULL
)
"""

# Schedules and their fires (`store/_schedules.py`): the due index holds enabled schedules only.
_SCHEDULES = """
CREATE TABLE schedules (
  id TEXT PRIMARY KEY,
  name TEXT,
  kind TEXT NOT NULL,
  spec TEXT NOT NULL,
  timezone TEXT NOT NULL,
  prompt TEXT NOT NULL,
  session_id TEXT,
  template TEXT,
  delivery TEXT NOT NULL,
  missed TEXT NOT NULL,
  grace_ms BIGINT NOT NULL,
  enabled BIGINT NOT NULL DEFAULT 1,
  next_fire_ms BIGINT,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_fire_ms) WHERE enabled = 1;
CREATE TABLE schedule_fires (
  schedule_id TEXT NOT NULL,
  due_ms BIGINT NOT NULL,
  fired_ms BIGINT NOT NULL,
  outcome TEXT NOT NULL,
  session_id TEXT,
  input_id TEXT,
  missed BIGINT NOT NULL DEFAULT 0,
  error TEXT,
  PRIMARY KEY (schedule_id, due_ms)
)
"""

# Shaping a session after the fact (`docs/rewind.md`): `messages.reverted` names the pending
# revert hiding a message (NULL: visible), `messages.body_seq` the history edit holding its
# replaced body (NULL: its own event), `reverts` the session's pending revert; `artifacts`
# (upserted by session, kind and uri; `artifacts_uri` answers the reverse lookup, "which
# sessions produced this"); `extension_state` (one row per namespace and key).
_SHAPING = """
ALTER TABLE messages ADD COLUMN reverted BIGINT;
ALTER TABLE messages ADD COLUMN body_seq BIGINT;
CREATE INDEX messages_reverted ON messages (session_id) WHERE reverted IS NOT NULL;
CREATE TABLE reverts (
  session_id TEXT NOT NULL,
  revert_seq BIGINT NOT NULL,
  from_seq BIGINT NOT NULL,
  PRIMARY KEY (session_id, revert_seq)
);
CREATE TABLE artifacts (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  uri TEXT NOT NULL,
  label TEXT NOT NULL,
  meta TEXT,
  turn_id TEXT,
  created_seq BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  UNIQUE (session_id, kind, uri)
);
CREATE INDEX artifacts_uri ON artifacts (uri, kind);
CREATE INDEX artifacts_session ON artifacts (session_id, updated_ms);
CREATE TABLE extension_state (
  session_id TEXT NOT NULL,
  namespace TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (session_id, namespace, key)
)
"""

ERA: list[Migration] = [
    (
        1,
        "initial",
        _TABLES.format(ID="INTEGER PRIMARY KEY AUTOINCREMENT", BLOB="BLOB"),
        _TABLES.format(ID="BIGSERIAL PRIMARY KEY", BLOB="BYTEA"),
    ),
    (
        # The fencing epoch of the claim a fenced write was made under (NULL when unfenced):
        # in `seq` order a session's epochs never decrease, which the concurrency tests check.
        2,
        "event_epochs",
        "ALTER TABLE events ADD COLUMN epoch BIGINT",
        "ALTER TABLE events ADD COLUMN epoch BIGINT",
    ),
    (
        # Version-2 deliveries derive their message from the enqueued payload: the transcript
        # read joins a message row to its inbox item by the delivery's seq. Typed event lookups
        # (the newest compaction boundary, instruction deltas) stop scanning the whole log.
        3,
        "delivery_and_type_indexes",
        _INDEXES,
        _INDEXES,
    ),
    (
        # Workers look for orphaned claims on every poll: only held claims, by lease end.
        4,
        "held_claims_index",
        "CREATE INDEX claims_held ON claims (lease_until_ms) WHERE released = 0",
        "CREATE INDEX claims_held ON claims (lease_until_ms) WHERE released = 0",
    ),
    (
        # An admission in one round trip on PostgreSQL (`ADMIT_FUNCTION`); nothing on SQLite.
        5,
        "admit_function",
        "",
        ADMIT_FUNCTION,
    ),
    (
        # Fewer index writes per event and per admission (`_LEAN_WRITES`); admission in two
        # server statements (`ADMIT_FUNCTION_2`).
        6,
        "lean_writes",
        _LEAN_WRITES,
        _LEAN_WRITES + ";" + ADMIT_FUNCTION_2,
    ),
    (
        # Full-text search over session content (`_SEARCH_SQLITE`, `_SEARCH_POSTGRES`).
        7,
        "search_index",
        _SEARCH_SQLITE,
        _SEARCH_POSTGRES,
    ),
    (
        # Sessions record their location (`_LOCATIONS`).
        8,
        "locations",
        _LOCATIONS.replace("{JSON}", "json_extract(metadata, '$.workspace')"),
        _LOCATIONS.replace("{JSON}", "(metadata::json ->> 'workspace')"),
    ),
    (
        # Schedules and their fires (`_SCHEDULES`).
        9,
        "schedules",
        _SCHEDULES,
        _SCHEDULES,
    ),
    (
        # Rewind, artifacts and extension state (`_SHAPING`).
        10,
        "shaping",
        _SHAPING,
        _SHAPING,
    ),
]
