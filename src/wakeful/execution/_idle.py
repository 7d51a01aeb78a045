"""Compaction before the provider's prompt cache expires (`[compaction] before_cache_expiry`).

A provider keeps a conversation in its prompt cache for a few minutes after the last request.
A long session left idle would, on its next turn, pay to read its whole history again, and
then likely compact it anyway. With `before_cache_expiry` on, the loop that fires schedules (in
every worker and in `wakeful serve`) also looks, every `IDLE_SCAN_S`, for sessions idle since
their last turn whose cache is estimated to expire within `expiry_margin_s`
(`SqlStore.cache_expiring`: `cache_ttl_s` after that turn ended, its last request at least
`long_request_size`), and admits an idle compaction to each: a queued control item
(`kind="compaction"`, payload ``{"reason": "idle"}``) under an input id derived from the turn's
end, so any number of processes admit it once. A driver then claims and runs it like any other
input, never beside a live one; the runner skips it (`not-needed`) when a reply came after it
or the session is not long after all (`runner/_compaction.py`).
"""

from __future__ import annotations

import logging

from pydantic import JsonValue

from ..config import CompactionConfig
from ..errors import NotFoundError
from ..runner import IDLE_REASON
from ..store import SqlStore

log = logging.getLogger("wakeful.compaction")

IDLE_SCAN_S = 10.0  # how often the schedule loop looks for idle sessions (well inside a margin)


def idle_input_id(ended_seq: int) -> str:
    """The input id of the idle compaction for the idle period after `turn.ended` at
    `ended_seq` (one per period, whoever admits it)."""
    return f"in_idle_{ended_seq}"


def admit_idle_compactions(
    store: SqlStore, config: CompactionConfig, now_ms: int | None = None
) -> list[str]:
    """Admit an idle compaction to every session whose cache is about to expire (module
    docstring); return the sessions this call admitted one to. Nothing when the setting is off
    or the strategy is `tail` (which makes no model call: nothing to gain from the cache)."""
    if not config.before_cache_expiry or config.strategy == "tail":
        return []
    now = store.clock.now_ms() if now_ms is None else now_ms
    found = store.cache_expiring(
        now, config.cache_ttl_s * 1000, config.expiry_margin_s * 1000, config.long_request_size
    )
    admitted: list[str] = []
    for sid, ended_seq in found:
        payload: dict[str, JsonValue] = {"reason": IDLE_REASON}
        try:
            adm = store.admit(sid, idle_input_id(ended_seq), "compaction", payload, "queue")
        except NotFoundError:  # deleted since the scan
            continue
        if adm.created:
            log.info("session %s: idle, its cache expires soon: compaction admitted", sid)
            admitted.append(sid)
    return admitted
