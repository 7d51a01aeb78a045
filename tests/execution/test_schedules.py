"""Schedules through the `Runtime`: times (cron in a time zone, intervals, one-shots), fires on a
fake clock, the missed-fire policies, pause and resume, and bad input refused before anything
is stored."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from wakeful import NotFoundError, Runtime, UsageError
from wakeful.clock import FakeClock
from wakeful.execution import Timing, fire_due
from wakeful.store import fire_input_id, open_store

from .helpers import make_workspace, write_script

PARIS = ZoneInfo("Europe/Paris")


def _ms(*args: int, tz: ZoneInfo = PARIS) -> int:
    return int(datetime(*args, tzinfo=tz).timestamp() * 1000)  # type: ignore[misc]


def test_cron_times_are_read_in_the_schedule_time_zone_across_a_dst_change():
    daily = Timing.parse("cron", "0  9 * * *", "Europe/Paris")
    assert daily.spec == "0 9 * * *"
    # 2026-03-29: clocks go forward in Paris; 09:00 stays 09:00 local (07:00 UTC after, 08:00 before)
    first = daily.after(_ms(2026, 3, 28, 12, 0))
    assert first == _ms(2026, 3, 29, 9, 0)
    assert daily.after(first) == _ms(2026, 3, 30, 9, 0)
    assert daily.after(first) - first == 24 * 3_600_000
    assert _ms(2026, 3, 28, 9, 0) - _ms(2026, 3, 27, 9, 0) == 24 * 3_600_000
    assert first - _ms(2026, 3, 28, 9, 0) == 23 * 3_600_000  # the short day
    assert daily.count(first, first + 3 * 86_400_000) == 3
    assert daily.at_or_after(first, first) == first


def test_intervals_keep_their_phase_and_one_shots_fire_once():
    every = Timing.parse("interval", "1500ms")
    assert every.after(10_000) == 11_500
    assert every.at_or_after(10_000, 14_000) == 14_500
    assert every.at_or_after(10_000, 14_500) == 14_500
    assert every.count(10_000, 14_500) == 3
    assert Timing.parse("interval", "2m").spec == "120000"
    once = Timing.parse("once", "2026-05-01T09:00", "Europe/Paris")
    at = _ms(2026, 5, 1, 9, 0)
    assert int(once.spec) == at and once.after(at - 1) == at and once.after(at) is None
    assert once.first(at + 1) is None


@pytest.mark.parametrize(
    ("kind", "spec", "tz", "reason"),
    [
        ("cron", "* * *", "UTC", "five fields"),
        ("cron", "61 * * * *", "UTC", "bad cron expression"),
        ("interval", "soon", "UTC", "bad interval"),
        ("interval", "10ms", "UTC", "shorter than 100 ms"),
        ("once", "tomorrow", "UTC", "bad time"),
        ("cron", "* * * * *", "Mars/Olympus", "unknown time zone"),
        ("weekly", "x", "UTC", "unknown schedule kind"),
    ],
)
def test_bad_specs_are_one_line_usage_errors(kind: str, spec: str, tz: str, reason: str):
    with pytest.raises(UsageError, match=reason) as err:
        Timing.parse(kind, spec, tz)
    assert "\n" not in str(err.value)


@pytest.fixture
def rt(tmp_path: Path, clock: FakeClock):
    work = make_workspace(tmp_path)
    model = write_script(tmp_path / "s.json", [{"match": ".", "replies": [{"text": "ok"}]}])
    store = open_store(str(tmp_path / "s.db"), clock=clock)
    runtime = Runtime(store=store, model=model, workspace=work)
    yield runtime
    store.close()


def test_fires_on_time_are_admitted_once_each(rt: Runtime, clock: FakeClock):
    target = rt.send("hello", resume=False).session_id
    s = rt.add_schedule("tick", every="10s", session_id=target)
    assert s.next_fire_ms == clock.now_ms() + 10_000
    assert rt.fire_schedules() == []
    clock.advance(25_000)  # two times due, both within the grace
    fired = rt.fire_schedules()
    assert [f.due_ms for f in fired] == [s.next_fire_ms, s.next_fire_ms + 10_000]
    assert rt.fire_schedules() == []
    pending = [i.input_id for i in rt.store.pending(target)]
    assert pending[1:] == [fire_input_id(s.id, f.due_ms) for f in fired]
    listed = rt.schedules()[0]
    assert listed.next_fire_ms == s.next_fire_ms + 20_000 and listed.last_fire == fired[-1]
    assert rt.schedule_fires(s.id) == fired[::-1]


def test_a_template_schedule_makes_a_session_per_fire(rt: Runtime, clock: FakeClock):
    s = rt.add_schedule("report", cron="*/5 * * * *", title="5-minute report")
    assert (s.next_fire_ms or 0) % 300_000 == 0
    clock.advance((s.next_fire_ms or 0) - clock.now_ms())
    [fire] = rt.fire_schedules()
    row = rt.store.get_session(fire.session_id or "")
    assert row.title == "5-minute report" and row.model == rt.model
    assert row.location == str(rt.workspace)
    assert [i.input_id for i in rt.store.pending(row.id)] == [fire_input_id(s.id, fire.due_ms)]


def test_missed_fires_are_skipped_by_default(rt: Runtime, clock: FakeClock):
    target = rt.send("hello", resume=False).session_id
    s = rt.add_schedule("tick", every="10s", session_id=target, grace_ms=15_000)
    due = s.next_fire_ms or 0
    clock.advance(10_000 + 100_000)  # down for 100 s: times older than 15 s were missed
    fires = rt.fire_schedules()  # and it resumes within half the grace (7.5 s) of now
    assert (fires[0].outcome, fires[0].due_ms, fires[0].missed) == ("skipped", due, 10)
    assert [(f.outcome, f.due_ms) for f in fires[1:]] == [("fired", due + 100_000)]
    assert len(rt.store.pending(target)) == 1 + 1


def test_missed_fires_can_be_caught_up_once(rt: Runtime, clock: FakeClock):
    target = rt.send("hello", resume=False).session_id
    s = rt.add_schedule("tick", every="10s", session_id=target, missed="once", grace_ms=0)
    due = s.next_fire_ms or 0
    clock.advance(10_000 + 95_000)
    fires = rt.fire_schedules()
    assert [(f.outcome, f.due_ms, f.missed) for f in fires] == [("caught_up", due, 10)]
    assert rt.schedule(s.id).next_fire_ms == due + 100_000
    assert [i.input_id for i in rt.store.pending(target)][1:] == [fire_input_id(s.id, due)]


def test_pause_and_resume_do_not_catch_up_the_paused_times(rt: Runtime, clock: FakeClock):
    target = rt.send("hello", resume=False).session_id
    s = rt.add_schedule("tick", every="10s", session_id=target, missed="once")
    assert not rt.pause_schedule(s.id).enabled
    clock.advance(120_000)
    assert rt.fire_schedules() == []
    resumed = rt.resume_schedule(s.id)
    assert resumed.enabled and resumed.next_fire_ms == clock.now_ms() + 10_000
    rt.delete_schedule(s.id)
    with pytest.raises(NotFoundError):
        rt.delete_schedule(s.id)
    assert rt.schedules() == []


def test_a_one_shot_fires_once_then_has_no_next(rt: Runtime, clock: FakeClock):
    target = rt.send("hello", resume=False).session_id
    at = datetime.fromtimestamp((clock.now_ms() + 60_000) / 1000, PARIS).isoformat()
    s = rt.add_schedule("remind me", at=at, session_id=target, timezone="Europe/Paris")
    clock.advance(61_000)
    [fire] = rt.fire_schedules()
    assert fire.due_ms == s.next_fire_ms and rt.schedule(s.id).next_fire_ms is None
    clock.advance(10_000_000)
    assert rt.fire_schedules() == []


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({}, "exactly one of cron, every or at"),
        ({"every": "1s", "cron": "* * * * *"}, "exactly one"),
        ({"every": "1s", "missed": "later"}, "missed-fire policy"),
        ({"every": "1s", "grace_ms": -1}, "grace"),
        ({"every": "1s", "delivery": "now"}, "delivery"),
        ({"at": "2001-01-01T00:00"}, "already past"),
        ({"every": "1s", "model": "nonsense:model"}, "model"),
        ({"every": "1s", "location": "/no/such/dir"}, "schedule"),
    ],
)
def test_bad_input_stores_nothing(rt: Runtime, kw: dict[str, object], reason: str):
    with pytest.raises(UsageError, match=reason):
        rt.add_schedule("tick", **kw)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="non-empty prompt"):
        rt.add_schedule("  ", every="1s")
    with pytest.raises(NotFoundError):
        rt.add_schedule("tick", every="1s", session_id="ses_missing")
    assert rt.schedules() == []


def test_fire_due_with_an_explicit_time(rt: Runtime, clock: FakeClock):
    target = rt.send("hello", resume=False).session_id
    s = rt.add_schedule("tick", every="1s", session_id=target)
    assert fire_due(rt.store, (s.next_fire_ms or 0) - 1) == []
    assert len(fire_due(rt.store, s.next_fire_ms)) == 1
