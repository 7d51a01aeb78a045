"""What one drive costs the store, in units of work (issue 36 item 1: commits per step).

A fresh session's one input answered in three model steps (two tool calls, then a text) by a
`Runtime` over a real store: every `backend.transaction` the drive opens is counted, read or
write, by the store method that opened it. On SQLite each unit is a commit (a read's too); on
PostgreSQL a write is one, and a read one per round trip (its statements autocommit at their
Sync). The bounds are what the drive costs now; a change that adds a unit per drive or per
step fails here, and says which.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_database
from wakeful.config import Config, ExecutionConfig
from wakeful.execution import Runtime
from wakeful.store import open_store


@contextmanager
def _url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield str(tmp_path / "s.db")
        return
    with fresh_database() as url:
        yield url


def _script(tmp_path: Path) -> str:
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}
    rules = [{"match": ".", "replies": [call, call, {"text": "done"}]}]
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": rules, "chunk_delay_ms": 0}))
    return f"scripted:{path}"


def _count_units(rt: Runtime) -> Counter[str]:
    """`_count_units_of` the runtime's store."""
    return _count_units_of(rt.store)


def _count_units_of(store: object) -> Counter[str]:
    """Count the units the store's backend opens, as 'read NAME' / 'write NAME' where NAME is
    the store function that opened it (a spy on the real backend)."""
    import sys

    units: Counter[str] = Counter()
    backend: Any = store.backend  # type: ignore[attr-defined]
    opened = backend.transaction

    def counted(*, write: bool, batched: bool = False) -> AbstractContextManager[Any]:
        frame = sys._getframe(1)
        name = ""
        while frame is not None:  # the outermost store function of this call
            if "/wakeful/store/" in frame.f_code.co_filename:
                name = frame.f_code.co_name
            frame = frame.f_back  # type: ignore[assignment]
        units[f"{'write' if write else 'read'} {name}"] += 1
        return opened(write=write, batched=batched)

    backend.transaction = counted
    return units


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_three_step_drive_costs_six_writes_and_one_read(tmp_path: Path, backend: str):
    """Writes: the claim with the delivery and the first delta, the first receipt, three step
    boundaries (each reply with its results and the next receipt), and the turn's end with
    the release and the drain's last look at the inbox (a read and two writes before). Reads:
    the context (row, facts, `/mcp` state, the instruction state the first delta is planned
    from, the newest event id the interrupt watcher starts from: five reads before, one of
    them `resume`'s own look at the row). The turn's opening with the first history read is
    read last in the claim's unit (two reads of their own before, then one). The turn's first
    step renders the first delta the claim's unit wrote without reading it back (four reads
    and the instruction state before)."""
    config = Config(execution=ExecutionConfig(poll_interval_ms=60_000))  # no watcher polls
    with _url(backend, tmp_path) as url:
        rt = Runtime(url, model=_script(tmp_path), workspace=tmp_path, config=config)
        sid = rt.send("work", resume=False).session_id
        units = _count_units(rt)
        [turn] = await rt.resume(sid)
        units = Counter(units)  # (closing the runtime is no part of the drive)
        await rt.aclose()
        assert turn.outcome == "completed" and turn.steps == 3
        writes = sum(n for k, n in units.items() if k.startswith("write"))
        reads = sum(n for k, n in units.items() if k.startswith("read"))
        assert writes <= 6, units
        assert reads <= 1, units
        assert units["read session_read"] == 1, units  # (the context's)
        instruction_reads = {"live_compactions", "get_blobs", "events", "plain_events"}
        assert not [k for k in units if k.split()[1] in instruction_reads], units


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_drains_last_promotion_delivers_or_releases_in_one_unit(tmp_path: Path, backend: str):
    """`promote_or_release`: a deliverable item starts the next turn under the claim it
    keeps; with nothing deliverable the claim is released in that unit, and an item pending
    then is reported (the coordinator drives it again)."""
    from wakeful.events import SessionCreated, TurnEnded
    from wakeful.execution._writes import promote_or_release, start_drain
    from wakeful.store import fence, open_store

    with _url(backend, tmp_path) as url:
        store = open_store(url)
        store.admit("ses_a", "i1", "user", {"text": "one"}, create=SessionCreated(agent="a"))
        start = start_drain(store, "ses_a", "host/1/x", 60_000, start_turn="t1")
        assert start.claim is not None and [d.item.input_id for d in start.delivered] == ["i1"]
        token = fence(start.claim)
        store.admit("ses_a", "i2", "user", {"text": "two"})
        store.append("ses_a", [TurnEnded(turn_id="t1", outcome="completed")], token)
        units = _count_units_of(store)
        idle = promote_or_release(store, "ses_a", token, start_turn="t2")
        assert [d.item.input_id for d in idle.delivered] == ["i2"] and not idle.released
        assert store.current_claim("ses_a") == start.claim
        store.append("ses_a", [TurnEnded(turn_id="t2", outcome="completed")], token)
        idle = promote_or_release(store, "ses_a", token, start_turn="t3")
        assert (idle.delivered, idle.released, idle.pending) == ([], True, False)
        assert store.current_claim("ses_a") is None
        # one write unit each, no read of its own (the checks above read through the store)
        assert units["write session_write"] == 2 and units["read session_read"] == 0, units
        assert [t.turn_id for t in store.turns("ses_a")] == ["t1", "t2"]
        store.close()


@pytest.mark.postgres
def test_a_workers_first_delivery_is_two_round_trips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A reserved session's first delivery (`promote_or_release` with nothing written first,
    its facts wanted): the lock with the facts, the pending items, the claim and the ids, then
    the commit; the facts read after the promotion were a round trip of their own (3)."""
    from wakeful.events import SessionCreated
    from wakeful.execution._refresh import KnownFacts
    from wakeful.execution._writes import promote_or_release
    from wakeful.store import SessionFacts, fence, open_store
    from wakeful.store._pgwire import Wire

    syncs: list[int] = []
    sync = Wire.sync

    def counted(wire: Wire) -> None:
        syncs.append(1)
        sync(wire)

    with _url("postgres", tmp_path) as url:
        store = open_store(url)
        store.admit("ses_a", "i1", "user", {"text": "one"}, create=SessionCreated(agent="a"))
        claim = store.claims.acquire("ses_a", "host/1/x", 60_000)
        assert claim is not None
        known = KnownFacts(SessionFacts(None, None))
        monkeypatch.setattr(Wire, "sync", counted)
        idle = promote_or_release(store, "ses_a", fence(claim), start_turn="t1", known=known)
        monkeypatch.undo()
        assert [d.item.input_id for d in idle.delivered] == ["i1"]
        assert known.facts.agent == "a"
        assert len(syncs) == 2, len(syncs)
        store.close()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_first_delta_the_turns_sync_plans_goes_with_the_steps_receipt(
    tmp_path: Path, backend: str
):
    """A session without instructions yet (a recovered one: its claim was taken over, no
    delivery wrote a prelude): the port's sync renders the sources at once and hands the
    first delta to the port, whose next write (the receipt) carries it first; a write of
    its own before. The history read with the turn's opening still serves the first step."""
    from wakeful.events import MessageAdded, SessionCreated
    from wakeful.execution._port import StorePort
    from wakeful.instructions import Source
    from wakeful.messages import Message, TextBlock
    from wakeful.store import fence, open_store

    with _url(backend, tmp_path) as url:
        store = open_store(url)
        store.admit("ses_a", "i1", "user", {"text": "hi"}, create=SessionCreated(agent="a"))
        claim = store.claims.acquire("ses_a", "host/1/x", 60_000)
        assert claim is not None
        sources = [Source("AGENTS.md", lambda: "be brief")]
        port = StorePort(store, "ses_a", fence(claim), sources=sources)
        await port.approvals()
        units = _count_units_of(store)
        base = await port.instructions(0)
        assert base.values == [("AGENTS.md", "be brief")]
        assert await port.messages_after(0) == []  # read with the opening, before the sync
        assert [k for k in units if k.startswith("write")] == [], units
        said = Message(role="assistant", blocks=(TextBlock(text="receipt stand-in"),))
        await port.commit([MessageAdded(message=said)])
        assert [k for k in units if k.startswith("write")] == ["write append"], units
        types = [e.type for e in store.events("ses_a")]
        assert types[-2:] == ["instructions.updated", "message.added"], types
        assert [k for k in units if k.startswith("read session_read")] == [], units
        store.close()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_workers_drive_renders_the_first_delta_its_delivery_wrote(
    tmp_path: Path, backend: str
):
    """A worker drives a session it reserved: its first delivery (the drain's idle promotion,
    `promote_or_release`) writes the session's first delta, and the turn's first step renders
    it without reading it back (the rewinds, the live compactions, the epoch's first delta and
    its blobs: four reads, and the instruction state, before)."""
    from wakeful.execution import run_worker

    config = Config(execution=ExecutionConfig(poll_interval_ms=50))
    with _url(backend, tmp_path) as url:
        rt = Runtime(url, model=_script(tmp_path), workspace=tmp_path, config=config)
        sid = rt.send("work", resume=False).session_id
        units = _count_units(rt)
        stats = await run_worker(rt, once=True)
        units = Counter(units)
        assert stats.turns == 1
        assert [t.status for t in rt.store.turns(sid)] == ["completed"]
        await rt.aclose()
        instruction_reads = {"live_compactions", "get_blobs", "events", "plain_events"}
        assert not [k for k in units if k.split()[1] in instruction_reads], units
        assert units["read instruction_state"] == 0, units  # planned from the context's read


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_turns_end_goes_with_the_drains_last_unit_and_is_published_after_it(
    tmp_path: Path, backend: str
):
    """A completed turn's end is written by the drain's next unit (its release here, the next
    delivery when one is pending), not by a commit of its own; the `turn_end` live event (and
    so the hook) comes after that unit committed: whoever reads the store on it finds the
    turn ended, and the second input's turn started after it."""
    config = Config(execution=ExecutionConfig(poll_interval_ms=60_000))
    with _url(backend, tmp_path) as url:
        rt = Runtime(url, model=_script(tmp_path), workspace=tmp_path, config=config)
        sid = rt.send("one", resume=False).session_id
        rt.send("two", session_id=sid, delivery="queue", resume=False)
        seen: list[list[str]] = []

        def listener(event: Any) -> None:
            if event.kind == "turn_end":
                seen.append([t.status for t in rt.store.turns(sid)])

        rt.listener = listener
        appended: list[str] = []
        append = rt.store.append

        def spy(session_id: str, events: Any, *args: Any, **kw: Any) -> Any:
            appended.extend(e.type for e in events)
            return append(session_id, events, *args, **kw)

        rt.store.append = spy  # type: ignore[method-assign]
        first, second = await rt.resume(sid)
        await rt.aclose()
        assert (first.outcome, second.outcome) == ("completed", "completed")
        assert seen == [["completed", "running"], ["completed", "completed"]]
        assert "turn.ended" not in appended, appended  # no end written alone
        store = open_store(url)
        types = [e.type for e in store.events(sid, types=["turn.ended", "turn.started"])]
        assert types == ["turn.started", "turn.ended"] * 2
        assert store.current_claim(sid) is None
        store.close()


@pytest.mark.postgres
async def test_a_three_step_drive_on_postgres_costs_thirteen_round_trips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Round trips, counted as the wire's Syncs in the driving process (18 before the claim
    check and the event ids went with a unit's lock, 29 before that): the context's read (1);
    the claim's unit (the lock with the facts, the pending items, the claim, a running call
    and the ids its events take; the commit, with the turn's opening answered by it: 2); the
    first receipt (the lock with the claim and its ids; the commit: 2); three step boundaries
    (the lock with the facts, the pending items, the claim and the ids; the commit with the
    next history: 2 each); the turn's end with the release (2, the release's answer and the
    inbox look in the commit's). The interrupt watcher reads nothing: it listens, and owes a
    read only a poll interval after it began (a minute here). Statements sent, BEGIN and
    COMMIT included: 94 (112 before a transcript read was one statement, an append's rows
    one statement per table, its session row one update and a delivery's settling of a
    revert one statement)."""
    from wakeful.store._pgwire import Wire

    syncs: list[int] = []
    sent: list[str] = []
    sync, send = Wire.sync, Wire.send

    def counted(wire: Wire) -> None:
        syncs.append(1)
        sync(wire)

    def sending(wire: Wire, sql: str, params: Any = ()) -> Any:
        sent.append(sql)
        return send(wire, sql, params)

    config = Config(execution=ExecutionConfig(poll_interval_ms=60_000))  # no watcher polls
    with _url("postgres", tmp_path) as url:
        rt = Runtime(url, model=_script(tmp_path), workspace=tmp_path, config=config)
        sid = rt.send("work", resume=False).session_id
        monkeypatch.setattr(Wire, "sync", counted)
        monkeypatch.setattr(Wire, "send", sending)
        [turn] = await rt.resume(sid)
        monkeypatch.undo()
        await rt.aclose()
        assert turn.outcome == "completed" and turn.steps == 3
        assert len(syncs) <= 13, len(syncs)
        assert len(sent) <= 94, len(sent)
