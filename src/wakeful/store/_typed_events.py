"""A session's events of some types, through `events_type`, which holds no message (migration
27, issue 36 item 5). A leaf module: the migrations import it, and so do the readers.

`events_type (session_id, type, seq)` answers the typed lookups (the newest compaction
boundary, a turn's approvals, the settling events after a turn's end, instruction deltas).
Most of a log is `message.added` rows, and no typed lookup asks for them (the transcript reads
messages by key, through `messages`): since migration 27 the index leaves them out, one entry
(63 bytes of 962 per appended message, `bench/bench_peer_store.py`) fewer per message.

A partial index serves a query only when the query repeats the index's condition: neither
SQLite nor PostgreSQL (for a parameter) proves that `type IN (?, ?)` excludes
`'message.added'`. So every typed lookup says its types through `types_in`, or adds `TYPED` to
a literal type, and the condition is written here once. A lookup that asks for
`message.added` (`SqlStore.events(types=...)` may) gets no such condition and reads the
session's events by their key instead, as every lookup did before migration 3.
`tests/store/test_typed_events.py` checks that every typed lookup the store makes plans
through the same index as it did with the full one.
"""

from __future__ import annotations

from collections.abc import Sequence

UNTYPED = "message.added"  # the one type the index leaves out (part of migration 27)


def typed(column: str = "type") -> str:
    """The index's condition on `column` (`type`, or an alias's `e.type`): what a lookup of a
    literal type other than `message.added` adds so that the index serves it."""
    return f"{column} <> '{UNTYPED}'"


def types_in(types: Sequence[str], column: str = "type") -> str:
    """The condition `column IN (?, ...)` for `types` (one `?` each, bound by the caller), with
    the index's condition when `message.added` is not among them."""
    marks = ", ".join("?" for _ in types)
    return f"{column} IN ({marks})" + ("" if UNTYPED in types else f" AND {typed(column)}")


# Migration 27, both backends: the index again, without the messages.
EVENTS_TYPE_LEAN = f"""
DROP INDEX events_type;
CREATE INDEX events_type ON events (session_id, type, seq) WHERE {typed()}
"""
