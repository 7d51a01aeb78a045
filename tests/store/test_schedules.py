"""The store's schedule methods on each backend: rows, fires, and the one transaction that takes a
fire (compare-and-set on `next_fire_ms` plus the admission), exactly once among racing threads."""

from __future__ import annotations

import threading

from wakeful.clock import FakeClock
from wakeful.events import SessionCreated
from wakeful.store import (
    FIRE_HISTORY,
    FirePlan,
    Schedule,
    SqlStore,
    fire_input_id,
    fire_session_id,
    open_store,
)


def _schedule(**kw: object) -> Schedule:
    fields: dict[str, object] = {
        "id": "sch_a",
        "kind": "interval",
        "spec": "1000",
        "prompt": "tick",
        "next_fire_ms": 5_000,
    }
    return Schedule(**(fields | kw))  # type: ignore[arg-type]


def _plan(store: SqlStore, schedule: Schedule, due: int) -> FirePlan:
    assert schedule.session_id is not None
    return FirePlan(
        schedule.session_id, fire_input_id(schedule.id, due), {"text": schedule.prompt}, "steer"
    )


def test_save_list_get_pause_and_delete(store: SqlStore, clock: FakeClock):
    saved = store.schedules.save(
        _schedule(name="ticker", template={"agent": "build"}, timezone="Europe/Paris")
    )
    assert saved.created_ms == clock.now_ms() and saved.last_fire is None
    assert saved.template == {"agent": "build"} and saved.timezone == "Europe/Paris"
    store.schedules.save(_schedule(id="sch_b", next_fire_ms=9_000))
    assert [s.id for s in store.schedules.all()] == ["sch_a", "sch_b"]
    assert [s.id for s in store.schedules.due(6_000)] == ["sch_a"]
    assert store.schedules.next_due_ms() == 5_000

    paused = store.schedules.set_enabled("sch_a", False)
    assert not paused.enabled and store.schedules.due(10_000)[0].id == "sch_b"
    assert store.schedules.next_due_ms() == 9_000
    resumed = store.schedules.set_enabled("sch_a", True, 7_000)
    assert resumed.enabled and resumed.next_fire_ms == 7_000

    assert store.schedules.delete("sch_a") is True
    assert store.schedules.delete("sch_a") is False
    assert [s.id for s in store.schedules.all()] == ["sch_b"]


def test_an_edit_can_keep_the_next_fire_another_worker_took(store: SqlStore):
    store.schedules.save(_schedule())
    assert store.schedules.take_fire("sch_a", 5_000, 6_000)
    edited = store.schedules.save(_schedule(prompt="tock", next_fire_ms=5_000), keep_next_fire=True)
    assert edited.prompt == "tock" and edited.next_fire_ms == 6_000
    replaced = store.schedules.save(_schedule(next_fire_ms=8_000))
    assert replaced.next_fire_ms == 8_000


def test_a_fire_admits_once_and_moves_the_schedule_on(store: SqlStore):
    store.create_session("ses_t", title="t")
    s = store.schedules.save(_schedule(session_id="ses_t"))
    fire = store.schedules.fire("sch_a", 5_000, 6_000, _plan(store, s, 5_000))
    assert fire is not None and fire.outcome == "fired"
    assert fire.input_id == fire_input_id("sch_a", 5_000) and fire.session_id == "ses_t"
    assert store.schedules.fire("sch_a", 5_000, 6_000, _plan(store, s, 5_000)) is None  # taken
    assert store.schedules.take_fire("sch_a", 5_000, 6_000) is False
    assert [i.input_id for i in store.pending("ses_t")] == [fire.input_id]
    got = store.schedules.get("sch_a")
    assert got.next_fire_ms == 6_000 and got.last_fire == fire
    # the same fire admitted again by another path is one input (its id derives from the fire)
    store.admit("ses_t", fire.input_id, "user", {"text": "tick"})
    assert len(store.pending("ses_t")) == 1


def test_a_paused_schedule_fires_nothing(store: SqlStore):
    store.create_session("ses_t")
    s = store.schedules.save(_schedule(session_id="ses_t"))
    store.schedules.set_enabled("sch_a", False)
    assert store.schedules.fire("sch_a", 5_000, 6_000, _plan(store, s, 5_000)) is None
    assert store.pending("ses_t") == []


def test_a_template_fire_creates_its_session_with_a_derived_id(store: SqlStore, tmp_path):
    store.schedules.save(_schedule())
    sid = fire_session_id("sch_a", 5_000)
    create = SessionCreated(title="made", agent="build", model="scripted:x", location=str(tmp_path))
    plan = FirePlan(sid, fire_input_id("sch_a", 5_000), {"text": "tick"}, "queue", create)
    fire = store.schedules.fire("sch_a", 5_000, 6_000, plan)
    assert fire is not None and fire.session_id == sid
    row = store.get_session(sid)
    assert (row.title, row.model, row.location) == ("made", "scripted:x", str(tmp_path))
    assert [(i.input_id, i.delivery) for i in store.pending(sid)] == [(plan.input_id, "queue")]


def test_a_fire_whose_session_is_gone_fails_and_moves_on(store: SqlStore):
    s = store.schedules.save(_schedule(session_id="ses_gone"))
    fire = store.schedules.fire("sch_a", 5_000, 6_000, _plan(store, s, 5_000))
    assert fire is not None and fire.outcome == "failed" and "ses_gone" in (fire.error or "")
    assert store.schedules.get("sch_a").next_fire_ms == 6_000


def test_a_skip_records_how_many_times_it_stands_for(store: SqlStore):
    store.schedules.save(_schedule())
    fire = store.schedules.fire("sch_a", 5_000, 12_000, None, missed=7)
    assert fire is not None and (fire.outcome, fire.missed, fire.input_id) == ("skipped", 7, None)


def test_fire_history_keeps_the_newest(store: SqlStore):
    store.schedules.save(_schedule(next_fire_ms=0))
    for k in range(FIRE_HISTORY + 5):
        assert store.schedules.fire("sch_a", k, k + 1, None) is not None
    fires = store.schedules.fires("sch_a", 1_000)
    assert [f.due_ms for f in fires] == list(range(FIRE_HISTORY + 4, 4, -1))
    assert len(store.schedules.fires("sch_a", 3)) == 3


def test_racing_threads_take_each_fire_once(db_url: str):
    """Eight threads, each with its own store (connections), race for the same 40 fires."""
    setup = open_store(db_url, clock=FakeClock())
    setup.create_session("ses_t")
    setup.schedules.save(_schedule(session_id="ses_t", next_fire_ms=0))
    won: list[int] = []
    lock = threading.Lock()

    def race() -> None:
        store = open_store(db_url)
        try:
            s = store.schedules.get("sch_a")
            for due in range(0, 40_000, 1_000):
                plan = FirePlan("ses_t", fire_input_id("sch_a", due), {"text": "tick"}, "steer")
                if store.schedules.fire(s.id, due, due + 1_000, plan) is not None:
                    with lock:
                        won.append(due)
        finally:
            store.close()

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == list(range(0, 40_000, 1_000))
    assert len(setup.pending("ses_t")) == 40
    assert setup.schedules.get("sch_a").next_fire_ms == 40_000
    setup.close()
