"""Firing schedules: which fires are due, what each admits, and the loop every worker runs.

Every running worker calls `fire_due` (through `run_schedules`); each due fire goes to the store
as one compare-and-set transaction that also admits its input (`LocalStore.schedules.fire`), so
any number of workers take each fire exactly once. A fire found older than the schedule's
`grace_ms` was missed (everything was down): the schedule's policy `skip`s every missed time,
or fires `once` for them all (stamped with the first missed time); either way the schedule
then resumes at its first time within half the grace of now (so that fire is safely on time for
whichever worker takes it; the times before it count as missed). Admitted fires are driven like any input, by
whichever worker starts the session next.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pydantic import JsonValue

from ..config import CompactionConfig
from ..errors import NotFoundError, UsageError
from ..events import Delivery, SessionCreated
from ..store import (
    FireOutcome,
    FirePlan,
    LocalStore,
    MissedPolicy,
    Outage,
    Schedule,
    ScheduleFire,
    fire_input_id,
    fire_session_id,
    is_transient,
    new_schedule_id,
)
from ._idle import IDLE_SCAN_S, Settings, admit_idle_compactions
from ._off_loop import off_loop
from ._schedule_times import Timing, iso

log = logging.getLogger("wakeful.schedules")

MAX_WAIT_S = 1.0
"""A worker looks at the schedules at least this often (a schedule added elsewhere, a pause)."""


def new_schedule(
    store: LocalStore,
    prompt: str,
    timing: Timing,
    *,
    session_id: str | None,
    template: dict[str, JsonValue],
    name: str | None = None,
    missed: str = "skip",
    grace_ms: int = 60_000,
    delivery: str = "steer",
    schedule_id: str | None = None,
) -> Schedule:
    """Check and store a new schedule whose first fire is computed from now; `UsageError`
    (nothing stored) for an empty prompt, an unknown policy or delivery, a negative grace, a
    one-shot time already past; `NotFoundError` for an unknown target session."""
    if not prompt.strip():
        raise UsageError("a schedule needs a non-empty prompt")
    if missed not in ("skip", "once"):
        raise UsageError(f"missed-fire policy must be 'skip' or 'once', not {missed!r}")
    if delivery not in ("steer", "queue"):
        raise UsageError(f"delivery must be 'steer' or 'queue', not {delivery!r}")
    if grace_ms < 0:
        raise UsageError("the grace must not be negative")
    if session_id is not None and store.find_session(session_id) is None:
        raise NotFoundError(f"no session {session_id}")
    first = timing.first(store.clock.now_ms())
    if first is None:
        raise UsageError("that one-shot time is already past")
    policy: MissedPolicy = "once" if missed == "once" else "skip"
    mode: Delivery = "queue" if delivery == "queue" else "steer"
    return store.schedules.save(
        Schedule(
            id=schedule_id or new_schedule_id(),
            kind=timing.kind,
            spec=timing.spec,
            prompt=prompt,
            timezone=timing.tz,
            name=name,
            session_id=session_id,
            template=template,
            delivery=mode,
            missed=policy,
            grace_ms=grace_ms,
            next_fire_ms=first,
        )
    )


def resume(store: LocalStore, schedule_id: str) -> Schedule:
    """Enable a paused schedule from now on: times that passed while it was paused are not
    fires (neither fired nor caught up); a one-shot whose time passed stays without a next
    fire."""
    schedule = store.schedules.get(schedule_id)
    if schedule.enabled:
        return schedule
    first = timing(schedule).first(store.clock.now_ms())
    return store.schedules.set_enabled(schedule_id, True, first)


def describe_schedule(schedule: Schedule) -> str:
    """When the schedule fires, as a person reads it (`every 30s`, `cron 0 9 * * 1-5 in
    Europe/Paris`, `at 2026-05-01T09:00:00+02:00`)."""
    text = timing(schedule).describe()
    return (
        text
        if schedule.timezone == "UTC" or schedule.kind == "once"
        else f"{text} in {schedule.timezone}"
    )


def schedule_time(t_ms: int, tz: str) -> str:
    """An epoch-ms fire time as ISO 8601 in the schedule's time zone."""
    return iso(t_ms, tz)


def timing(schedule: Schedule) -> Timing:
    """The schedule's times as stored (its spec is already normalized)."""
    return Timing(schedule.kind, schedule.spec, schedule.timezone)


def plan(schedule: Schedule, due_ms: int, *, caught_up: int = 0) -> FirePlan:
    """What the fire of `schedule` due at `due_ms` admits: its prompt to its session, or to a
    new session made from its template (the session id derived from the fire, like the input
    id, so a double fire is one session and one input)."""
    # The schedule named in the message's metadata: a run record's origin (`runner/_runs.py`).
    payload: dict[str, JsonValue] = {
        "text": schedule.prompt,
        "metadata": {"schedule_id": schedule.id},
    }
    outcome: FireOutcome = "caught_up" if caught_up else "fired"
    if schedule.session_id is not None:
        return FirePlan(
            schedule.session_id,
            fire_input_id(schedule.id, due_ms),
            payload,
            schedule.delivery,
            None,
            outcome,
            caught_up,
        )
    template = schedule.template
    location = template.get("location")
    create = SessionCreated(
        title=str(template.get("title") or schedule.name or schedule.prompt[:80]),
        agent=_text(template.get("agent")),
        model=_text(template.get("model")),
        metadata={"workspace": location, "schedule_id": schedule.id, "fire_due_ms": due_ms},
        location=_text(location),
    )
    return FirePlan(
        fire_session_id(schedule.id, due_ms),
        fire_input_id(schedule.id, due_ms),
        payload,
        schedule.delivery,
        create,
        outcome,
        caught_up,
    )


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def fire_one(store: LocalStore, schedule: Schedule, now_ms: int) -> ScheduleFire | None:
    """Take the schedule's due fire (see the module docstring); None when another worker took
    it first."""
    due = schedule.next_fire_ms
    assert due is not None
    times = timing(schedule)
    missed_before = now_ms - schedule.grace_ms
    if due >= missed_before:  # on time, or late within the grace
        return store.schedules.fire(schedule.id, due, times.after(due), plan(schedule, due))
    # Resume half a grace inside the window, not at its edge: a fire resumed at the edge would
    # be older than the grace again a moment later (for the next worker to look), and skipped.
    resume_from = now_ms - schedule.grace_ms // 2
    count = times.count(due, resume_from)
    resume_at = times.at_or_after(due, resume_from)
    caught = plan(schedule, due, caught_up=count) if schedule.missed == "once" else None
    fire = store.schedules.fire(schedule.id, due, resume_at, caught, missed=count)
    if fire is not None:
        log.info(
            "schedule %s: %d fire(s) missed since %d: %s",
            schedule.id,
            count,
            due,
            "caught up once" if caught else "skipped",
        )
    return fire


def fire_due(store: LocalStore, now_ms: int | None = None) -> list[ScheduleFire]:
    """Take every fire due at `now_ms` (default: the store's clock) that no other worker took
    first, in due order; a schedule several fires behind (within its grace) fires each.

    A schedule that cannot fire (an error that is not a transient store fault) is logged and
    passed over until the next call, so it never holds up the others; a transient fault raises.
    """
    fired: list[ScheduleFire] = []
    broken: set[str] = set()
    while True:
        now = store.clock.now_ms() if now_ms is None else now_ms
        due = [s for s in store.schedules.due(now) if s.id not in broken]
        if not due:
            return fired
        for schedule in due:  # each taken here or elsewhere: its row moved on either way
            try:
                fire = fire_one(store, schedule, now)
            except Exception as err:
                if is_transient(err):
                    raise
                log.warning("schedule %s cannot fire: %s: %s", schedule.id, type(err).__name__, err)
                broken.add(schedule.id)
                continue
            if fire is not None:
                fired.append(fire)


async def run_schedules(
    store: LocalStore,
    stop: asyncio.Event,
    on_fire: Callable[[ScheduleFire], None] | None = None,
    *,
    compaction: CompactionConfig | Settings | None = None,
    on_idle: Callable[[str], None] | None = None,
) -> None:
    """Fire due schedules until `stop` is set: a worker's second task. Sleeps until the next
    due time (at most `MAX_WAIT_S`); a transient store fault is waited out, never fatal. With
    `compaction` (each location's `[compaction]` settings, `Runtime.compaction_at`, or one
    configuration for all), every `IDLE_SCAN_S` it also admits idle compactions where
    `before_cache_expiry` is on (`_idle.py`); `on_idle` hears each session one was admitted to."""
    outage = Outage(log, "firing schedules")
    stopper = asyncio.ensure_future(stop.wait())
    loop = asyncio.get_running_loop()
    next_scan = loop.time()
    try:
        while not stop.is_set():
            wait = MAX_WAIT_S
            try:
                fired = await off_loop(fire_due, store)
                soonest = await off_loop(store.schedules.next_due_ms)
                if compaction is not None and loop.time() >= next_scan:
                    next_scan = loop.time() + IDLE_SCAN_S
                    for sid in await off_loop(admit_idle_compactions, store, compaction):
                        if on_idle is not None:
                            on_idle(sid)
            except Exception as err:
                if is_transient(err):
                    wait = outage.failed(err)
                else:  # a schedule that cannot fire must not end the worker
                    log.warning("firing schedules failed: %s: %s", type(err).__name__, err)
            else:
                outage.ok()
                for fire in fired:
                    if on_fire is not None:
                        on_fire(fire)
                if soonest is not None:
                    wait = min(wait, max(0.0, (soonest - store.clock.now_ms()) / 1000))
            await asyncio.wait({stopper}, timeout=max(wait, 0.005))
    finally:
        stopper.cancel()
