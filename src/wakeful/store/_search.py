"""Full-text search over session content: what is indexed, how a query reads, the backfill.

Invariant: `search_docs` holds, for every session, one row per transcript message with text (at
the message's `seq`) and one for the title (at seq 0), written in the same transaction as the
event that adds the message or sets the title: by the projections (`_projections.py`), and for
an input delivered by name (`inbox.delivered` v2) by the promotion that knows its message
(`_inbox.plan_promotion`). What a message contributes is `searchable_text`, and nothing else decides
it. System messages (instruction text, redacted for most readers) are never indexed.

The SQL that writes the index is the same on both backends; the query differs (SQLite FTS5 with
bm25, PostgreSQL `tsvector` with `ts_rank`), and both answer sessions ranked by their best
matching message. A hit's snippet is cut from the title or the message as the log holds it
(`_hit_text`); PostgreSQL's rows keep no text, only the `tsvector` (migration 21). On SQLite
(migration 25, `_search_log`) `search_docs` holds the titles only: the FTS5 index reads a
message's text from the log, kept in step with `messages` by triggers, so `index_message` writes
nothing there. New messages wait for their batch (`search_indexed.upto`) until a batch or a
search indexes them (`index_pending`), so a search still finds every committed message.

The index can be turned off (`set_search`): `search_indexed` without its row. Every write of
the index reads that row in its own statement (the inserts select from it, SQLite's triggers
compare with its `upto`), so without it nothing is indexed, in every process at once, and a
search raises `SearchOffError`. Turning it on again puts the row back and fills the index
from the log (SQLite: FTS5's `rebuild` over the log's text, as migration 25 did; the titles,
and on PostgreSQL the messages, by the backfill of migration 7).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import SearchOffError, UsageError
from ._backend import Backend, Tx
from ._cipher import opened
from ._records import SessionRow, session_cols, session_row, updated_ms_sql
from ._search_log import SEARCH_FLUSH, SEARCH_WAITING

if TYPE_CHECKING:
    from ..events import StoredEvent
    from ..messages import Message

    # What the search backfill reads a session's messages with (`transcript_in`).
    Transcript = Callable[[Tx, str], list[tuple[int, Message]]]
    # What a search reads a hit's message with: the transcript's message at a `seq`, if any.
    MessageAt = Callable[[Tx, str, int], Message | None]

# A message contributes at most this many characters (PostgreSQL refuses a tsvector over 1 MB).
MAX_INDEXED_CHARS = 100_000
TITLE_SEQ = 0  # the title's row in `search_docs`
SNIPPET_CHARS = 160
MAX_TERMS = 16
BACKFILL_BATCH = 200  # sessions indexed per transaction by the backfill

_WORD = re.compile(r"[^\W_]+\*?")  # letters and digits, as both indexes split words
# SQLite's FTS5 index takes the text from the row; PostgreSQL keeps only the `tsvector`
# (migration 21: the text is not stored twice). A row is written only while the index is on
# (`search_indexed` has its row, `SEARCH_ON`).
_INSERT = {
    "sqlite": "INSERT INTO search_docs (session_id, seq, body) SELECT ?, ?, ? FROM search_indexed",
    "postgres": (
        "INSERT INTO search_docs (session_id, seq, tsv) "
        "SELECT CAST(? AS TEXT), CAST(? AS BIGINT), wakeful_search_tsv(?) FROM search_indexed"
    ),
}
SEARCH_ON = "SELECT 1 FROM search_indexed"  # a row: the index is on
SEARCH_OFF_HINT = (
    "full-text search is off in this store: `wakeful store search on` turns it on "
    "(it indexes every session from the log)"
)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A session that matches, with its best matching message (`seq` 0: the title) and the
    text around the first matching word."""

    session: SessionRow
    seq: int
    snippet: str

    def to_json(self) -> dict[str, object]:
        """The hit as JSON: the session row plus `match` (seq and snippet)."""
        return self.session.to_json() | {"match": {"seq": self.seq, "snippet": self.snippet}}


@dataclass(frozen=True, slots=True)
class SearchPage:
    """Hits, best first; `next_offset` continues the search (None: no more)."""

    hits: list[SearchHit]
    next_offset: int | None


def searchable_text(message: Message) -> str:
    """The text a message contributes to the index ("" for none): text, tool calls (name and
    input), tool results and compaction summaries; never a system message."""
    from ..messages import (
        CompactSummaryBlock,
        TextBlock,
        ToolCallBlock,
        ToolResultBlock,
        tool_result_text,
    )

    if message.role == "system":
        return ""
    parts: list[str] = []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            parts.append(f"{block.name} {_values(block.input)}")
        elif isinstance(block, ToolResultBlock):
            parts.append(tool_result_text(block.output))
        elif isinstance(block, CompactSummaryBlock):
            parts.append(block.summary)
    return _clean("\n".join(p for p in parts if p))


def _values(value: object) -> str:
    """The leaf values of a tool input, space-separated (keys and JSON punctuation left out)."""
    if isinstance(value, dict):
        return " ".join(_values(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(_values(v) for v in value)
    return "" if value is None else str(value)


def _clean(text: str) -> str:
    return text.replace("\x00", "")[:MAX_INDEXED_CHARS].strip()


def index_message(tx: Tx, session_id: str, seq: int, message: Message) -> None:
    """Index one transcript message at its `seq` (nothing when it has no searchable text; on
    SQLite nothing at all: its `messages` row is the index's row, `_search_log`)."""
    body = indexed_body(tx, message)
    if body:
        tx.send(_INSERT[tx.kind], (session_id, seq, body))


def indexed_body(tx: Tx, message: Message) -> str:
    """What `index_message` writes to the index for `message` ("": nothing, as on SQLite,
    whose `messages` row is the index's row)."""
    if tx.kind == "sqlite":
        return ""
    body = searchable_text(message)
    if body and tx.cipher is not None:  # an encrypted store indexes keyed hashes of words
        body = tx.cipher.word_tokens(body)
    return body


def index_bodies(tx: Tx, session_id: str, rows: Sequence[tuple[int, str]]) -> None:
    """`index_message` of several messages, given as their `(seq, indexed_body)` (none
    empty), in one statement (PostgreSQL: SQLite indexes none)."""
    if not rows:
        return
    values = ", ".join(
        "(CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS TEXT))" if i == 0 else "(?, ?, ?)"
        for i in range(len(rows))
    )
    tx.send(
        "INSERT INTO search_docs (session_id, seq, tsv) SELECT v.s, v.q, wakeful_search_tsv(v.b) "
        f"FROM (VALUES {values}) AS v (s, q, b), search_indexed",
        tuple(v for seq, body in rows for v in (session_id, seq, body)),
    )


def unindex_messages(tx: Tx, session_id: str, rows: str, params: tuple[object, ...]) -> None:
    """Take the messages `SELECT seq FROM messages WHERE {rows}` (with `params`) out of the
    index, before their rows go (on SQLite their rows' delete does it: nothing to send)."""
    if tx.kind != "sqlite":
        tx.send(
            f"DELETE FROM search_docs WHERE session_id = ? AND seq IN "
            f"(SELECT seq FROM messages WHERE {rows})",
            (session_id, *params),
        )


def index_title(tx: Tx, session_id: str, title: str | None) -> None:
    """Make `title` the session's indexed title (replacing the previous one)."""
    tx.send("DELETE FROM search_docs WHERE session_id = ? AND seq = ?", (session_id, TITLE_SEQ))
    body = _clean(title or "")
    if body and tx.cipher is not None:
        body = tx.cipher.word_tokens(body)
    if body:
        tx.send(_INSERT[tx.kind], (session_id, TITLE_SEQ, body))


def index_deliveries(
    tx: Tx, session_id: str, stored: Iterable[StoredEvent], messages: dict[str, Message]
) -> None:
    """Index the messages that version-2 deliveries name (their events do not carry them)."""
    for ev in stored:
        message_id = getattr(ev.event, "message_id", None)
        if ev.event.type == "inbox.delivered" and message_id in messages:
            index_message(tx, session_id, ev.seq, messages[message_id])


# -- queries ------------------------------------------------------------------------------------


def terms(text: str) -> list[str]:
    """The words of a query, lowercased; a trailing `*` asks for a prefix. `UsageError` when
    the text has no word at all."""
    found = [w.lower() for w in _WORD.findall(text)][:MAX_TERMS]
    if not found:
        raise UsageError("search needs at least one word (letters or digits)")
    return found


def _match(kind: str, words: Sequence[str]) -> str:
    """The backend's query string for `words` (all must occur in one message)."""
    if kind == "postgres":
        return " & ".join(w[:-1] + ":*" if w.endswith("*") else w for w in words)
    return " ".join(f'"{w[:-1]}"*' if w.endswith("*") else f'"{w}"' for w in words)


# Each matching message, then the best one per session (lower score is better), then sessions.
# PostgreSQL reads each hit's session row by key (a LATERAL subquery that OFFSET 0 keeps from
# being flattened): with a join it may hash the whole sessions table once its estimate of a rare
# word's hits grows with the index (61 ms instead of 0.6 on 100,000 sessions, bench_search.py).
_BEST = {
    "sqlite": (  # (a message's entry is at its event's id, a title's at its row's, negated)
        "SELECT COALESCE(es.id, d.session_id) AS sid, "
        f"CASE WHEN f.rowid < 0 THEN {TITLE_SEQ} ELSE e.seq END AS seq, MIN(f.rank) AS score "
        "FROM search_fts f LEFT JOIN event_log e ON f.rowid > 0 AND e.id = f.rowid "
        "LEFT JOIN sessions es ON es.k = e.sk "
        "LEFT JOIN search_docs d ON f.rowid < 0 AND d.id = -f.rowid "
        "WHERE search_fts MATCH ? GROUP BY sid"
    ),
    "postgres": (
        "SELECT DISTINCT ON (d.session_id) d.session_id AS sid, d.seq AS seq, "
        "-ts_rank(d.tsv, q.q) AS score FROM search_docs d, to_tsquery('simple', ?) AS q(q) "
        "WHERE d.tsv @@ q.q ORDER BY d.session_id, score, d.seq"
    ),
}
_SESSION = {
    "sqlite": "JOIN sessions s ON s.id = b.sid",
    "postgres": "CROSS JOIN LATERAL (SELECT * FROM sessions WHERE sessions.id = b.sid OFFSET 0) s",
}


def index_pending(backend: Backend) -> None:
    """Index the messages still waiting for their batch (SQLite, migrations 20 and 22), so a
    search that follows finds every committed message. A read first: when nothing waits,
    nothing is locked or written. Nothing on PostgreSQL (each row is indexed as it is written)
    nor on a read-only store (it cannot write: it searches what its writers indexed, all but at
    most a batch of their newest rows)."""
    if backend.kind != "sqlite" or getattr(backend, "read_only", False):
        return
    with backend.transaction(write=False) as tx:
        if tx.one(SEARCH_WAITING) is None:
            return
    with backend.transaction(write=True) as tx:
        for statement in SEARCH_FLUSH:
            tx.run(statement)


def search_in(
    tx: Tx,
    kind: str,
    text: str,
    *,
    roots_only: bool,
    archived: bool | None,
    limit: int,
    offset: int,
    message_at: MessageAt,
) -> SearchPage:
    """Sessions whose content matches every word of `text`, best first (then newest); each
    hit's snippet is cut from its message as `message_at` reads it from the log."""

    if limit < 1 or offset < 0:
        raise UsageError("limit must be at least 1 and offset not negative")
    words = terms(text)
    where = ["1 = 1"]
    if roots_only:
        where.append("s.parent_id IS NULL")
    if archived is not None:
        where.append("s.archived_ms IS NOT NULL" if archived else "s.archived_ms IS NULL")
    rows = tx.all(
        f"SELECT {session_cols(tx.kind, 's')}, b.seq FROM ({_BEST[kind]}) b {_SESSION[kind]} "
        f"WHERE {' AND '.join(where)} "
        f"ORDER BY b.score, {updated_ms_sql(tx.kind, 's')} DESC, s.id DESC "
        "LIMIT ? OFFSET ?",
        (_match(kind, _hashed(tx, words)), limit + 1, offset),
    )
    # Read after the index, as every writer reads `search_indexed` after `search_docs`: the
    # order `set_search` takes their locks in on PostgreSQL (a read holds its lock too).
    if tx.one(SEARCH_ON) is None:
        raise SearchOffError(SEARCH_OFF_HINT)
    hits = []
    for r in rows[:limit]:
        session, seq = session_row(r[:-1]), int(r[-1])
        text = _hit_text(tx, session, seq, message_at)
        hits.append(SearchHit(session, seq, snippet(text, words)))
    return SearchPage(hits, offset + limit if len(rows) > limit else None)


def _hashed(tx: Tx, words: list[str]) -> list[str]:
    """The words as the index holds them: themselves, or in an encrypted store their keyed
    hashes (exact words only: a hash keeps no prefix)."""
    if tx.cipher is None:
        return words
    if any(w.endswith("*") for w in words):
        raise UsageError("this store is encrypted: search takes whole words, not prefixes (word*)")
    return [tx.cipher.token(w) for w in words]


def _hit_text(tx: Tx, session: SessionRow, seq: int, message_at: MessageAt) -> str:
    """The text a hit matched, read from where it is stored once: the session's title, or the
    message at `seq` in the log ("" for a message no longer in the transcript: one whose
    revert is pending, still indexed until the revert is final)."""
    if seq == TITLE_SEQ:
        return _clean(session.title or "")
    message = message_at(tx, session.id, seq)
    return "" if message is None else searchable_text(message)


def snippet(body: str, words: Sequence[str], width: int = SNIPPET_CHARS) -> str:
    """The part of `body` around the first occurrence of one of `words`, whitespace folded,
    cut at spaces."""
    flat = " ".join(body.split())
    lowered = flat.lower()
    found = [i for w in words if (i := lowered.find(w.rstrip("*"))) >= 0]
    start = max(0, min(found, default=0) - width // 3)
    if start > 0:
        space = flat.find(" ", start, start + 20)
        start = space + 1 if space >= 0 else start
    end = start + width
    if end < len(flat):
        space = flat.rfind(" ", end - 20, end)
        end = space if space > start else end
    return ("…" if start > 0 else "") + flat[start:end] + ("…" if end < len(flat) else "")


# -- the backfill of sessions written before the index existed ----------------------------------


def backfill(backend: Backend, transcript: Transcript) -> None:
    """Index the sessions written before migration 7, a batch of sessions per transaction.

    `search_backfill` holds the last session id done; its row goes when every session is
    indexed. A session's messages already in the index (written after the migration) are left
    alone, and the session row is locked while it is read, so nothing is indexed twice, also
    with several processes opening the store at once. Resumes where a crash stopped it. Once it
    is done, an open only reads (no write transaction: a read-only or busy store still opens).
    """
    with backend.transaction(write=False) as tx:
        if tx.one("SELECT 1 FROM search_backfill") is None:
            return
    while True:
        with backend.transaction(write=True) as tx:
            marker = tx.one(f"SELECT after_id FROM search_backfill{tx.row_lock()}")
            if marker is None:
                return
            batch = [
                r[0]
                for r in tx.all(
                    "SELECT id FROM sessions WHERE id > ? ORDER BY id LIMIT ?",
                    (marker[0], BACKFILL_BATCH),
                )
            ]
            for sid in batch:
                _backfill_session(tx, sid, transcript)
            if batch:
                tx.run("UPDATE search_backfill SET after_id = ?", (batch[-1],))
            else:
                tx.run("DELETE FROM search_backfill")


def _backfill_session(tx: Tx, session_id: str, transcript: Transcript) -> None:
    row = tx.lock_session(session_id)
    if row is None:
        return
    done = {
        int(r[0]) for r in tx.all("SELECT seq FROM search_docs WHERE session_id = ?", (session_id,))
    }
    if TITLE_SEQ not in done:
        title = tx.one("SELECT title FROM sessions WHERE id = ?", (session_id,))
        index_title(tx, session_id, opened(title[0]) if title and title[0] else None)
    if tx.kind == "sqlite":  # its messages' entries come from the log (`_search_log`)
        return
    for seq, message in transcript(tx, session_id):
        if seq not in done:
            index_message(tx, session_id, seq, message)


# -- the setting: a store with its index, or without ----------------------------------------------


def search_enabled(backend: Backend) -> bool:
    """Whether the store keeps its full-text index (`set_search`)."""
    with backend.transaction(write=False) as tx:
        return tx.one(SEARCH_ON) is not None


def set_search(backend: Backend, on: bool, transcript: Transcript) -> bool:
    """Turn the full-text index on or off for every process of the store; False when it
    already was so.

    Off: the row of `search_indexed` goes and every entry with it (`search_docs`; on SQLite
    FTS5's `delete-all` after the titles' triggers took theirs out), in one transaction.
    From its commit no write indexes anything: each reads the row in its own statement, and
    on PostgreSQL the change's `ACCESS EXCLUSIVE` lock on `search_indexed` first waits for
    every transaction that read it (an insert holds its lock until it commits). It takes
    `search_backfill`'s row, `search_docs` and `search_indexed` in that order, the order
    every transaction that touches them takes them in (the backfill, the projections'
    writes, a search), so none deadlocks with it.

    On: the row comes back (SQLite: at the log's newest event id, and FTS5 rebuilds every
    message's entry from the log in that transaction, as migration 25 did), then the
    backfill of migration 7 indexes the titles, and on PostgreSQL the messages, a batch of
    sessions per transaction, resumable, leaving alone what writers indexed meanwhile."""
    with backend.transaction(write=True) as tx:
        if not on:  # (a backfill's transaction takes this row before the index's tables)
            tx.run("DELETE FROM search_backfill")
        if tx.kind == "postgres":  # in the order every transaction takes them: no deadlock
            tables = "search_indexed" if on else "search_docs, search_indexed"
            tx.run(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE")
        if (tx.one(SEARCH_ON) is not None) == on:
            return False
        if not on:
            tx.run("DELETE FROM search_docs")
            if tx.kind == "sqlite":
                tx.run("INSERT INTO search_fts (search_fts) VALUES ('delete-all')")
            tx.run("DELETE FROM search_indexed")
            return True
        if tx.kind == "sqlite":
            tx.run("INSERT INTO search_indexed (upto) SELECT COALESCE(MAX(id), 0) FROM event_log")
            tx.run("INSERT INTO search_fts (search_fts) VALUES ('rebuild')")
        else:
            tx.run("INSERT INTO search_indexed (upto) VALUES (0)")
        tx.run("INSERT INTO search_backfill (after_id) VALUES ('')")
    backfill(backend, transcript)
    return True
