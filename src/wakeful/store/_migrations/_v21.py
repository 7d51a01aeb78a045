"""Migrations 21 on: the newest era, where the next migration is appended (its number one
above the last entry of `ERA`). A migration's SQL may live here or in the module of its concern
(as `_rates.RATE_BUCKETS` does), imported by name. Start `_v31.py` (and add it to the package's
`MIGRATIONS`) when this list reaches 30. Released entries never change."""

from __future__ import annotations

from .._access_sql import ACCESS_TABLES, DELETIONS_TABLE
from .._admit_sql import KEYED_ADMIT
from .._blob_keys import SEALED_REFS
from .._compact_ids import COMPACT_IDS_SQLITE
from .._event_ids import EVENT_IDS_SQLITE
from .._rates import RATE_BUCKETS
from .._search_log import SEARCH_FROM_LOG_SQLITE, SEARCH_REHOOK, SEARCH_UNHOOK
from .._session_key import (
    EVENT_INDEXES,
    EVENTS_VIEW_SQLITE,
    SESSION_KEY_POSTGRES,
    SESSION_KEY_SQLITE,
)
from .._typed_events import EVENTS_TYPE_LEAN
from .._usage_index import USAGE_AT
from ._statements import Migration

# Each text stored once (PostgreSQL; issue 36 item 5): `search_docs` kept the text it indexes,
# a second copy of the message's (373 bytes per message of the 398 of its JSON). The index needs
# only the `tsvector`, which the insert now computes (`wakeful_search_tsv`: the tokenizing rule
# of migration 7, in one place); a hit's snippet is cut from the message in the log. Rows written
# before keep their tsvector; their text is dropped (PostgreSQL reclaims the bytes as the table's
# pages are rewritten: VACUUM FULL for at once).
_SEARCH_TEXT_ONCE_POSTGRES = """
CREATE FUNCTION wakeful_search_tsv(body TEXT) RETURNS tsvector LANGUAGE sql IMMUTABLE
PARALLEL SAFE AS $$ SELECT to_tsvector('simple',
  translate(body, '!"#$%&''()*+,-./:;<=>?@[\\]^_`{|}~', repeat(' ', 32))) $$;
ALTER TABLE search_docs ALTER COLUMN tsv DROP EXPRESSION;
ALTER TABLE search_docs DROP COLUMN body
"""

# An encrypted store (docs/encryption.md): its id (its keyring names it), its state (`on`, or
# `encrypting` while `wakeful store encrypt` runs) and the last session that command sealed.
_ENCRYPTION = """CREATE TABLE encryption (id INTEGER PRIMARY KEY CHECK (id = 1),
  store_id TEXT NOT NULL, state TEXT NOT NULL, after_id TEXT)"""

_SEARCH_SETTING_POSTGRES = """
CREATE TABLE search_indexed (upto BIGINT NOT NULL);
INSERT INTO search_indexed (upto) VALUES (0)
"""

# SQLite's inbox keyed by its primary key alone (issue 36): as a rowid table its key
# `(session_id, input_id)` was a second b-tree beside the rows, two pages of every admission
# (1.04 + 1.29 of its 7.98; docs/store.md, "WAL pages per commit"). WITHOUT ROWID, the rows are
# that key's b-tree. Nothing reads an inbox row's rowid. Between `SEARCH_UNHOOK` and
# `SEARCH_REHOOK`: the search index's view and triggers read the inbox (a rename checks them).
_INBOX_KEYED_SQLITE = f"""
{SEARCH_UNHOOK};
CREATE TABLE inbox_keyed (
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
) WITHOUT ROWID;
INSERT INTO inbox_keyed (session_id, input_id, seq, kind, delivery, digest, status,
  settled_seq, message_id)
  SELECT session_id, input_id, seq, kind, delivery, digest, status, settled_seq, message_id
  FROM inbox;
DROP TABLE inbox;
ALTER TABLE inbox_keyed RENAME TO inbox;
CREATE INDEX inbox_pending ON inbox (session_id, seq) WHERE status = 'pending';
CREATE INDEX inbox_settled ON inbox (session_id, settled_seq) WHERE settled_seq IS NOT NULL;
{SEARCH_REHOOK}
"""

ERA: list[Migration] = [
    # The indexed text not kept beside its index on PostgreSQL (`_SEARCH_TEXT_ONCE_POSTGRES`).
    (21, "search_text_once", "", _SEARCH_TEXT_ONCE_POSTGRES),
    (22, "rate_buckets", RATE_BUCKETS, RATE_BUCKETS),  # shared rate limits (`_rates.py`)
    (23, "encryption", _ENCRYPTION, _ENCRYPTION),  # an encrypted store's id and state
    (24, "usage_by_time", USAGE_AT, USAGE_AT),  # a day's usage: per-day budgets (`_usage.py`)
    (25, "search_from_log", SEARCH_FROM_LOG_SQLITE, ""),  # SQLite: the index reads the log
    (26, "access", ACCESS_TABLES, ACCESS_TABLES),  # users, tokens, owners, shares (`_access_sql`)
    # `events_type` without the messages (`_typed_events`: every typed lookup repeats its rule).
    (27, "events_type_lean", EVENTS_TYPE_LEAN, EVENTS_TYPE_LEAN),
    (28, "session_deletions", DELETIONS_TABLE, DELETIONS_TABLE),  # who deleted what (`_access`)
    (29, "sealed_refs", SEALED_REFS, SEALED_REFS),  # blob keys per session (`_blob_keys.py`)
    # No statement: `message.added` bodies are written lean from here on (`events/_codec.py`),
    # which code of migration 29 and before cannot read; the number makes it refuse the store
    # (a newer schema) instead of failing on the first lean row. Rows written before stay.
    (30, "lean_message_bodies", "", ""),
    # No statement: a `message.added` body leaves out its message's default `"aborted":false`
    # from here on (`events/_codec.py`); code of migration 30 reads such a body's message
    # without `aborted` in the plain transcript read, so the number makes it refuse the store.
    (31, "lean_message_aborted", "", ""),
    # A store can run without its full-text index (`_search.set_search`, docs/search.md):
    # `search_indexed` having its row is "on", on both backends. SQLite has had the table
    # since migration 20 (its triggers read the row, and index nothing without it);
    # PostgreSQL gets it here, on. The number makes older code, which would search a store
    # without its index and find nothing, refuse it.
    (32, "search_setting", "", _SEARCH_SETTING_POSTGRES),
    # An integer session key in the log and the transcript projection (`_session_key`).
    (
        33,
        "session_key",
        f"{SEARCH_UNHOOK};{SESSION_KEY_SQLITE};{SEARCH_REHOOK}",
        f"{KEYED_ADMIT};{SESSION_KEY_POSTGRES}",
    ),
    # SQLite: event ids without AUTOINCREMENT's counter, a WAL page less per commit
    # (`_event_ids`). PostgreSQL's ids come from a sequence, which writes no page per commit.
    (
        34,
        "event_ids",
        f"{SEARCH_UNHOOK};{EVENT_IDS_SQLITE};{EVENT_INDEXES};{EVENTS_VIEW_SQLITE};{SEARCH_REHOOK}",
        "",
    ),
    # SQLite's `message_log` holds a minted message or turn id as the bytes of its hex digits
    # (`_compact_ids`); its view gives back the text. Code of migration 34 would read those
    # bytes as ids, so the number makes it refuse the store. PostgreSQL: no statement.
    (35, "compact_message_ids", COMPACT_IDS_SQLITE, ""),
    # SQLite's inbox WITHOUT ROWID (`_INBOX_KEYED_SQLITE`): a WAL page less per admission.
    # PostgreSQL: no statement (its heap and key are two structures either way).
    (36, "inbox_keyed", _INBOX_KEYED_SQLITE, ""),
    # No statement: on SQLite a session's `last_seq` and `updated_ms` are its log's newest
    # event's from here on (`_records.last_seq_sql`), and an append leaves the row's columns
    # as they were; code of migration 36 would read them stale, so the number makes it refuse
    # the store. PostgreSQL still sets them at every append.
    (37, "session_head_from_log", "", ""),
]
