"""What a listing shows beside each session's row (`SessionSummary`), for a page of sessions
at once: a fixed number of indexed, grouped statements per 500 sessions, whatever their size,
and no message body read except each session's first prompt (as plain JSON, no model built:
listing stays a cold-start path, `docs/cli.md`).

Invariant: a user message counts while its delivery is in the transcript (a rewind or a
deleted turn takes it out of the count, as it takes it out of the transcript).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._backend import Tx, iter_chunks
from ._cipher import opened
from ._records import SessionSummary

FIRST_PROMPT_CHARS = 200  # of a first prompt's text, as a listing shows it

# Delivered user inputs whose delivery is still a visible transcript row.
_USER_ROWS = (
    "FROM inbox i JOIN messages m ON m.session_id = i.session_id AND m.seq = i.settled_seq "
    "WHERE i.session_id IN ({marks}) AND i.kind = 'user' AND i.status = 'delivered' "
    "AND m.reverted IS NULL"
)


def summaries_in(tx: Tx, session_ids: Sequence[str]) -> dict[str, SessionSummary]:
    """The `SessionSummary` of each of `session_ids` (unknown ones: all zero)."""
    out: dict[str, SessionSummary] = {}
    for chunk in iter_chunks(list(dict.fromkeys(session_ids)), 500):
        out.update(_summaries(tx, list(chunk)))
    return out


def _grouped(tx: Tx, sql: str, ids: list[str]) -> dict[str, int]:
    return {str(k): int(n) for k, n in tx.all(sql, ids)}


def _summaries(tx: Tx, ids: list[str]) -> dict[str, SessionSummary]:
    marks = ", ".join("?" for _ in ids)
    turns = _grouped(
        tx,
        f"SELECT session_id, count(*) FROM turns WHERE session_id IN ({marks}) GROUP BY session_id",
        ids,
    )
    children = _grouped(
        tx,
        f"SELECT root_id, count(*) FROM sessions WHERE root_id IN ({marks}) "
        "AND id <> root_id GROUP BY root_id",
        ids,
    )
    artifacts = _grouped(
        tx,
        f"SELECT session_id, count(*) FROM artifacts WHERE session_id IN "
        f"({marks}) GROUP BY session_id",
        ids,
    )
    users = tx.all(
        "SELECT i.session_id, count(*), min(i.settled_seq) "
        + _USER_ROWS.format(marks=marks)
        + " GROUP BY i.session_id",
        ids,
    )
    firsts = _first_prompts(tx, {str(sid): int(first) for sid, _n, first in users})
    counts = {str(sid): int(n) for sid, n, _first in users}
    return {
        sid: SessionSummary(
            turns=turns.get(sid, 0),
            child_sessions=children.get(sid, 0),
            user_messages=counts.get(sid, 0),
            artifacts=artifacts.get(sid, 0),
            first_prompt=firsts.get(sid),
        )
        for sid in ids
    }


def _first_prompts(tx: Tx, first_seq: dict[str, int]) -> dict[str, str]:
    """The text each session's first user input was sent with (its `inbox.enqueued` payload),
    by session, given the seq of that input's delivery."""
    if not first_seq:
        return {}
    where = " OR ".join("(i.session_id = ? AND i.settled_seq = ?)" for _ in first_seq)
    params = [x for sid, seq in first_seq.items() for x in (sid, seq)]
    rows = tx.all(
        "SELECT i.session_id, e.data FROM inbox i JOIN events e ON e.session_id = i.session_id "
        f"AND e.seq = i.seq WHERE {where}",
        params,
    )
    return {str(sid): _prompt_text(json.loads(opened(data)).get("payload")) for sid, data in rows}


def _prompt_text(payload: Any) -> str:
    """The text of a user input's payload: its `text`, or its text blocks joined, clipped."""
    text = payload.get("text") if isinstance(payload, dict) else None
    if not isinstance(text, str):
        blocks = payload.get("blocks") if isinstance(payload, dict) else None
        parts = [b.get("text") for b in blocks or () if isinstance(b, dict)]
        text = " ".join(p for p in parts if isinstance(p, str))
    text = " ".join(text.split())
    return text if len(text) <= FIRST_PROMPT_CHARS else text[: FIRST_PROMPT_CHARS - 1] + "…"
