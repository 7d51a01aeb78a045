"""Waiting out transient store faults: a database locked by another writer, a lost connection,
a full disk.

A retryable `StoreError` (`StoreBusyError`, `StoreUnavailableError`, `StoreFullError`) committed
nothing, so the caller may simply try again later. (A PostgreSQL connection lost during the
COMMIT itself is resolved by the backend, which asks the server whether it committed; when it
cannot tell, `CommitUnknownError` is raised, which is not retryable.) `Outage` paces those retries with a bounded exponential
backoff and logs an outage twice, not once per failed call: when it begins and when it ends.
"""

from __future__ import annotations

import logging
import time

from ..errors import StoreError

MIN_DELAY_S = 0.05
MAX_DELAY_S = 5.0


def is_transient(err: BaseException) -> bool:
    """Whether `err` is a store fault that waiting may cure (see the module docstring)."""
    return isinstance(err, StoreError) and err.retryable


class Outage:
    """The state of one caller's store outage: since when, and the next backoff delay."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self._log = log
        self._what = what
        self._since: float | None = None
        self._faults = 0
        self._delay = MIN_DELAY_S

    @property
    def ongoing(self) -> bool:
        """Whether the last store call failed with a transient fault."""
        return self._since is not None

    def failed(self, err: BaseException) -> float:
        """Record a transient fault; return how many seconds to wait before trying again
        (doubling from `MIN_DELAY_S` up to `MAX_DELAY_S`). Logs the first fault only."""
        if self._since is None:
            self._since = time.monotonic()
            self._delay = MIN_DELAY_S
            self._log.warning(
                "store fault %s, waiting it out (retrying at most %.0fs apart): %s: %s",
                self._what,
                MAX_DELAY_S,
                type(err).__name__,
                err,
            )
        else:
            self._delay = min(self._delay * 2, MAX_DELAY_S)
        self._faults += 1
        return self._delay

    def ok(self) -> None:
        """Record a store call that succeeded; logs the end of an outage."""
        if self._since is None:
            return
        self._log.warning(
            "store works again %s after %.1fs (%d failed calls)",
            self._what,
            time.monotonic() - self._since,
            self._faults,
        )
        self._since = None
        self._faults = 0
