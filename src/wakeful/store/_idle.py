"""Sessions whose provider prompt cache is about to expire (`[compaction] before_cache_expiry`).

A session is *idle since its last turn* when its status is `idle` (its newest turn completed or
was interrupted), it has no pending input and no live claim, and nothing compacted it after that
turn ended. Its cache was last refreshed by the turn's final request, which ended at about the
turn's `turn.ended`: the cache is estimated to expire `ttl_ms` after that. The turn is *long*
when the newest request usage recorded before its end carried at least `min_tokens` input
tokens. The result names each such session with the `seq` of that `turn.ended`, so an
admission keyed on it happens once per idle period whichever process asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._listing import LIST_SLACK_MS
from ._typed_events import typed, types_in

if TYPE_CHECKING:
    from ._backend import Backend, Tx

# A compaction recorded after the turn ended (whichever way it went) settles the idle period.
SETTLING_TYPES = ("compaction.ended", "compaction.tail", "compaction.skipped", "compaction.failed")


class IdleMixin:
    """The idle-session scan (`SqlStore.claims`)."""

    backend: Backend

    def idle_locations(self, since_ms: int) -> list[str | None]:
        """The locations (None: sessions recorded without one) of the unarchived idle sessions
        active since `since_ms`: where `cache_expiring` may find something (each location's
        configuration decides whether and how it is scanned)."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT DISTINCT location FROM sessions WHERE listed_ms >= ? "
                "AND status = 'idle' AND archived_ms IS NULL",
                (since_ms - LIST_SLACK_MS,),
            )
        return sorted((r[0] for r in rows), key=lambda loc: (loc is not None, loc or ""))

    def cache_expiring(
        self,
        now_ms: int,
        ttl_ms: int,
        margin_ms: int,
        min_tokens: int,
        limit: int = 100,
        *,
        locations: Sequence[str | None] | None = None,
    ) -> list[tuple[str, int]]:
        """Sessions idle since their last turn (module docstring), long, whose cache expires
        within `margin_ms` from `now_ms` and has not expired yet: (session id, the seq of the
        last turn's `turn.ended`), oldest first, at most `limit`. `locations`: only sessions at
        one of them (None in it: those without a location); default every session."""
        out: list[tuple[str, int]] = []
        where, params = _location_filter(locations)
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(  # last active within the cache lifetime: the listing index bounds it
                "SELECT s.id FROM sessions s "
                "LEFT JOIN claims c ON c.session_id = s.id AND c.released = 0 "
                "WHERE s.listed_ms >= ? AND s.status = 'idle' AND s.archived_ms IS NULL "
                f"AND c.session_id IS NULL{where} "
                "AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.session_id = s.id "
                "AND i.status = 'pending') ORDER BY s.listed_ms, s.id",
                (now_ms - ttl_ms - LIST_SLACK_MS, *params),
            )
            for (sid,) in rows:
                seq = _expiring(tx, sid, now_ms, ttl_ms, margin_ms, min_tokens)
                if seq is not None:
                    out.append((sid, seq))
                    if len(out) >= limit:
                        break
        return out


def _location_filter(locations: Sequence[str | None] | None) -> tuple[str, list[str]]:
    """`cache_expiring`'s condition on the session's location, and its parameters."""
    if locations is None:
        return "", []
    named = [loc for loc in locations if loc is not None]
    parts = [f"s.location IN ({', '.join('?' for _ in named)})"] if named else []
    parts += ["s.location IS NULL"] if None in locations else []
    return f" AND ({' OR '.join(parts) or '1 = 0'})", named


def _expiring(
    tx: Tx, sid: str, now_ms: int, ttl_ms: int, margin_ms: int, min_tokens: int
) -> int | None:
    """The seq of `sid`'s last `turn.ended` when its cache expires within the margin, nothing
    settled the session since, and that turn's last request read at least `min_tokens`."""
    from ..events import UsageRecorded, load_event

    ended = tx.one(
        "SELECT seq, at_ms FROM events WHERE session_id = ? AND type = 'turn.ended' "
        f"AND {typed()} ORDER BY seq DESC LIMIT 1",
        (sid,),
    )
    if ended is None:
        return None
    seq, at_ms = int(ended[0]), int(ended[1])
    if not at_ms + ttl_ms - margin_ms <= now_ms < at_ms + ttl_ms:
        return None
    settled = tx.one(
        f"SELECT 1 FROM events WHERE session_id = ? AND seq > ? AND {types_in(SETTLING_TYPES)} "
        "LIMIT 1",
        (sid, seq, *SETTLING_TYPES),
    )
    if settled is not None:
        return None
    usage = tx.one(
        "SELECT data FROM events WHERE session_id = ? AND seq < ? "
        f"AND type = 'usage.recorded' AND {typed()} ORDER BY seq DESC LIMIT 1",
        (sid, seq),
    )
    event = None if usage is None else load_event(usage[0])
    ok = isinstance(event, UsageRecorded) and event.input_tokens >= min_tokens
    return seq if ok else None
