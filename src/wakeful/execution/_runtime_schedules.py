"""`SchedulesMixin`: the schedules of `Runtime` (docs/schedules.md): adding one (its timing
parsed, a new session's agent, model and location checked now), reading, pausing, resuming and
deleting them, and firing what is due (`_schedules.py` holds the fire and its loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from ..errors import NotFoundError, UsageError
from ..runner import resolve_agent
from ..store import LocalStore, Schedule, ScheduleFire
from . import _schedules
from ._move import existing_location
from ._schedule_times import Timing

if TYPE_CHECKING:
    from ..config import CompactionConfig
    from ._place import Place


class SchedulesMixin:
    """Schedules of `Runtime` (see the module docstring)."""

    store: LocalStore
    workspace: Path
    model: str
    agent_name: str

    if TYPE_CHECKING:  # the `Runtime`'s own

        def place(self, location: str | None) -> Place: ...
        def check_model(self, spec: str, place: Place | None = None) -> None: ...
        def compaction_at(self, location: str | None) -> CompactionConfig: ...

    def add_schedule(
        self,
        prompt: str,
        *,
        cron: str | None = None,
        every: str | None = None,
        at: str | None = None,
        timezone: str = "UTC",
        session_id: str | None = None,
        name: str | None = None,
        missed: str = "skip",
        grace_ms: int = 60_000,
        delivery: str = "steer",
        title: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        location: str | Path | None = None,
        schedule_id: str | None = None,
    ) -> Schedule:
        """Store a schedule firing `prompt` by a five-field `cron` expression, `every` period
        (`30s`, `5m`, `2h`, `1d`) or once `at` an ISO time, in `timezone`; exactly one of the
        three. Each fire admits the prompt to `session_id`, or (None) to a new session made
        from `agent`, `model` and `location` (defaults: this runtime's agent, model and
        workspace), each checked now. `missed` is the policy for fires
        missed in downtime (`skip`, or `once`: fire one to catch up). Any worker fires it.

        `UsageError` (nothing stored) for bad input, `NotFoundError` for an unknown session.
        """
        given = [(k, v) for k, v in (("cron", cron), ("interval", every), ("once", at)) if v]
        if len(given) != 1:
            raise UsageError("give exactly one of cron, every or at")
        [(kind, spec)] = given
        times = Timing.parse(kind, spec, timezone)
        template: dict[str, JsonValue] = {}
        if session_id is None:
            where = (
                str(self.workspace) if location is None else existing_location(location, "schedule")
            )
            place = self.place(where)
            spec = model or self.model
            self.check_model(spec, place)
            resolve_agent(agent or self.agent_name, place.config)
            template = {
                "agent": agent or self.agent_name,
                "model": spec,
                "location": where,
                "title": title,
            }
        return _schedules.new_schedule(
            self.store,
            prompt,
            times,
            session_id=session_id,
            template=template,
            name=name,
            missed=missed,
            grace_ms=grace_ms,
            delivery=delivery,
            schedule_id=schedule_id,
        )

    def schedules(self) -> list[Schedule]:
        """Every schedule with its next fire time and last fire, oldest first."""
        return self.store.schedules.all()

    def schedule(self, schedule_id: str) -> Schedule:
        """One schedule (`NotFoundError` when there is none)."""
        return self.store.schedules.get(schedule_id)

    def schedule_fires(self, schedule_id: str, limit: int = 20) -> list[ScheduleFire]:
        """The schedule's recent fires, newest first (`NotFoundError` for an unknown one)."""
        self.store.schedules.get(schedule_id)
        return self.store.schedules.fires(schedule_id, limit)

    def pause_schedule(self, schedule_id: str) -> Schedule:
        """Stop a schedule firing until `resume_schedule` (`NotFoundError` when unknown)."""
        return self.store.schedules.set_enabled(schedule_id, False)

    def resume_schedule(self, schedule_id: str) -> Schedule:
        """Fire a paused schedule again from its next time after now; the times that passed
        while paused are neither fired nor caught up (`NotFoundError` when unknown)."""
        return _schedules.resume(self.store, schedule_id)

    def delete_schedule(self, schedule_id: str) -> None:
        """Remove a schedule and its fire history; the inputs and sessions it made stay.
        `NotFoundError` when there is none."""
        if not self.store.schedules.delete(schedule_id):
            raise NotFoundError(f"no schedule {schedule_id}")

    def fire_schedules(self) -> list[ScheduleFire]:
        """Take the fires due now that no other process took (what every worker does in the
        background); the admitted inputs are driven by whichever driver runs next."""
        return _schedules.fire_due(self.store)

    async def run_schedules(
        self,
        stop: asyncio.Event,
        on_fire: Callable[[ScheduleFire], None] | None = None,
        on_idle: Callable[[str], None] | None = None,
    ) -> None:
        """Fire due schedules until `stop` is set, as every worker does beside its drains
        (each fire is taken by one process only); `on_fire` hears each fire taken here. Idle
        compactions are admitted too, to the sessions whose own location's `[compaction]` has
        `before_cache_expiry` on (`compaction_at`); `on_idle` hears each session one was
        admitted to (`_idle.py`)."""
        await _schedules.run_schedules(
            self.store, stop, on_fire, compaction=self.compaction_at, on_idle=on_idle
        )
