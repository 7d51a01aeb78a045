"""A read-only tool step's boundary writes the next step's receipt (`RequestBuilder.build_ahead`):
one write per such step instead of two, unless something is delivered there, and every receipt
still rebuilds to the exact request it records."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_database
from wakeful.config import Config
from wakeful.events import ReceiptRecorded, SessionEvent
from wakeful.execution import Runtime
from wakeful.providers import make_provider
from wakeful.runner import LiveEvent, verify_receipt

CALL = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "s.db")
    else:
        with fresh_database() as url:
            yield url


def runtime(tmp_path: Path, db: str, replies: list[dict[str, Any]]) -> tuple[Runtime, str]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": [{"match": ".", "replies": replies}]}))
    model = f"scripted:{path}"
    config = Config.model_validate(
        {"agents": {"build": {"max_steps": 100}}, "loop_guard": {"enabled": False}}
    )  # repeats on purpose
    return Runtime(db, model=model, workspace=tmp_path, config=config), model


class Writes:
    """A spy on the real store's writes a turn's steps make: `append` (one transaction each) and
    the step boundaries' units of work (`store.write` whose unit promotes with `idle=False`:
    `execution.promote_step`), recording the event types each wrote, in order."""

    def __init__(self, rt: Runtime) -> None:
        self.appends: list[list[str]] = []
        self.promotes: list[list[str]] = []
        append, write = rt.store.append, rt.store.write

        def spy_append(sid: str, events: Sequence[SessionEvent], *a: Any, **kw: Any) -> Any:
            self.appends.append([e.type for e in events])
            return append(sid, events, *a, **kw)

        @contextmanager
        def spy_write(sid: str, *a: Any, **kw: Any) -> Iterator[Any]:
            with write(sid, *a, **kw) as unit:
                spy = _UnitSpy(unit)
                yield spy
            if spy.boundary:  # committed: what the unit wrote, as a step boundary
                self.promotes.append(spy.written)

        rt.store.append = spy_append  # type: ignore[method-assign]  # spies on the real store
        rt.store.write = spy_write  # type: ignore[method-assign]

    def receipts_appended(self) -> int:
        return sum(types.count("receipt.recorded") for types in self.appends)

    def receipts_promoted(self) -> int:
        return sum(types.count("receipt.recorded") for types in self.promotes)


class _UnitSpy:
    """A unit of work as the store gave it, recording what it appends and whether it promoted at
    a step boundary."""

    def __init__(self, unit: Any) -> None:
        self._unit = unit
        self.written: list[str] = []
        self.boundary = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._unit, name)

    def append(self, events: Sequence[SessionEvent], *a: Any, **kw: Any) -> Any:
        self.written.extend(e.type for e in events)
        return self._unit.append(events, *a, **kw)

    def promote(self, *a: Any, idle: bool, **kw: Any) -> Any:
        self.boundary = self.boundary or not idle
        return self._unit.promote(*a, idle=idle, **kw)


def check_receipts(rt: Runtime, sid: str, model: str) -> list[ReceiptRecorded]:
    """Every receipt rebuilds to its digest (as logged, against its base, and expanded)."""
    provider = make_provider(model)
    logged = [e.event for e in rt.store.events(sid, types=["receipt.recorded"])]
    for receipt in [*logged, *rt.store.receipts(sid)]:
        assert isinstance(receipt, ReceiptRecorded)
        assert verify_receipt(rt.store, sid, receipt, provider), receipt.receipt_id
    return rt.store.receipts(sid)


async def test_a_read_only_step_writes_its_results_and_the_next_receipt_in_one_commit(
    tmp_path: Path, db: str
):
    rt, model = runtime(tmp_path, db, [CALL] * 4 + [{"text": "done"}])
    live: list[LiveEvent] = []
    publish = rt._publish

    def every_live_event(event: LiveEvent) -> None:  # `listener` gets the legacy kinds only
        live.append(event)
        publish(event)

    rt._publish = every_live_event  # type: ignore[method-assign]
    writes = Writes(rt)
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed" and turn.steps == 5
        sid = rt.store.list_sessions().sessions[0].id
        # Step 1's receipt is written alone; each of the 4 boundaries after a read-only step
        # writes the step's reply and results and the next step's receipt: no other write
        # (the turn's end goes with the drain's last unit, the claim's release).
        assert writes.receipts_appended() == 1 and writes.receipts_promoted() == 4
        steps_writes = [t for t in writes.appends if "turn.started" not in t]
        assert steps_writes == [["receipt.recorded"]]
        receipts = check_receipts(rt, sid, model)
        assert [(r.step, r.attempt) for r in receipts] == [(n, 1) for n in range(1, 6)]
        ids = [m.id for m in rt.store.messages(sid)]
        assert [len(r.message_ids) for r in receipts] == [1, 3, 5, 7, 9]
        assert all(r.message_ids == tuple(ids[: len(r.message_ids)]) for r in receipts)
        kinds = [e.kind for e in live if e.kind in ("step_start", "step")]
        assert kinds == ["step_start", "step"] * 5  # as when each receipt had its own write
    finally:
        await rt.aclose()


async def test_a_steer_delivered_at_the_boundary_discards_the_receipt_built_ahead(
    tmp_path: Path, db: str
):
    rt, model = runtime(tmp_path, db, [CALL, CALL, {"text": "done"}])
    steered: list[str] = []

    def listener(ev: LiveEvent) -> None:
        if ev.kind == "tool_start" and not steered:  # during step 1
            steered.append(rt.store.admit(ev.session_id, None, "user", {"text": "also this"}))

    rt.listener = listener
    writes = Writes(rt)
    try:
        [turn] = await rt.run("go")
        assert turn.outcome == "completed" and turn.steps >= 3  # the steer asks again
        sid = rt.store.list_sessions().sessions[0].id
        receipts = check_receipts(rt, sid, model)
        assert len(receipts) == turn.steps  # no receipt without its request
        steer = next(m for m in rt.store.messages(sid) if m.text() == "also this")
        assert steer.id in receipts[1].message_ids  # step 2 asked with the steer
        # Step 2's receipt was written on its own after the delivery (the one built ahead of
        # that boundary was not); the boundary after step 2 carried step 3's.
        assert writes.receipts_appended() == 2
        assert writes.receipts_promoted() == turn.steps - 2
        assert "receipt.recorded" not in writes.promotes[0]
        assert writes.promotes[1][-1] == "receipt.recorded"
    finally:
        await rt.aclose()
