"""Numbered schema migrations for both backends, each applied once and recorded.

Invariant: a migration, once released, never changes; a new need is a new number. Each entry is
`(number, name, sqlite_sql, postgres_sql)`.
"""

from __future__ import annotations

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

MIGRATIONS: list[tuple[int, str, str, str]] = [
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
]

LATEST = MIGRATIONS[-1][0]


def statements(sql: str) -> list[str]:
    """Split a migration script into its statements (no semicolons inside our DDL)."""
    return [s.strip() for s in sql.split(";") if s.strip()]
