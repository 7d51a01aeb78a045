"""Schedule endpoints: list, add, read (with recent fires), pause, resume, delete.

Each calls one public `Runtime` method; fires are taken by running workers
(`wakeful worker`), never by a request (docs/schedules.md).
"""

from __future__ import annotations

from typing import Any

from ..execution import describe_schedule, off_loop, schedule_time
from ..store import Schedule, ScheduleFire
from ._api import Call, Registry
from ._models import DeletedOut, ScheduleIn, ScheduleOut, SchedulesOut
from ._state import ServerState

ops = Registry(scope="admin")  # the whole store, or every session's: docs/access.md
SCHEDULE_ID = {"schedule_id": {"type": "string", "pattern": r"^[A-Za-z0-9_\-]{1,128}$"}}


def schedule_out(s: Schedule, fires: list[ScheduleFire] | None = None) -> ScheduleOut:
    """The API shape of a schedule."""
    data = s.to_json()
    return ScheduleOut.model_validate(
        {
            **data,
            "every": describe_schedule(s),
            "next_fire": None
            if s.next_fire_ms is None
            else schedule_time(s.next_fire_ms, s.timezone),
            "fires": None if fires is None else [f.to_json() for f in fires],
        }
    )


@ops.op("GET", "/schedules", tag="schedules", response=SchedulesOut, errors=(401,))
async def list_schedules(call: Call[Any, Any]) -> SchedulesOut:
    """Every schedule with its next fire time and last fire, oldest first."""
    state: ServerState = call.state
    found = await off_loop(state.runtime.schedules)
    return SchedulesOut(schedules=[schedule_out(s) for s in found])


@ops.op(
    "POST",
    "/schedules",
    tag="schedules",
    body=ScheduleIn,
    status=201,
    response=ScheduleOut,
    errors=(400, 401, 404, 413, 422),
)
async def add_schedule(call: Call[Any, ScheduleIn]) -> ScheduleOut:
    """Add a schedule (a bad cron expression, interval, time or zone is a 422 with its reason)."""
    state: ServerState = call.state
    b = call.body
    added = await off_loop(
        state.runtime.add_schedule,
        b.prompt,
        cron=b.cron,
        every=b.every,
        at=b.at,
        timezone=b.timezone,
        session_id=b.session_id,
        name=b.name,
        missed=b.missed,
        grace_ms=b.grace_ms,
        delivery=b.delivery,
        title=b.title,
        agent=b.agent,
        model=b.model,
        location=b.location,
    )
    return schedule_out(added)


@ops.op(
    "GET",
    "/schedules/{schedule_id}",
    tag="schedules",
    response=ScheduleOut,
    errors=(401, 404),
    path_schemas=SCHEDULE_ID,
)
async def get_schedule(call: Call[Any, Any]) -> ScheduleOut:
    """One schedule with its recent fires, newest first."""
    state: ServerState = call.state
    sid = call.path["schedule_id"]
    found = await off_loop(state.runtime.schedule, sid)
    fires = await off_loop(state.runtime.schedule_fires, sid)
    return schedule_out(found, fires)


@ops.op(
    "POST",
    "/schedules/{schedule_id}/pause",
    tag="schedules",
    response=ScheduleOut,
    errors=(401, 404),
    path_schemas=SCHEDULE_ID,
)
async def pause_schedule(call: Call[Any, Any]) -> ScheduleOut:
    """Stop the schedule firing until resumed."""
    state: ServerState = call.state
    return schedule_out(await off_loop(state.runtime.pause_schedule, call.path["schedule_id"]))


@ops.op(
    "POST",
    "/schedules/{schedule_id}/resume",
    tag="schedules",
    response=ScheduleOut,
    errors=(401, 404),
    path_schemas=SCHEDULE_ID,
)
async def resume_schedule(call: Call[Any, Any]) -> ScheduleOut:
    """Fire the schedule again from its next time after now (paused times are not caught up)."""
    state: ServerState = call.state
    return schedule_out(await off_loop(state.runtime.resume_schedule, call.path["schedule_id"]))


@ops.op(
    "DELETE",
    "/schedules/{schedule_id}",
    tag="schedules",
    response=DeletedOut,
    errors=(401, 404),
    path_schemas=SCHEDULE_ID,
)
async def delete_schedule(call: Call[Any, Any]) -> DeletedOut:
    """Delete the schedule and its fire history (the sessions it made stay)."""
    state: ServerState = call.state
    sid = call.path["schedule_id"]
    await off_loop(state.runtime.delete_schedule, sid)
    return DeletedOut(id=sid, deleted=True)
