"""Compaction before the provider's prompt cache expires (`[compaction] before_cache_expiry`).

A provider keeps a conversation in its prompt cache for a few minutes after the last request.
A long session left idle would, on its next turn, pay to read its whole history again, and
then likely compact it anyway. With `before_cache_expiry` on (in the configuration of the
session's own location, as its drains read it: `docs/locations.md`), the loop that fires
schedules (in every worker and in `wakeful serve`) also looks, every `IDLE_SCAN_S`, for
sessions idle since their last turn whose cache is estimated to expire within `expiry_margin_s`
(`LocalStore.claims.cache_expiring`: `cache_ttl_s` after that turn ended, its last request at least
`long_request_size`), and admits an idle compaction to each: a queued control item
(`kind="compaction"`, payload ``{"reason": "idle"}``) under an input id derived from the turn's
end, so any number of processes admit it once. A driver then claims and runs it like any other
input, never beside a live one; the runner skips it (`not-needed`) when a reply came after it
or the session is not long after all (`runner/_compaction.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydantic import JsonValue

from ..config import DAY_MS, CompactionConfig
from ..errors import NotFoundError, UsageError
from ..runner import IDLE_REASON
from ..store import LocalStore

log = logging.getLogger("wakeful.compaction")

IDLE_SCAN_S = 10.0  # how often the schedule loop looks for idle sessions (well inside a margin)
MAX_TTL_MS = DAY_MS  # the longest `cache_ttl_s` a configuration may set

# The `[compaction]` settings of the sessions at a location (None: no location).
Settings = Callable[[str | None], CompactionConfig | None]
_Window = tuple[int, int, int]  # cache_ttl_s, expiry_margin_s, long_request_size


def idle_input_id(ended_seq: int) -> str:
    """The input id of the idle compaction for the idle period after `turn.ended` at
    `ended_seq` (one per period, whoever admits it)."""
    return f"in_idle_{ended_seq}"


def admit_idle_compactions(
    store: LocalStore, settings: CompactionConfig | Settings, now_ms: int | None = None
) -> list[str]:
    """Admit an idle compaction to every session whose cache is about to expire (module
    docstring); return the sessions this call admitted one to. `settings`: the `[compaction]`
    settings of a session's location (`Runtime.compaction_at`: each session scanned under its
    own workspace's configuration; None or a `UsageError`, such as a location not served here:
    its sessions are left alone), or one configuration for every session. Nothing is admitted
    where the setting is off or the strategy is `tail` (which makes no model call: nothing to
    gain from the cache)."""
    now = store.clock.now_ms() if now_ms is None else now_ms
    scans: dict[_Window, list[str | None] | None] = {}
    if isinstance(settings, CompactionConfig):
        if _scanned(settings):
            scans[_window(settings)] = None  # every session
    else:
        scans.update(_scans(store, settings, now))
    admitted: list[str] = []
    for (ttl_s, margin_s, min_tokens), locations in scans.items():
        found = store.claims.cache_expiring(
            now, ttl_s * 1000, margin_s * 1000, min_tokens, locations=locations
        )
        admitted += _admit(store, found)
    return admitted


def _scanned(config: CompactionConfig) -> bool:
    return config.before_cache_expiry and config.strategy != "tail"


def _window(config: CompactionConfig) -> _Window:
    return config.cache_ttl_s, config.expiry_margin_s, config.long_request_size


def _scans(store: LocalStore, settings: Settings, now: int) -> dict[_Window, list[str | None]]:
    """The locations of idle sessions grouped by the window their configuration scans with
    (one scan per distinct window). The lookback is the longest `cache_ttl_s` allowed: a
    location's own lifetime is only known once its configuration is read."""
    scans: dict[_Window, list[str | None]] = {}
    for location in store.claims.idle_locations(now - MAX_TTL_MS):
        try:
            config = settings(location)
        except UsageError as err:  # not served here, gone, or a broken configuration
            log.debug("idle scan leaves %s alone: %s", location, err)
            continue
        if config is not None and _scanned(config):
            scans.setdefault(_window(config), []).append(location)
    return scans


def _admit(store: LocalStore, found: list[tuple[str, int]]) -> list[str]:
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
