"""Time, from one place: integer epoch milliseconds. Tests use `FakeClock` instead of sleeping."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Something that tells the time in epoch milliseconds."""

    def now_ms(self) -> int:
        """Return the current time as integer milliseconds since the epoch."""
        ...


class SystemClock:
    """The wall clock."""

    def now_ms(self) -> int:
        """Return `time.time()` in whole milliseconds."""
        return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that moves only when told to; for tests."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        """Return the fake current time."""
        return self._now

    def advance(self, ms: int) -> None:
        """Move the clock forward by `ms` milliseconds."""
        self._now += ms
