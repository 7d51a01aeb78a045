"""When a schedule fires: cron expressions (through `cronsim`), fixed intervals, one-shot times,
each in an IANA time zone. Pure: no store, no clock of its own.

Invariant: the next fire after a due time is a function of the schedule and that time only, so
every worker computes the same `next` for the same fire (the store's compare-and-set relies on
it). Intervals step from the due time (`due + period`), never from "now".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ..errors import UsageError
from ..store import ScheduleKind

MAX_COUNT = 100_000
"""Missed cron times are counted up to this many (a count past it reads as this)."""

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_INTERVAL = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name`; `UsageError` (one line) when it is unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(
            f"unknown time zone {name!r} (give an IANA name, e.g. Europe/Paris)"
        ) from None


def parse_interval(text: str) -> int:
    """A period in milliseconds from `30s`, `5m`, `2h`, `1d`, `500ms` or plain seconds."""
    found = _INTERVAL.match(text)
    if found is None:
        raise UsageError(f"bad interval {text!r} (e.g. 30s, 5m, 2h, 1d, 500ms)")
    period = int(found[1]) * _UNITS[found[2] or "s"]
    if period < 100:
        raise UsageError(f"interval {text!r} is shorter than 100 ms")
    return period


def parse_time(text: str, tz: str) -> int:
    """Epoch ms of an ISO time (`2026-05-01T09:00`, read in `tz` when it names no offset)."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"bad time {text!r} (give an ISO time, e.g. 2026-05-01T09:00)") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=zone(tz))
    return int(at.timestamp() * 1000)


def check_cron(expr: str, tz: str) -> None:
    """`UsageError` unless `expr` is a five-field cron expression `cronsim` accepts."""
    if len(expr.split()) != 5:
        raise UsageError(f"bad cron expression {expr!r}: it needs five fields (m h dom mon dow)")
    try:
        CronSim(expr, datetime.now(zone(tz)))
    except CronSimError as err:
        raise UsageError(f"bad cron expression {expr!r}: {err}") from None


@dataclass(frozen=True, slots=True)
class Timing:
    """A schedule's times: `kind` and its normalized `spec` (a cron expression, a period in
    ms, an epoch-ms time) in time zone `tz`."""

    kind: ScheduleKind
    spec: str
    tz: str = "UTC"

    @classmethod
    def parse(cls, kind: str, spec: str, tz: str = "UTC") -> Timing:
        """Check and normalize a user's spec (`UsageError`, one line, when it is bad)."""
        zone(tz)
        if kind == "cron":
            check_cron(spec, tz)
            return cls("cron", " ".join(spec.split()), tz)
        if kind == "interval":
            return cls("interval", str(parse_interval(spec)), tz)
        if kind == "once":
            return cls("once", str(parse_time(spec, tz)), tz)
        raise UsageError(f"unknown schedule kind {kind!r} (cron, interval or once)")

    def after(self, t_ms: int) -> int | None:
        """The first fire time strictly after `t_ms` (None: no more fires)."""
        if self.kind == "interval":
            return t_ms + int(self.spec)  # from a due time: every worker computes the same
        if self.kind == "once":
            at = int(self.spec)
            return at if at > t_ms else None
        start = datetime.fromtimestamp(t_ms / 1000, zone(self.tz))
        found: datetime = next(CronSim(self.spec, start))
        return int(found.timestamp() * 1000)

    def first(self, now_ms: int) -> int | None:
        """The first fire of a schedule added or resumed at `now_ms`: an interval's one period
        later, a cron's next match, a one-shot's time (None when it has passed)."""
        if self.kind == "interval":
            return now_ms + int(self.spec)
        return self.after(now_ms)

    def at_or_after(self, due_ms: int, t_ms: int) -> int | None:
        """The first fire time at or after `t_ms`, for a schedule whose times include `due_ms`
        (an interval keeps its phase)."""
        if self.kind == "interval":
            period = int(self.spec)
            steps = max(0, -(-(t_ms - due_ms) // period))
            return due_ms + steps * period
        return self.after(t_ms - 1)

    def count(self, due_ms: int, before_ms: int) -> int:
        """How many fire times lie in [`due_ms`, `before_ms`), `due_ms` being one of them."""
        if before_ms <= due_ms:
            return 0
        if self.kind == "interval":
            return -(-(before_ms - due_ms) // int(self.spec))
        if self.kind == "once":
            return 1
        n, t = 0, due_ms
        start = datetime.fromtimestamp(due_ms / 1000, zone(self.tz)) - timedelta(milliseconds=1)
        for found in CronSim(self.spec, start):
            t = int(found.timestamp() * 1000)
            if t >= before_ms or n >= MAX_COUNT:
                break
            n += 1
        return n

    def describe(self) -> str:
        """The spec as a person reads it (`every 30s`, `cron 0 9 * * 1-5`, an ISO time)."""
        if self.kind == "interval":
            return f"every {_period(int(self.spec))}"
        if self.kind == "once":
            return "at " + iso(int(self.spec), self.tz)
        return f"cron {self.spec}"


def iso(t_ms: int, tz: str = "UTC") -> str:
    """An epoch-ms time as ISO 8601 in `tz` (seconds precision)."""
    return datetime.fromtimestamp(t_ms / 1000, zone(tz) if tz != "UTC" else UTC).isoformat(
        timespec="seconds"
    )


def _period(ms: int) -> str:
    for unit in ("d", "h", "m", "s"):
        if ms % _UNITS[unit] == 0:
            return f"{ms // _UNITS[unit]}{unit}"
    return f"{ms}ms"
