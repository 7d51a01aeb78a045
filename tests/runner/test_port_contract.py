"""One contract suite for every session port: the in-memory one (`MemoryPort`) and the
store-backed one the drain opens (`StorePort`) on SQLite and PostgreSQL.

Each backend is a `Harness`: the port, plus what another process would do to the session
(admit an input, take the claim over) and what the store holds afterwards (the events written
through the port, a blob by digest). The tests only use the harness: no backend checks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.pg import fresh_database
from wakeful.clock import FakeClock
from wakeful.errors import ClaimLostError
from wakeful.events import (
    ApprovalRequested,
    CompactionEnded,
    MessageAdded,
    ReceiptRecorded,
    RetryCleared,
    RetryScheduled,
    SessionCreated,
    SessionEvent,
    TurnEnded,
    TurnStarted,
    UsageRecorded,
    WorkStateUpdated,
)
from wakeful.execution._port import PortHooks, StorePort
from wakeful.instructions import Source
from wakeful.messages import Message, TextBlock, ToolCallBlock
from wakeful.providers import Usage
from wakeful.runner import LiveEvent, MemoryPort, SessionPort, TurnResult
from wakeful.runner._prompt import Section, make_receipt, section_blobs
from wakeful.store import fence, open_store

SID = "ses_port_contract"
LEASE_MS = 1_000


@dataclass
class Harness:
    port: SessionPort
    admit: Callable[[str], None]  # another process admits a steer
    take_over: Callable[[], None]  # another driver takes the claim over
    written: Callable[[], list[SessionEvent]]  # events written through the port, in order
    blob: Callable[[str], bytes | None]
    live: list[LiveEvent] = field(default_factory=list)
    start: int = 0  # the newest seq before the test

    async def transcript(self) -> list[str]:
        """The texts of the messages stored since the test began, through the port."""
        return [m.text() for _, m in await self.port.messages_after(self.start)]


def memory_harness(sources: list[Source]) -> Harness:
    live: list[LiveEvent] = []
    port = MemoryPort(SID, sources=sources, listener=live.append)
    return Harness(
        port,
        lambda text: (port.admit(text), None)[1],
        port.take_over,
        lambda: [s.event for s in port.log],
        port.blobs.get,
        live,
    )


def store_harness(url: str, sources: list[Source]) -> Iterator[Harness]:
    clock = FakeClock()
    store = open_store(url, clock=clock)
    store.admit(SID, "in_0", "user", {"text": "hello"}, create=SessionCreated(agent="build"))
    store.promote(SID, idle=True)  # the first input is in the transcript before the turn
    claim = store.claims.acquire(SID, "host/1/a", LEASE_MS)
    assert claim is not None
    start = store.high_water(SID)
    live: list[LiveEvent] = []
    port = StorePort(store, SID, fence(claim), sources=sources, hooks=PortHooks(live.append))

    def take_over() -> None:
        clock.advance(LEASE_MS * 2)
        assert store.claims.acquire(SID, "host/2/b", LEASE_MS) is not None

    def blob(digest: str) -> bytes | None:
        try:
            return store.get_blob(digest)
        except Exception:
            return None

    yield Harness(
        port,
        lambda text: (store.admit(SID, None, "user", {"text": text}), None)[1],
        take_over,
        lambda: [e.event for e in store.events(SID, after=start)],
        blob,
        live,
        start,
    )
    store.close()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    (tmp_path / "AGENTS.md").write_text("be brief")
    sources = [Source("AGENTS.md", lambda: (tmp_path / "AGENTS.md").read_text())]
    if request.param == "memory":
        yield memory_harness(sources)
    elif request.param == "sqlite":
        yield from store_harness(str(tmp_path / "s.db"), sources)
    else:
        with fresh_database() as url:
            yield from store_harness(url, sources)


def said(text: str) -> MessageAdded:
    return MessageAdded(message=Message(role="assistant", blocks=(TextBlock(text=text),)))


def texts(events: list[SessionEvent]) -> list[str]:
    return [e.message.text() for e in events if isinstance(e, MessageAdded)]


async def test_a_commit_is_read_back_in_order_with_its_seqs(harness: Harness):
    port = harness.port
    before = [seq for seq, _ in await port.messages_after(0)]
    await port.commit([said("one"), said("two")])
    after = await port.messages_after(max(before, default=0))
    assert [m.text() for _, m in after] == ["one", "two"]
    first_seq = after[0][0]
    assert [m.text() for _, m in await port.messages_after(first_seq)] == ["two"]
    assert await port.message(after[1][1].id) == after[1][1]


async def test_held_events_go_first_in_the_next_write_and_not_before(harness: Harness):
    port = harness.port
    port.hold([said("held reply")])
    assert port.holding and texts(harness.written()) == []
    await port.commit([said("result")])
    assert not port.holding
    assert texts(harness.written()) == ["held reply", "result"]


async def test_a_failed_write_keeps_the_held_events_and_writes_nothing(harness: Harness):
    port = harness.port
    port.hold([said("held reply")])
    harness.take_over()
    with pytest.raises(ClaimLostError):
        await port.commit([said("result")])
    assert port.holding and texts(harness.written()) == []


async def test_promoting_steers_writes_the_held_reply_with_the_delivery(harness: Harness):
    port = harness.port
    port.hold([said("final answer")])
    harness.admit("and also this")
    delivered = await port.promote_steers(0)
    assert [d.message.text() for d in delivered if d.message] == ["and also this"]
    assert await harness.transcript() == ["final answer", "and also this"]
    assert await port.pending() == []


async def test_promoting_with_nothing_pending_still_writes_the_held_reply(harness: Harness):
    port = harness.port
    port.hold([said("final answer")])
    assert await port.promote_steers(0) == []
    assert texts(harness.written()) == ["final answer"] and not port.holding


async def test_promoting_with_nothing_held_or_pending_writes_nothing(harness: Harness):
    assert await harness.port.promote_steers(0) == []
    assert harness.written() == []


async def test_the_history_read_after_a_step_boundary_is_never_stale(harness: Harness):
    # The store port reads the next history ahead during a step boundary's promotion (one
    # thread hop instead of two): whatever is written after it must still be read.
    port = harness.port
    seen = await port.messages_after(harness.start)
    last = seen[-1][0] if seen else harness.start
    port.hold([said("tool result")])
    harness.admit("a steer")
    await port.promote_steers(0)
    await port.commit([said("written after the boundary")])
    after = await port.messages_after(last)
    assert [m.text() for _, m in after] == [
        "tool result",
        "a steer",
        "written after the boundary",
    ]
    await port.promote_steers(0)
    assert await port.messages_after(after[-1][0]) == []
    await port.promote_steers(0)
    port.hold([said("final")])
    end = TurnEnded(turn_id="t", outcome="completed")
    await port.end(end, TurnResult("t", "completed", 1, Usage(0, 0)))
    assert [m.text() for _, m in await port.messages_after(after[-1][0])] == ["final"]


def ahead(receipt_id: str) -> tuple[ReceiptRecorded, dict[str, bytes]]:
    """A next step's receipt built ahead of a step boundary, with its section blobs."""
    sections = [Section("system.agent", "agent:build", f"built ahead as {receipt_id}")]
    receipt = make_receipt(
        sections, [], "0" * 64, receipt_id=receipt_id, turn_id="t", step=2, attempt=1, model="m"
    )
    return receipt, section_blobs(sections)


def receipt_ids(events: list[SessionEvent]) -> list[str]:
    return [e.receipt_id for e in events if isinstance(e, ReceiptRecorded)]


async def test_a_boundary_writes_the_next_receipt_only_when_nothing_is_delivered(
    harness: Harness,
):
    port = harness.port
    await port.instructions(0)  # the sources as the step read them
    receipt, blobs = ahead("rcp_a")
    port.hold([said("tool result")])
    assert await port.promote_steers_then(0, [receipt], blobs) == ([], True)
    written = harness.written()
    assert texts(written) == ["tool result"] and written[-1] == receipt  # last, in one write
    assert [harness.blob(d) for d in blobs] == list(blobs.values())
    port.hold([said("second result")])
    harness.admit("a steer")
    other, other_blobs = ahead("rcp_b")
    delivered, wrote = await port.promote_steers_then(0, [other], other_blobs)
    assert [d.message.text() for d in delivered if d.message] == ["a steer"] and not wrote
    assert await harness.transcript() == ["tool result", "second result", "a steer"]
    assert receipt_ids(harness.written()) == ["rcp_a"]
    assert [harness.blob(d) for d in other_blobs] == [None]
    assert await port.promote_steers_then(0, [other], other_blobs) == ([], True)  # no hold
    assert receipt_ids(harness.written()) == ["rcp_a", "rcp_b"]


def test_a_boundary_after_an_instruction_change_does_not_write_the_next_receipt(tmp_path: Path):
    # StorePort only (a memory port records no deltas): a source changed after the step read
    # it, so the next step is built after the delta, not ahead; nothing delivered, no delta
    # written at the boundary (it goes before a delivery, or with the next step's read).
    import asyncio

    agents = tmp_path / "AGENTS.md"
    agents.write_text("be brief")
    harnesses = store_harness(str(tmp_path / "s.db"), [Source("AGENTS.md", agents.read_text)])
    harness = next(harnesses)
    port = harness.port

    async def boundary() -> None:
        assert (await port.instructions(0)).values == [("AGENTS.md", "be brief")]
        assert port.instructions_unchanged(0) is not None
        agents.write_text("be thorough")
        assert port.instructions_unchanged(0) is None
        receipt, blobs = ahead("rcp_a")
        port.hold([said("tool result")])
        assert await port.promote_steers_then(0, [receipt], blobs) == ([], False)
        assert texts(harness.written()) == ["tool result"]
        assert receipt_ids(harness.written()) == []

    asyncio.run(boundary())
    harnesses.close()


async def test_the_end_goes_after_the_held_reply(harness: Harness):
    port = harness.port
    await port.commit([TurnStarted(turn_id="turn_1", input_ids=())])
    port.hold([said("final answer")])
    end = TurnEnded(turn_id="turn_1", outcome="completed")
    await port.end(end, TurnResult("turn_1", "completed", 1, Usage(0, 0)))
    written = harness.written()
    assert texts(written) == ["final answer"] and written[-1] == end


async def test_blobs_are_stored_once_and_readable_by_digest(harness: Harness):
    data = b"a section's text"
    digest = hashlib.sha256(data).hexdigest()
    await harness.port.commit([], {digest: data})
    await harness.port.commit([], {digest: data})  # already stored: nothing to send
    assert harness.blob(digest) == data
    assert harness.written() == []


async def test_a_blob_is_read_back_through_the_port(harness: Harness):
    data = b"media bytes"
    digest = hashlib.sha256(data).hexdigest()
    assert await harness.port.blob(digest) is None
    await harness.port.commit([], {digest: data})
    assert await harness.port.blob(digest) == data


async def test_a_dropped_held_reply_is_never_written(harness: Harness):
    port = harness.port
    port.hold([said("a reply whose write failed")])
    port.drop_held()
    assert not port.holding
    await port.commit([said("asked again")])
    assert texts(harness.written()) == ["asked again"]


async def test_a_lost_claim_fences_every_write(harness: Harness):
    harness.take_over()
    with pytest.raises(ClaimLostError):
        await harness.port.commit([said("late")])
    with pytest.raises(ClaimLostError):
        await harness.port.end(
            TurnEnded(turn_id="t", outcome="completed"),
            TurnResult("t", "completed", 0, Usage(0, 0)),
        )
    assert harness.written() == []


async def test_retry_state_is_set_and_cleared(harness: Harness):
    port = harness.port
    assert await port.retry_state() is None
    await port.commit(
        [
            RetryScheduled(
                turn_id="t",
                step=1,
                attempt=2,
                deadline_ms=5,
                error_kind="rate_limit",
                error="slow down",
            )
        ]
    )
    state = await port.retry_state()
    assert state is not None and (state.attempt, state.deadline_ms) == (2, 5)
    await port.commit([RetryCleared()])
    assert await port.retry_state() is None


async def test_work_state_is_the_newest_value_of_each_kind(harness: Harness):
    port = harness.port
    await port.commit(
        [WorkStateUpdated(kind="goal", value="a"), WorkStateUpdated(kind="goal", value="b")]
    )
    await port.commit([WorkStateUpdated(kind="plan", value=["x"])])
    assert await port.work_state() == {"goal": "b", "plan": ["x"]}


async def test_recent_usage_and_the_compaction_boundary(harness: Harness):
    port = harness.port
    assert await port.compaction_boundary() == 0
    await port.commit([said("reply"), UsageRecorded(input_tokens=7, output_tokens=1)])
    usage = await port.recent_usage(8)
    assert [u.input_tokens for _, u in usage] == [7]
    [(seq, _)] = usage
    summary = Message(role="user", blocks=(TextBlock(text="summary"),))
    await port.commit(
        [
            MessageAdded(message=summary),
            CompactionEnded(summary_message_id=summary.id, through_seq=seq),
        ]
    )
    assert await port.compaction_boundary() == seq


async def test_approvals_read_the_open_step(harness: Harness):
    port = harness.port
    call = ToolCallBlock(id="call_1", name="shell", input={"command": "ls"})
    reply = Message(role="assistant", blocks=(call,))
    await port.commit(
        [
            MessageAdded(message=reply),
            ApprovalRequested(
                call_id="call_1",
                message_id=reply.id,
                name="shell",
                input={"command": "ls"},
                preview="$ ls",
            ),
        ]
    )
    log = await port.approvals()
    assert log.step is not None and [r.call_id for r in log.step.pending] == ["call_1"]


async def test_reads_after_a_turns_opening_see_the_ports_own_writes(harness: Harness):
    """The store port reads a turn's opening reads with `approvals` (one store call) and
    hands them out once; a write of the port in between makes them read the store again."""
    port = harness.port
    assert (await port.approvals()).step is None
    summary = Message(role="user", blocks=(TextBlock(text="summary"),))
    await port.commit(
        [
            WorkStateUpdated(kind="goal", value="g"),
            RetryScheduled(
                turn_id="t", step=1, attempt=2, deadline_ms=5, error_kind="x", error="e"
            ),
            said("reply"),
            UsageRecorded(input_tokens=7),
            MessageAdded(message=summary),
            CompactionEnded(summary_message_id=summary.id, through_seq=1),
        ]
    )
    assert await port.work_state() == {"goal": "g"}
    state = await port.retry_state()
    assert state is not None and state.attempt == 2
    assert [u.input_tokens for _, u in await port.recent_usage(64)] == [7]
    assert await port.compaction_boundary() == 1
    # Handed out once: the next turn's opening reads again, the second read goes to the store.
    await port.approvals()
    assert await port.work_state() == await port.work_state() == {"goal": "g"}


async def test_instructions_render_the_sources(harness: Harness):
    base = await harness.port.instructions(0)
    assert ("AGENTS.md", "be brief") in base.values


async def test_live_events_reach_the_listener_and_are_not_stored(harness: Harness):
    harness.port.publish("text", {"text": "hi"})
    assert [(e.session_id, e.kind, e.data) for e in harness.live] == [(SID, "text", {"text": "hi"})]
    assert harness.written() == []


def test_a_step_boundary_reads_the_next_history_in_its_own_thread_hop(tmp_path: Path):
    # StorePort only: after `promote_steers`, the history read the step makes next is served
    # from the read made inside the promotion's unit (a step costs one hop and, on PostgreSQL,
    # one transaction fewer: issue 36), and equals a fresh read.
    import asyncio

    harnesses = store_harness(str(tmp_path / "s.db"), [])
    harness = next(harnesses)
    port = harness.port
    assert isinstance(port, StorePort)
    reads: list[int] = []
    read = port.store.messages_with_seq

    def counted(session_id: str, after: int = 0) -> list[tuple[int, Message]]:
        reads.append(after)
        return read(session_id, after)

    port.store.messages_with_seq = counted  # type: ignore[method-assign]  # a spy on a real store

    async def step() -> None:
        seen = await port.messages_after(0)  # the first input, "hello"
        port.hold([said("result")])
        harness.admit("steer")
        await port.promote_steers(0)
        assert reads == [0]  # the next read ran inside the promotion's unit, not on its own
        ahead = await port.messages_after(seen[-1][0])
        assert reads == [0] and ahead == read(SID, seen[-1][0])
        assert [m.text() for _, m in ahead] == ["result", "steer"]

    asyncio.run(step())
    harnesses.close()
