"""The listing slack: how a session's indexed `listed_ms` follows its exact `updated_ms`, the one
rule every write of a session row and every listing read builds on (`_append`, `_retention`,
`_store`, `_idle`, and PostgreSQL's admission function in `_migrations`)."""

from __future__ import annotations

# How far a session's indexed `listed_ms` may trail its exact `updated_ms`: the listing indexes
# change at most once per this many milliseconds per session, every other update of the session
# row leaves them alone. Invariant: listed_ms <= updated_ms < listed_ms + LIST_SLACK_MS.
# PostgreSQL's admission function (migration 6, `_migrations/_v01.py`) is built from it: it is part of
# that migration and changes only with a new one.
LIST_SLACK_MS = 1000


def listed_ms_after(listed_ms: int, now_ms: int) -> int:
    """The session's `listed_ms` once its `updated_ms` becomes `now_ms` (which keeps the
    invariant above, also when a clock went backwards)."""
    if now_ms < listed_ms or now_ms - listed_ms >= LIST_SLACK_MS:
        return now_ms
    return listed_ms
