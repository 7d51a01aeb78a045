"""Batched recovery (`recover_batch`, `SqlStore.append_batch`): every orphan of a batch is
settled exactly once, each session's writes fenced by its own claim, and a live claim is never
taken. Both backends; two workers race over the same orphans."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path

from tests.allow import ALLOW_WRITES
from wakeful.config import Config, ExecutionConfig
from wakeful.events import (
    MessageAdded,
    SessionCreated,
    SessionEvent,
    ToolCallEnded,
    ToolCallStarted,
)
from wakeful.execution import Runtime, run_worker
from wakeful.execution._owner import host_id
from wakeful.execution._recovery import CONTINUATION, NOT_RUN_RESULT, PARTIAL_RESULT
from wakeful.execution._writes import promote_idle
from wakeful.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from wakeful.store import SqlStore, fence, open_store

from .helpers import check_session, epochs, write_script

CONFIG = Config(permissions=ALLOW_WRITES, execution=ExecutionConfig(poll_interval_ms=10))
DEAD = f"{host_id()}/{os.getpid()}/not-this-process"  # this pid, another start: a dead owner
LIVE = "another-host/1/1"  # judged by its lease only, which holds for an hour


def leave(store: SqlStore, sid: str, model: str, kind: str, owner: str = DEAD) -> None:
    """Leave `sid` as a driver that died mid-turn leaves it: `running` (a call started),
    `unstarted` (a reply whose call never started) or `answered` (a final reply, no end)."""
    created = SessionCreated(agent="build", model=model)
    store.admit(sid, None, "user", {"text": "work"}, create=created)
    claim = store.claims.acquire(sid, owner, lease_ms=3_600_000)
    assert claim is not None
    token = fence(claim)
    promote_idle(store, sid, token, start_turn=f"turn_{sid}")
    call = ToolCallBlock(id="call_0", name="goal_set", input={"goal": "g"})
    blocks = (TextBlock(text="all done"),) if kind == "answered" else (call,)
    reply = Message(id=f"msg_{sid}", role="assistant", blocks=blocks)
    events: list[SessionEvent] = [MessageAdded(message=reply, turn_id=f"turn_{sid}")]
    if kind == "running":
        events.append(
            ToolCallStarted(call_id="call_0", message_id=reply.id, name="goal_set", input={})
        )
    store.append(sid, events, token)


def orphaned(
    db_url: str, model: str, tmp_path: Path, sids: list[str]
) -> tuple[Runtime, Counter[str]]:
    """`sids` left `running` by a dead driver, and a runtime over them whose store's units
    are counted from now on (`test_step_units._count_units_of`)."""
    from .test_step_units import _count_units_of

    setup = open_store(db_url)
    for sid in sids:
        leave(setup, sid, model, "running")
    setup.close()
    rt = Runtime(db_url, model=model, workspace=tmp_path, config=CONFIG)
    return rt, _count_units_of(rt.store)


async def test_two_workers_settle_every_orphan_once_and_leave_live_claims(
    db_url: str, tmp_path: Path
):
    model = write_script(
        tmp_path / "script.json",
        [
            {
                "match": ".",
                "replies": [
                    {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]},
                    {"text": "done"},
                ],
            }
        ],
    )
    kinds = {f"ses_orphan_{n:03d}": ("running", "unstarted", "answered")[n % 3] for n in range(30)}
    live = [f"ses_live_{n}" for n in range(3)]
    setup = open_store(db_url)
    for sid, kind in kinds.items():
        leave(setup, sid, model, kind)
    for sid in live:
        leave(setup, sid, model, "running", owner=LIVE)
    held = {sid: (setup.current_claim(sid), setup.events(sid)) for sid in live}
    setup.close()

    one, two = (Runtime(db_url, model=model, workspace=tmp_path, config=CONFIG) for _ in "ab")
    stats = await asyncio.gather(
        run_worker(one, once=True, concurrency=8), run_worker(two, once=True, concurrency=8)
    )
    assert sum(s.taken_over for s in stats) == len(kinds)  # each orphan taken once
    store = one.store
    for sid, kind in kinds.items():
        check_session(store, sid)
        events = [e.event for e in store.events(sid)]
        blocks = [b for e in events if isinstance(e, MessageAdded) for b in e.message.blocks]
        texts = [b.text for b in blocks if isinstance(b, TextBlock)]
        outputs = [b.output for b in blocks if isinstance(b, ToolResultBlock)]
        ended = [e for e in events if isinstance(e, ToolCallEnded) and e.call_id == "call_0"]
        assert len(ended) == (kind == "running"), (sid, ended)
        assert outputs.count(PARTIAL_RESULT) == (kind == "running"), sid
        assert outputs.count(NOT_RUN_RESULT) == (kind == "unstarted"), sid
        assert texts.count(CONTINUATION) == (kind != "answered"), sid  # a final reply: no request
        assert [t.status for t in store.turns(sid)] == ["completed"]
        assert {e for _s, e in epochs(store, sid)} == {None, 1, 2}  # one takeover: epoch 2
        assert store.current_claim(sid) is None  # released
    for sid in live:  # never taken, never written
        claim, events = held[sid]
        assert store.current_claim(sid) == claim
        assert store.events(sid) == events
    await one.aclose()
    await two.aclose()


def test_a_batch_write_is_fenced_per_session(store: SqlStore, tmp_path: Path):
    leave(store, "ses_a", "scripted:x", "running")
    leave(store, "ses_b", "scripted:x", "running")
    taken = store.claims.take_over(
        "me/1/1", 60_000, lambda owner: owner == DEAD, local_host=host_id()
    )
    assert sorted(c.session_id for c in taken) == ["ses_a", "ses_b"]
    mine = {c.session_id: c for c in taken}
    stolen = store.claims.acquire("ses_b", "thief/1/1", 60_000, is_dead=lambda _o: True)
    assert stolen is not None and stolen.epoch == mine["ses_b"].epoch + 1
    note = [MessageAdded(message=Message(role="user", blocks=(TextBlock(text="healed"),)))]
    before = store.get_session("ses_b").last_seq
    written = store.append_batch(
        [
            ("ses_b", note, fence(mine["ses_b"])),
            ("ses_a", note, fence(mine["ses_a"])),
        ]
    )
    assert written == {"ses_a"}  # the lost claim's session is left out, the other written
    assert store.messages("ses_a")[-1].text() == "healed"
    assert store.get_session("ses_b").last_seq == before
    assert store.append_batch([("ses_a", note, fence(stolen))]) == set()  # not ses_a's claim


async def test_a_recovered_drive_reads_nothing_of_its_own(db_url: str, tmp_path: Path):
    """Issue 36 item 4: what a batch-recovered session's drive reads first (its context's row
    and facts, the instruction state its first sync plans from, its turn's opening and
    history) is read for the whole batch, so its drive opens write units only."""
    model = write_script(
        tmp_path / "script.json",
        [{"match": ".", "replies": [{"text": "done"}]}],
    )
    sids = [f"ses_orphan_{n}" for n in range(4)]
    rt, units = orphaned(db_url, model, tmp_path, sids)
    stats = await run_worker(rt, once=True, concurrency=8)
    units = Counter(units)
    assert stats.taken_over == len(sids) and stats.turns == len(sids)
    per_session = {"read session_read", "read instruction_state", "read messages_with_seq"}
    assert not [k for k in units if k in per_session], units
    polls = {"read look", "read interrupts_after", "read any_orphaned"}  # per poll interval
    reads = sum(n for k, n in units.items() if k.startswith("read") and k not in polls)
    assert reads <= 3, units  # the newest id, the batch's views and its openings
    for sid in sids:
        check_session(rt.store, sid)
        assert [t.status for t in rt.store.turns(sid)] == ["completed"]
    await rt.aclose()


async def test_only_a_recovered_drives_first_context_is_built_from_the_batch_reads(
    store: SqlStore,
):
    """The row and facts the batch read serve the drive's first context only: a later one (a
    move's rebinding, a refresh) reads the store again."""
    from wakeful.execution._coordinator import Coordinator, _Active
    from wakeful.execution._recovery import Recovered

    store.create_session("ses_a")
    with store.read("ses_a") as r:
        reads = r.drive()
    asked: list[object] = []
    coordinator = Coordinator(store, lambda sid, _interrupt, seen: asked.append(seen))  # type: ignore[arg-type, func-returns-value]
    entry = _Active(task=asyncio.current_task())  # type: ignore[arg-type]
    entry.seen_request = 0  # (the drain read the newest event id already: `_newest_of` is done)
    make = coordinator._contexts("ses_a", entry, Recovered(None, None, drive=reads))
    make()
    make()
    assert asked == [reads, None]
    coordinator._contexts("ses_a", entry, None)()
    assert asked == [reads, None, None]
