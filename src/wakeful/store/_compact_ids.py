"""How SQLite's transcript projection stores a message's id and turn id (migration 35, issue 36
item 5). A leaf module: the migrations import it, and so do the writers.

Invariant: in SQLite's `message_log`, an id of the shape wakeful mints for its column (the
column's prefix, `msg_` or `turn_`, then an even number of lowercase hex digits) is stored as
the bytes those digits spell, any other id as its text; the view `messages` gives every row's
id back as the text it was given (`prefix || lower(hex(bytes))`), so every read of the view,
and every lookup by id through it, sees the ids as before. A statement that names a
`message_log` row by its id binds `stored_message_id(tx.kind, id)`, and an insert binds both
ids so. PostgreSQL stores the text (its columns are `TEXT`; the bytes per message it is held to
are SQLite's). A minted message id is 36 characters and 16 bytes so: 20 of the 65 bytes a
message's row took (docs/store.md, "Bytes per message").
"""

from __future__ import annotations

import re

_MESSAGE = "msg_"
_TURN = "turn_"
_HEX = re.compile(r"(?:[0-9a-f]{2})+")


def _stored(kind: str, prefix: str, value: str | None) -> str | bytes | None:
    """`value` as `message_log` holds it on a backend of `kind`."""
    if kind != "sqlite" or value is None or not value.startswith(prefix):
        return value
    digits = value[len(prefix) :]
    return bytes.fromhex(digits) if _HEX.fullmatch(digits) else value


def stored_message_id(kind: str, message_id: str) -> str | bytes:
    """The value `message_log.message_id` holds for `message_id` on a backend of `kind` (a
    `Tx.kind`): the bytes of a minted id's hex digits on SQLite, else the id itself. The view
    `messages` gives back `message_id`."""
    stored = _stored(kind, _MESSAGE, message_id)
    assert stored is not None
    return stored


def stored_turn_id(kind: str, turn_id: str | None) -> str | bytes | None:
    """The value `message_log.turn_id` holds for `turn_id`, by the rule of `stored_message_id`."""
    return _stored(kind, _TURN, turn_id)


# The `message_log` rows of one session with one message id (bind the session's text id, then
# the message id): `... WHERE sk = SESSION_KEY AND BY_MESSAGE_ID`.
BY_MESSAGE_ID = "seq IN (SELECT seq FROM messages WHERE session_id = ? AND message_id = ?)"


def _text(column: str, prefix: str) -> str:
    """The SQL giving back the text of the id `column` holds (bytes or text)."""
    return f"CASE WHEN typeof({column}) = 'blob' THEN '{prefix}' || lower(hex({column})) ELSE {column} END"


# Migration 35, SQLite: the view reads ids of either form (rows written before keep their text).
COMPACT_IDS_SQLITE = f"""
DROP VIEW messages;
CREATE VIEW messages (session_id, seq, message_id, role, turn_id, reverted, body_seq, sk) AS
  SELECT s.id, m.seq, {_text("m.message_id", _MESSAGE)}, m.role, {_text("m.turn_id", _TURN)},
    m.reverted, m.body_seq, m.sk
  FROM message_log m JOIN sessions s ON s.k = m.sk
"""
