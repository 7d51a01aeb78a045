"""Turns run against the in-memory session port: the runner on its own, no store.

These check what the runner does with its port (the order and grouping of its writes), which
the store-backed tests can only see after the fact.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from wakeful.config import RetryConfig
from wakeful.errors import StoreUnavailableError
from wakeful.events import (
    InputDelivered,
    MessageAdded,
    ReceiptRecorded,
    SessionEvent,
    TurnEnded,
    UsageRecorded,
)
from wakeful.messages import Message
from wakeful.runner import (
    BUILTIN_AGENTS,
    LiveEvent,
    MemoryPort,
    RunContext,
    SharedProviders,
    ToolContext,
    TurnResult,
    TurnRunner,
    builtin_tools,
)
from wakeful.store import Delivered, InboxItem


def context(tmp_path: Path, replies: list[dict], providers: SharedProviders) -> RunContext:
    path = tmp_path / "script.json"
    rules = [{"match": ".", "replies": replies}]
    path.write_text(json.dumps({"rules": rules, "chunk_chars": 4}))
    agent = BUILTIN_AGENTS["build"]
    tools = {n: t for n, t in builtin_tools().items() if n in agent.tools}
    return RunContext(
        providers=providers,
        model_spec=f"scripted:{path}",
        agent=agent,
        tools=tools,
        tool_context=ToolContext(workspace=tmp_path, session_id="ses_memory"),
    )


async def test_the_final_reply_commits_with_the_steer_that_arrived_while_it_streamed(
    tmp_path: Path,
):
    providers = SharedProviders()
    steered: list[str] = []

    def listener(ev: LiveEvent) -> None:
        if ev.kind == "text" and not steered:  # another process admits while the reply streams
            steered.append(port.admit("one more thing").input_id)

    port = MemoryPort(listener=listener)
    port.admit("hello")
    await port.promote_steers(0)
    ctx = context(tmp_path, [{"text": "first answer here"}, {"text": "second"}], providers)
    result = await TurnRunner(ctx, port).run(["in_0"])
    await providers.aclose()
    assert result.outcome == "completed" and result.steps == 2
    [write] = [w for w in port.writes if any(isinstance(e, InputDelivered) for e in w)][1:]
    reply, delivered = write[0], [e for e in write if isinstance(e, InputDelivered)]
    assert isinstance(reply, MessageAdded) and reply.message.text() == "first answer here"
    assert [d.input_id for d in delivered] == steered  # the reply and the steer: one write


async def test_the_last_reply_is_written_at_the_step_boundary_before_the_end(tmp_path: Path):
    providers = SharedProviders()
    port = MemoryPort()
    port.admit("hello")
    await port.promote_steers(0)
    ctx = context(tmp_path, [{"text": "done"}], providers)
    result = await TurnRunner(ctx, port).run(["in_0"])
    await providers.aclose()
    assert result.outcome == "completed" and result.final_text == "done"
    kinds = [[type(e).__name__ for e in w] for w in port.writes[1:]]
    assert kinds == [
        ["TurnStarted"],
        ["ReceiptRecorded"],
        ["MessageAdded", "UsageRecorded"],  # the promotion found nothing: the reply alone
        ["TurnEnded"],  # durable before `turn.ending`: a crash there needs no new request
    ]


async def test_section_blobs_are_sent_once_per_port(tmp_path: Path):
    providers = SharedProviders()
    port = MemoryPort()
    port.admit("hello")
    await port.promote_steers(0)
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "x"}}]}
    ctx = context(tmp_path, [call, call, {"text": "done"}], providers)
    result = await TurnRunner(ctx, port).run(["in_0"])
    await providers.aclose()
    assert result.steps == 3
    receipts = [s.event for s in port.log if isinstance(s.event, ReceiptRecorded)]
    referenced = [digest for r in receipts for _id, _source, digest in r.sections]
    assert len(receipts) == 3 and set(referenced) <= set(port.blobs)
    assert port.blob_writes == len(set(referenced)) < len(referenced)  # each content once


class FlakyPort(MemoryPort):
    """A port whose store drops out: the chosen calls of `promote_steers`, `pending` and `end`
    (counted from 1) raise a retryable `StoreUnavailableError`, as a lost connection does."""

    def __init__(
        self, promote_fails: set[int] = frozenset(), pending_fails: set[int] = frozenset()
    ):
        super().__init__()
        self.promote_fails, self.pending_fails = promote_fails, pending_fails
        self.end_fails: set[int] = set()
        self.promotes = self.pendings = self.ends = 0

    async def promote_steers_then(
        self, epoch: int, then: Sequence[SessionEvent], then_blobs: Mapping[str, bytes]
    ) -> tuple[list[Delivered], bool]:
        self.promotes += 1
        if self.promotes in self.promote_fails:
            raise StoreUnavailableError("PostgreSQL at x failed: terminating connection")
        return await super().promote_steers_then(epoch, then, then_blobs)

    async def end(self, end: TurnEnded, result: TurnResult) -> None:
        self.ends += 1
        if self.ends in self.end_fails:
            raise StoreUnavailableError("PostgreSQL at x failed: consuming input failed")
        await super().end(end, result)

    async def pending(self) -> list[InboxItem]:
        self.pendings += 1
        if self.pendings in self.pending_fails:
            raise StoreUnavailableError("PostgreSQL at x failed: terminating connection")
        return await super().pending()


async def test_a_store_fault_between_two_steps_is_waited_out(tmp_path: Path):
    """The delivery at the boundary after a tool step fails twice (the torture run saw turns
    end `failed` this way when a connection dropped): the turn waits and goes on."""
    providers = SharedProviders()
    port = FlakyPort(promote_fails={2, 3})  # 1: before the turn; 2: after the tool step
    port.admit("hello")
    await port.promote_steers(0)
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "x"}}]}
    ctx = context(tmp_path, [call, {"text": "done"}], providers)
    result = await TurnRunner(ctx, port).run(["in_0"])
    await providers.aclose()
    assert (result.outcome, result.final_text, result.steps) == ("completed", "done", 2)
    assert port.promotes == 5  # 2 failed, 4 delivered, 5 wrote the final reply


async def test_a_store_fault_while_a_retry_waits_does_not_end_the_turn(tmp_path: Path):
    """A retry's wait looks for steers; that look failing is no reason to fail the turn."""
    providers = SharedProviders()
    port = FlakyPort(pending_fails={1, 2})
    port.admit("hello")
    await port.promote_steers(0)
    error = {"kind": "overloaded", "times": 1}
    ctx = context(tmp_path, [{"text": "done", "error": error}], providers)
    ctx = replace(ctx, retry=RetryConfig(initial_delay_ms=50, max_delay_ms=50, poll_interval_ms=5))
    result = await TurnRunner(ctx, port).run(["in_0"])
    await providers.aclose()
    assert (result.outcome, result.final_text) == ("completed", "done")
    assert port.pendings > 2  # the wait looked again after the failed looks


async def test_a_store_fault_writing_the_end_does_not_change_the_outcome(tmp_path: Path):
    """The turn's end fails to commit once: it is written again, still `completed` (the torture
    run saw a completed turn recorded `failed` by the second try)."""
    providers = SharedProviders()
    port = FlakyPort()
    port.end_fails = {1}
    port.admit("hello")
    await port.promote_steers(0)
    ctx = context(tmp_path, [{"text": "done"}], providers)
    result = await TurnRunner(ctx, port).run(["in_0"])
    await providers.aclose()
    assert (result.outcome, result.final_text, port.ends) == ("completed", "done", 2)
    [ended] = [s.event for s in port.log if isinstance(s.event, TurnEnded)]
    assert ended.outcome == "completed"


class CopyingPort(MemoryPort):
    """A port whose reads hand out copies that differ from what was written (a store whose
    round trip changed a message): what was built ahead from the held objects cannot be
    trusted, and the step builds its request again from what it reads."""

    async def messages_after(self, seq: int) -> list[tuple[int, Message]]:
        found = await super().messages_after(seq)
        return [
            (n, m.model_copy(update={"metadata": {**(m.metadata or {}), "x": 1}})) for n, m in found
        ]


async def test_a_step_built_ahead_is_built_again_when_the_history_read_differs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    providers = SharedProviders()
    port = CopyingPort()
    port.admit("hello")
    await port.promote_steers(0)
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "x"}}]}
    ctx = context(tmp_path, [call, {"text": "done"}], providers)
    result = await TurnRunner(ctx, port).run(["in_0"])
    await providers.aclose()
    assert result.outcome == "completed" and result.steps == 2
    receipts = [s.event for s in port.log if isinstance(s.event, ReceiptRecorded)]
    used = {s.event.receipt_id for s in port.log if isinstance(s.event, UsageRecorded)}
    # step 2's receipt written with the boundary names a request never sent; the one sent
    # was built from the history as read, and carries the copies' ids all the same
    assert [r.step for r in receipts] == [1, 2, 2] and len(used) == 2
    assert receipts[1].receipt_id not in used and receipts[2].receipt_id in used
    assert "written ahead does not match" in caplog.text
