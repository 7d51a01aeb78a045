"""Schedules in the store: their rows, their fires, and the one transaction that fires one.

A schedule's row holds `next_fire_ms`, the next time it is due. Invariant: a fire moves
`next_fire_ms` from the due time to the next one **in the same transaction** that admits the
fire's input (`fire`), and only while the row still reads that due time; so among any
number of workers on one database, exactly one takes each fire, and a crash either wrote the
admission and the move together or neither. The fire's input id (and, for a template, its new
session's id) derive from the schedule id and the due time (`fire_input_id`), so even a fire
admitted twice by some other path is one input. When times are computed (cron, intervals, time
zones) is the caller's business (`wakeful.execution`): the store only compares and sets.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ..clock import Clock
from ..errors import ConflictError, NotFoundError
from ._backend import Backend, Tx, sha256_hex
from ._records import Admission

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..events import Delivery, SessionCreated

ScheduleKind = Literal["cron", "interval", "once"]
MissedPolicy = Literal["skip", "once"]
FireOutcome = Literal["fired", "caught_up", "skipped", "failed"]

FIRE_HISTORY = 50
"""Fires kept per schedule (the newest); older ones are dropped when a fire is recorded."""

_COLS = (
    "id, name, kind, spec, timezone, prompt, session_id, template, delivery, missed, grace_ms, "
    "enabled, next_fire_ms, created_ms, updated_ms"
)
_FIRE_COLS = "schedule_id, due_ms, fired_ms, outcome, session_id, input_id, missed, error"


def fire_input_id(schedule_id: str, due_ms: int) -> str:
    """The input id of a schedule's fire due at `due_ms`: the same for every worker."""
    return f"fire_{schedule_id}_{due_ms}"


def fire_session_id(schedule_id: str, due_ms: int) -> str:
    """The id of the session a template schedule creates for its fire due at `due_ms`."""
    digest = sha256_hex(f"{schedule_id}\0{due_ms}".encode())
    return f"ses_{digest[:24]}"


@dataclass(frozen=True, slots=True)
class ScheduleFire:
    """One fire of a schedule: the time it was due, when it was taken, and what it did
    (`fired`: its input admitted; `caught_up`: one input admitted for `missed` fire times
    missed in downtime; `skipped`: `missed` fire times dropped by the skip policy; `failed`:
    nothing admitted, `error` says why, e.g. its session was deleted)."""

    schedule_id: str
    due_ms: int
    fired_ms: int
    outcome: FireOutcome
    session_id: str | None = None
    input_id: str | None = None
    missed: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        """The fire as a JSON-ready dict (the CLI and API contract)."""
        return {
            "schedule_id": self.schedule_id,
            "due_ms": self.due_ms,
            "fired_ms": self.fired_ms,
            "outcome": self.outcome,
            "session_id": self.session_id,
            "input_id": self.input_id,
            "missed": self.missed,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class Schedule:
    """A stored schedule. `kind` says how `spec` reads: a cron expression (`cron`), a period in
    milliseconds (`interval`), an ISO time (`once`); times are computed in `timezone`. It
    targets `session_id` (its prompt admitted there) or, when that is None, a new session per
    fire made from `template` (title, agent, model, location). `missed` is the policy for fire
    times found older than `grace_ms` (after downtime): `skip` them, or fire `once` for them.
    `next_fire_ms` is None once nothing is left to fire (a one-shot that fired)."""

    id: str
    kind: ScheduleKind
    spec: str
    prompt: str
    timezone: str = "UTC"
    name: str | None = None
    session_id: str | None = None
    template: dict[str, JsonValue] = field(default_factory=dict)
    delivery: Delivery = "steer"
    missed: MissedPolicy = "skip"
    grace_ms: int = 60_000
    enabled: bool = True
    next_fire_ms: int | None = None
    created_ms: int = 0
    updated_ms: int = 0
    last_fire: ScheduleFire | None = None

    def to_json(self) -> dict[str, object]:
        """The schedule as a JSON-ready dict (the CLI and API contract)."""
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "spec": self.spec,
            "timezone": self.timezone,
            "prompt": self.prompt,
            "session_id": self.session_id,
            "template": self.template,
            "delivery": self.delivery,
            "missed": self.missed,
            "grace_ms": self.grace_ms,
            "enabled": self.enabled,
            "next_fire_ms": self.next_fire_ms,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
            "last_fire": None if self.last_fire is None else self.last_fire.to_json(),
        }


@dataclass(frozen=True, slots=True)
class FirePlan:
    """What a fire admits: `prompt` to `session_id` (created from `create` when given, the
    template case), marked `outcome` (`fired`, or `caught_up` standing for `missed` times)."""

    session_id: str
    input_id: str
    payload: dict[str, JsonValue]
    delivery: Delivery
    create: SessionCreated | None = None
    outcome: FireOutcome = "fired"
    missed: int = 0


def _schedule(row: Sequence[Any], last: ScheduleFire | None = None) -> Schedule:
    return Schedule(
        id=row[0],
        name=row[1],
        kind=row[2],
        spec=row[3],
        timezone=row[4],
        prompt=row[5],
        session_id=row[6],
        template=json.loads(row[7]) if row[7] else {},
        delivery=row[8],
        missed=row[9],
        grace_ms=int(row[10]),
        enabled=bool(row[11]),
        next_fire_ms=None if row[12] is None else int(row[12]),
        created_ms=int(row[13]),
        updated_ms=int(row[14]),
        last_fire=last,
    )


def _fire(row: Sequence[Any]) -> ScheduleFire:
    return ScheduleFire(
        row[0], int(row[1]), int(row[2]), row[3], row[4], row[5], int(row[6]), row[7]
    )


def _last_fire(tx: Tx, schedule_id: str) -> ScheduleFire | None:
    row = tx.one(
        f"SELECT {_FIRE_COLS} FROM schedule_fires WHERE schedule_id = ? "
        "ORDER BY due_ms DESC LIMIT 1",
        (schedule_id,),
    )
    return None if row is None else _fire(row)


def _record_fire_in(tx: Tx, fire: ScheduleFire) -> None:
    """Insert a fire (a second record of one due time is ignored) and drop the oldest past
    `FIRE_HISTORY`."""
    tx.run(
        f"INSERT INTO schedule_fires ({_FIRE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (
            fire.schedule_id,
            fire.due_ms,
            fire.fired_ms,
            fire.outcome,
            fire.session_id,
            fire.input_id,
            fire.missed,
            fire.error,
        ),
    )
    tx.run(
        "DELETE FROM schedule_fires WHERE schedule_id = ? AND due_ms < ("
        "SELECT due_ms FROM schedule_fires WHERE schedule_id = ? "
        "ORDER BY due_ms DESC LIMIT 1 OFFSET ?)",
        (fire.schedule_id, fire.schedule_id, FIRE_HISTORY - 1),
    )


AdmitHere = Callable[
    ["Tx", str, str, Any, "dict[str, JsonValue]", "Delivery", int, "SessionCreated | None"],
    Admission,
]


class Schedules:
    """A store's schedules and their fires (`SqlStore.schedules`; the `ScheduleStoreMethods`
    of the zidane contract): their own aggregate beside the sessions, so the store's session
    surface does not carry them."""

    def __init__(self, backend: Backend, clock: Clock, admit_here: AdmitHere) -> None:
        self.backend = backend
        self.clock = clock
        self._admit_here = admit_here  # `SqlStore._admit_here`: the one admission in a tx

    def save(self, schedule: Schedule, *, keep_next_fire: bool = False) -> Schedule:
        """Create or replace a schedule (its fires are kept; `last_fire` is not stored: the
        fires are). With `keep_next_fire`, an existing schedule keeps its stored
        `next_fire_ms`, so an edit does not undo a fire another worker took meanwhile."""
        now = self.clock.now_ms()
        with self.backend.transaction(write=True) as tx:
            old = tx.one(
                f"SELECT created_ms, next_fire_ms FROM schedules WHERE id = ? {tx.row_lock()}",
                (schedule.id,),
            )
            created = now if old is None else int(old[0])
            next_ms = old[1] if old is not None and keep_next_fire else schedule.next_fire_ms
            params = (
                schedule.name,
                schedule.kind,
                schedule.spec,
                schedule.timezone,
                schedule.prompt,
                schedule.session_id,
                json.dumps(schedule.template) if schedule.template else None,
                schedule.delivery,
                schedule.missed,
                schedule.grace_ms,
                int(schedule.enabled),
                next_ms,
                created,
                now,
            )
            if old is None:
                tx.run(
                    f"INSERT INTO schedules ({_COLS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (schedule.id, *params),
                )
            else:
                tx.run(
                    "UPDATE schedules SET name = ?, kind = ?, spec = ?, timezone = ?, prompt = ?, "
                    "session_id = ?, template = ?, delivery = ?, missed = ?, grace_ms = ?, "
                    "enabled = ?, next_fire_ms = ?, created_ms = ?, updated_ms = ? WHERE id = ?",
                    (*params, schedule.id),
                )
            found = self._schedule_in(tx, schedule.id)
        assert found is not None
        return found

    def _schedule_in(self, tx: Tx, schedule_id: str) -> Schedule | None:
        row = tx.one(f"SELECT {_COLS} FROM schedules WHERE id = ?", (schedule_id,))
        return None if row is None else _schedule(row, _last_fire(tx, schedule_id))

    def get(self, schedule_id: str) -> Schedule:
        """One schedule with its last fire; `NotFoundError` when there is none."""
        with self.backend.transaction(write=False) as tx:
            found = self._schedule_in(tx, schedule_id)
        if found is None:
            raise NotFoundError(f"no schedule {schedule_id}")
        return found

    def all(self) -> list[Schedule]:
        """Every stored schedule, with its last fire, oldest first."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(f"SELECT {_COLS} FROM schedules ORDER BY created_ms, id")
            return [_schedule(r, _last_fire(tx, r[0])) for r in rows]

    def delete(self, schedule_id: str) -> bool:
        """Remove a schedule and its fires (the inputs it admitted stay). False when it was
        gone."""
        with self.backend.transaction(write=True) as tx:
            tx.run("DELETE FROM schedule_fires WHERE schedule_id = ?", (schedule_id,))
            return tx.run("DELETE FROM schedules WHERE id = ?", (schedule_id,)) == 1

    def set_enabled(
        self, schedule_id: str, enabled: bool, next_fire_ms: int | None = None
    ) -> Schedule:
        """Pause (`enabled=False`) or resume a schedule; resuming sets its next fire to
        `next_fire_ms` (computed by the caller from now, so a pause is not a downtime to catch
        up). `NotFoundError` when there is none."""
        now = self.clock.now_ms()
        with self.backend.transaction(write=True) as tx:
            if enabled:
                changed = tx.run(
                    "UPDATE schedules SET enabled = 1, next_fire_ms = ?, updated_ms = ? "
                    "WHERE id = ?",
                    (next_fire_ms, now, schedule_id),
                )
            else:
                changed = tx.run(
                    "UPDATE schedules SET enabled = 0, updated_ms = ? WHERE id = ?",
                    (now, schedule_id),
                )
            found = self._schedule_in(tx, schedule_id) if changed else None
        if found is None:
            raise NotFoundError(f"no schedule {schedule_id}")
        return found

    def fires(self, schedule_id: str, limit: int = FIRE_HISTORY) -> list[ScheduleFire]:
        """A schedule's fires, newest first (at most `limit`)."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                f"SELECT {_FIRE_COLS} FROM schedule_fires WHERE schedule_id = ? "
                "ORDER BY due_ms DESC LIMIT ?",
                (schedule_id, limit),
            )
        return [_fire(r) for r in rows]

    def record_fire(self, fire: ScheduleFire) -> None:
        """Store a fire; keeps the newest `FIRE_HISTORY` per schedule."""
        with self.backend.transaction(write=True) as tx:
            _record_fire_in(tx, fire)

    def due(self, now_ms: int, limit: int = 100) -> list[Schedule]:
        """Enabled schedules whose next fire is due at `now_ms`, soonest first (from the
        `schedules_due` index; the last fire is not read)."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                f"SELECT {_COLS} FROM schedules WHERE enabled = 1 AND next_fire_ms IS NOT NULL "
                "AND next_fire_ms <= ? ORDER BY next_fire_ms, id LIMIT ?",
                (now_ms, limit),
            )
        return [_schedule(r) for r in rows]

    def next_due_ms(self) -> int | None:
        """The soonest next fire of any enabled schedule, or None when none will fire."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one("SELECT MIN(next_fire_ms) FROM schedules WHERE enabled = 1")
        return None if row is None or row[0] is None else int(row[0])

    def take_fire(self, schedule_id: str, due_ms: int, next_ms: int | None) -> bool:
        """Take the fire due at `due_ms` without admitting anything: set `next_fire_ms` to
        `next_ms` when the schedule is enabled and still due at `due_ms`. False when another
        worker took it, or it changed meanwhile."""
        with self.backend.transaction(write=True) as tx:
            return self._take_in(tx, schedule_id, due_ms, next_ms)

    def _take_in(self, tx: Tx, schedule_id: str, due_ms: int, next_ms: int | None) -> bool:
        row = tx.one(
            f"SELECT enabled, next_fire_ms FROM schedules WHERE id = ? {tx.row_lock()}",
            (schedule_id,),
        )
        if row is None or not row[0] or row[1] is None or int(row[1]) != due_ms:
            return False
        tx.run(
            "UPDATE schedules SET next_fire_ms = ?, updated_ms = ? WHERE id = ?",
            (next_ms, self.clock.now_ms(), schedule_id),
        )
        return True

    def fire(
        self,
        schedule_id: str,
        due_ms: int,
        next_ms: int | None,
        plan: FirePlan | None,
        *,
        missed: int = 0,
    ) -> ScheduleFire | None:
        """Take the fire due at `due_ms` (as `take_fire`) and, in the same
        transaction, admit `plan`'s input (None: the fire is skipped, standing for `missed`
        times) and record the fire. None when another worker took it (nothing written).

        A target session that no longer exists, or an input id already used with other
        content, makes a `failed` fire: the schedule still moves on, so it never retries a
        fire forever.
        """
        now = self.clock.now_ms()
        with self.backend.transaction(write=True) as tx:
            if not self._take_in(tx, schedule_id, due_ms, next_ms):
                return None
            fire = ScheduleFire(schedule_id, due_ms, now, "skipped", missed=missed)
            if plan is not None:
                fire = self._admit_fire(tx, fire, plan, now)
            _record_fire_in(tx, fire)
        return fire

    def _admit_fire(self, tx: Tx, fire: ScheduleFire, plan: FirePlan, now: int) -> ScheduleFire:
        sid, iid = plan.session_id, plan.input_id
        failed = ScheduleFire(fire.schedule_id, fire.due_ms, now, "failed", sid, iid, plan.missed)
        if plan.create is None and tx.one("SELECT 1 FROM sessions WHERE id = ?", (sid,)) is None:
            return replace(failed, error=f"no session {sid}")
        try:
            self._admit_here(tx, sid, iid, "user", plan.payload, plan.delivery, now, plan.create)
        except (ConflictError, NotFoundError) as err:
            return replace(failed, error=str(err))
        return ScheduleFire(fire.schedule_id, fire.due_ms, now, plan.outcome, sid, iid, plan.missed)
