"""The turn's state machine (`runner/_turn_state.py`), transition by transition, through the
in-memory port and the store-backed port on SQLite and PostgreSQL.

The runner is given its port wrapped in `Watched`, which passes every call on and records each
write the runner asked for once it succeeded (one transaction each: what it carried, held
events first): that is where the transitions show. Ports and admissions come from the port
contract suite's harnesses, so another process's steer reaches the store as it would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_database
from tests.runner.test_port_contract import Harness, memory_harness, store_harness
from wakeful.errors import StoreUnavailableError
from wakeful.events import (
    MessageAdded,
    ReceiptRecorded,
    SessionEvent,
    TurnEnded,
    UsageRecorded,
)
from wakeful.messages import Message
from wakeful.runner import (
    BUILTIN_AGENTS,
    Interrupted,
    PermissionPolicy,
    RunContext,
    SessionPort,
    SharedProviders,
    ToolContext,
    TurnResult,
    TurnRunner,
    builtin_tools,
)
from wakeful.store import Delivered

GOAL = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}  # a read-only step
WRITE = {"tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "x"}}]}


@dataclass
class Write:
    """One write the runner asked its port for: `commit`, `promote` (a step boundary) or
    `end`; the types of the events it carried (held ones first; a promotion's own events are
    the store's), the inputs it delivered, and the receipt it carried last (`then`)."""

    kind: str
    types: list[str]
    delivered: list[str] = field(default_factory=list)
    then: list[ReceiptRecorded] = field(default_factory=list)


class Watched:
    """A session port passing every call to `inner` and recording the runner's writes
    (`Write`) once they succeeded. `on_live`: sees each live event the runner publishes;
    `fail_promotes`: the promotions (counted from 1) that fail with a transient store fault,
    as a dropped connection does, before reaching the store."""

    def __init__(
        self,
        inner: SessionPort,
        on_live: Callable[[str], None] = lambda kind: None,
        fail_promotes: frozenset[int] = frozenset(),
    ) -> None:
        self.inner, self.on_live, self.fail_promotes = inner, on_live, fail_promotes
        self.writes: list[Write] = []
        self.live: list[str] = []  # the kinds of live events published, in order
        self.promotes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _held(self) -> list[str]:
        return [e.type for e in self.inner.held]

    async def commit(
        self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes] | None = None
    ) -> None:
        held = self._held()
        await self.inner.commit(events, blobs)
        self.writes.append(Write("commit", [*held, *(e.type for e in events)]))

    async def recommit(
        self, events: Sequence[SessionEvent], blobs: Mapping[str, bytes] | None = None
    ) -> None:
        held = self._held()
        await self.inner.recommit(events, blobs)
        self.writes.append(Write("commit", [*held, *(e.type for e in events)]))

    async def promote_steers_then(
        self, epoch: int, then: Sequence[SessionEvent], then_blobs: Mapping[str, bytes]
    ) -> tuple[list[Delivered], bool]:
        self.promotes += 1
        if self.promotes in self.fail_promotes:
            raise StoreUnavailableError("PostgreSQL at x failed: terminating connection")
        held = self._held()
        delivered, wrote = await self.inner.promote_steers_then(epoch, then, then_blobs)
        receipts = [e for e in then if isinstance(e, ReceiptRecorded)] if wrote else []
        ids = [d.item.input_id for d in delivered]
        self.writes.append(Write("promote", held, ids, receipts))
        return delivered, wrote

    async def end(self, end: TurnEnded, result: TurnResult) -> None:
        held = self._held()
        await self.inner.end(end, result)
        self.writes.append(Write("end", [*held, end.type]))

    def publish(self, kind: Any, data: Any) -> None:
        self.inner.publish(kind, data)
        self.live.append(kind)
        self.on_live(kind)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """A port whose session holds a delivered first input ("hello"), as a turn finds it."""
    if request.param == "memory":
        made = memory_harness([])
        made.admit("hello")
        await made.port.promote_steers(0)
        everything, skip = made.written, len(made.written())
        made.written = lambda: everything()[skip:]  # what the turn wrote, as in a store
        yield made
    elif request.param == "sqlite":
        for made in store_harness(str(tmp_path / "s.db"), []):
            yield made
    else:
        with fresh_database() as url:
            for made in store_harness(url, []):
                yield made


@pytest.fixture
async def providers() -> Iterator[SharedProviders]:
    made = SharedProviders()
    yield made
    await made.aclose()


def context(
    tmp_path: Path,
    providers: SharedProviders,
    rules: list[tuple[str, list[dict[str, Any]]]],
    max_steps: int = 100,
    delay_ms: int = 0,
    **options: Any,
) -> RunContext:
    """A context on a scripted model answering by `rules` ((regex, replies), first match),
    streaming 4 characters a chunk `delay_ms` apart."""
    path = tmp_path / "script.json"
    rules_json = [{"match": m, "replies": r} for m, r in rules]
    script = {"rules": rules_json, "chunk_chars": 4, "chunk_delay_ms": delay_ms}
    path.write_text(json.dumps(script))
    agent = replace(BUILTIN_AGENTS["build"], max_steps=max_steps)
    tools = {n: t for n, t in builtin_tools().items() if n in agent.tools}
    return RunContext(
        providers=providers,
        model_spec=f"scripted:{path}",
        agent=agent,
        tools=tools,
        tool_context=ToolContext(workspace=tmp_path, session_id=harness_sid()),
        **options,
    )


def harness_sid() -> str:
    return "ses_port_contract"  # the harnesses' session


def written(harness: Harness) -> list[SessionEvent]:
    """The events the store holds since the session's first input was delivered."""
    return harness.written()


async def transcript_of(harness: Harness) -> list[Message]:
    """The session's messages, read through the port."""
    return [m for _, m in await harness.port.messages_after(0)]


def types(events: Sequence[SessionEvent]) -> list[str]:
    return [e.type for e in events]


def ended(events: Sequence[SessionEvent]) -> TurnEnded:
    """The turn's one end, which is the last event it wrote."""
    [end] = [e for e in events if isinstance(e, TurnEnded)]
    assert events[-1] is end or events[-1] == end
    return end


# -- a held final reply -----------------------------------------------------------------------


async def test_a_final_reply_commits_with_the_steer_that_arrived_and_the_turn_goes_on(
    harness: Harness, providers: SharedProviders, tmp_path: Path
):
    """FinalReply -> Boundary: the held reply and the steer are one write, the steer renews the
    allowance (one step allowed, two taken) and the next step answers it."""
    rules = [("one more", [{"text": "second"}]), (".", [{"text": "first answer here"}])]
    ctx = context(tmp_path, providers, rules, max_steps=1)
    steered: list[str] = []

    def steer(kind: str) -> None:
        if kind == "text" and not steered:  # another process admits while the reply streams
            steered.append(kind)
            harness.admit("one more thing")

    port = Watched(harness.port, steer)
    result = await TurnRunner(ctx, port).run(["in_0"])
    assert (result.outcome, result.steps, result.final_text) == ("completed", 2, "second")
    boundary = port.writes[2]  # after the turn's start and step 1's receipt
    assert boundary.kind == "promote" and len(boundary.delivered) == 1
    assert boundary.types == ["message.added", "usage.recorded"]  # the reply, held until now
    events = written(harness)
    reply_at = next(i for i, e in enumerate(events) if isinstance(e, MessageAdded))
    assert types(events[reply_at : reply_at + 3]) == [
        "message.added",
        "usage.recorded",
        "inbox.delivered",
    ]
    transcript = [m.text() for m in await transcript_of(harness)]
    assert transcript == ["hello", "first answer here", "one more thing", "second"]
    assert ended(events).outcome == "completed"


async def test_a_final_reply_with_nothing_delivered_ends_the_turn_after_its_write(
    harness: Harness, providers: SharedProviders, tmp_path: Path
):
    """FinalReply -> End: the boundary writes the reply alone, the end holds nothing."""
    ctx = context(tmp_path, providers, [(".", [{"text": "done"}])])
    port = Watched(harness.port)
    result = await TurnRunner(ctx, port).run(["in_0"])
    assert (result.outcome, result.steps) == ("completed", 1)
    kinds = [(w.kind, w.types, w.delivered) for w in port.writes]
    assert kinds == [
        ("commit", ["turn.started"], []),
        ("commit", ["receipt.recorded"], []),
        ("promote", ["message.added", "usage.recorded"], []),
        ("end", ["turn.ended"], []),
    ]
    assert types(written(harness)) == [
        "turn.started",
        "receipt.recorded",
        "message.added",
        "usage.recorded",
        "turn.ended",
    ]


async def test_a_final_reply_whose_write_fails_is_dropped_and_asked_again_with_its_id(
    harness: Harness, providers: SharedProviders, tmp_path: Path
):
    """FinalReply -> Retry -> Attempt: a transient fault on the boundary's write drops the held
    reply (nothing of it stored), schedules a durable retry and asks the step again, the reply
    keeping its message id."""
    ctx = context(tmp_path, providers, [(".", [{"text": "done"}])])
    port = Watched(harness.port, fail_promotes=frozenset({1}))
    result = await TurnRunner(ctx, port).run(["in_0"])
    assert (result.outcome, result.steps, result.final_text) == ("completed", 1, "done")
    events = written(harness)
    assert types(events) == [
        "turn.started",
        "receipt.recorded",
        "retry.scheduled",
        "receipt.recorded",
        "message.added",
        "usage.recorded",
        "retry.cleared",
        "turn.ended",
    ]
    receipts = [e for e in events if isinstance(e, ReceiptRecorded)]
    assert [(r.step, r.attempt) for r in receipts] == [(1, 1), (1, 2)]
    [usage] = [e for e in events if isinstance(e, UsageRecorded)]
    assert usage.receipt_id == receipts[1].receipt_id
    assert port.promotes == 2


# -- a held read-only step and the receipt built ahead ----------------------------------------


async def test_the_receipt_built_ahead_is_written_by_the_boundary_and_sent(
    harness: Harness, providers: SharedProviders, tmp_path: Path
):
    """RunTools -> Boundary(held) -> Attempt(ahead): the boundary writes the step's reply and
    results and, last, the next step's receipt; that attempt sends it without a write."""
    ctx = context(tmp_path, providers, [(".", [GOAL, {"text": "done"}])])
    port = Watched(harness.port)
    result = await TurnRunner(ctx, port).run(["in_0"])
    assert (result.outcome, result.steps) == ("completed", 2)
    boundary = port.writes[2]
    assert boundary.kind == "promote" and boundary.delivered == []
    assert boundary.types == [
        "message.added",
        "usage.recorded",
        "tool.started",
        "tool.ended",
        "work_state.updated",
        "message.added",
    ]
    [ahead] = boundary.then
    assert (ahead.step, ahead.attempt) == (2, 1)
    commits = [w.types for w in port.writes if w.kind == "commit"]
    assert commits == [["turn.started"], ["receipt.recorded"]]  # step 2: no write of its own
    events = written(harness)
    usage = [e for e in events if isinstance(e, UsageRecorded)]
    assert usage[-1].receipt_id == ahead.receipt_id  # step 2 was asked under it
    assert sum(isinstance(e, ReceiptRecorded) for e in events) == 2


async def test_a_steer_at_the_boundary_drops_the_receipt_built_ahead(
    harness: Harness, providers: SharedProviders, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """Boundary(held) with a steer -> Attempt: the receipt built ahead is not written; the next
    step builds its request again, with the steer, and writes its own receipt."""
    rules = [("also this", [{"text": "noted"}]), (".", [GOAL, {"text": "done"}])]
    ctx = context(tmp_path, providers, rules)
    steered: list[str] = []

    def steer(kind: str) -> None:
        if kind == "tool_start" and not steered:  # while step 1's call runs
            steered.append(kind)
            harness.admit("also this")

    port = Watched(harness.port, steer)
    result = await TurnRunner(ctx, port).run(["in_0"])
    assert (result.outcome, result.steps, result.final_text) == ("completed", 2, "noted")
    boundary = port.writes[2]
    assert boundary.kind == "promote" and len(boundary.delivered) == 1 and boundary.then == []
    events = written(harness)
    receipts = [e for e in events if isinstance(e, ReceiptRecorded)]
    assert [(r.step, r.attempt) for r in receipts] == [(1, 1), (2, 1)]  # none without a request
    [steer] = [m for m in await transcript_of(harness) if m.text() == "also this"]
    assert steer.id in receipts[1].message_ids  # step 2 asked with the steer
    assert receipts[1].base is not None and receipts[1].base[0] == receipts[0].receipt_id
    assert "written ahead" not in caplog.text  # it was never offered to the attempt
    assert port.writes[3].kind == "commit" and port.writes[3].types == ["receipt.recorded"]


@pytest.mark.parametrize("moment", ["the boundary's write", "the attempt's history read"])
async def test_an_interrupt_after_the_boundary_leaves_the_receipt_built_ahead_unsent(
    harness: Harness, providers: SharedProviders, tmp_path: Path, moment: str
):
    """Boundary(held) -> Attempt(ahead) -> End(interrupted): an interrupt right after the
    boundary's write, or while the attempt reads its history to check what was built ahead,
    leaves the receipt the boundary wrote without a request (as an interrupt right after
    `receipt.after` leaves one); step 2 never starts."""
    ctx = context(tmp_path, providers, [(".", [GOAL, {"text": "done"}])])

    class InterruptedAfterTheBoundary(Watched):
        async def promote_steers_then(self, *args: Any) -> tuple[list[Delivered], bool]:
            out = await super().promote_steers_then(*args)
            if moment == "the boundary's write":
                ctx.interrupt.set()
            return out

        async def messages_after(self, seq: int) -> list[tuple[int, Message]]:
            if moment == "the attempt's history read" and any(w.then for w in self.writes):
                ctx.interrupt.set()
            return await self.inner.messages_after(seq)

    port = InterruptedAfterTheBoundary(harness.port)
    result = await TurnRunner(ctx, port).run(["in_0"])
    assert (result.outcome, result.steps) == ("interrupted", 2)
    [ahead] = port.writes[2].then
    events = written(harness)
    used = {e.receipt_id for e in events if isinstance(e, UsageRecorded)}
    assert ahead in events and ahead.receipt_id not in used
    assert port.live.count("step_start") == 1  # step 2 never started
    assert ended(events).outcome == "interrupted"


# -- every way out ends the turn ---------------------------------------------------------------


@dataclass(frozen=True)
class Exit:
    """A way a turn ends: the script, options of its context, and what ends it."""

    name: str
    rules: list[tuple[str, list[dict[str, Any]]]]
    outcome: str
    kind: str | None
    steps: int
    max_steps: int = 100
    options: dict[str, Any] = field(default_factory=dict)
    interrupt_on: str | None = None  # the live event at which the user interrupts


EXITS = [
    Exit("completed", [(".", [GOAL, {"text": "done"}])], "completed", None, 2),
    Exit(
        "a call waits for approval",
        [(".", [WRITE])],
        "paused",
        "awaiting_approval",
        1,
        options={"policy": PermissionPolicy({"write_file": "ask"})},
    ),
    Exit(
        "interrupted mid-stream",
        [(".", [{"text": "a long answer to cut"}])],
        "interrupted",
        None,
        1,
        interrupt_on="text",
    ),
    Exit(
        "interrupted while a read-only step is held",
        [(".", [GOAL, {"text": "done"}])],
        "interrupted",
        None,
        1,
        interrupt_on="tool_end",
    ),
    Exit("a spent allowance", [(".", [GOAL])], "failed", "StepLimitError", 1, max_steps=1),
    Exit(
        "a content filter",
        [(".", [{"text": "no", "finish": "content_filter"}])],
        "failed",
        "content_filter",
        1,
    ),
    Exit(
        "an invalid request",
        [(".", [{"error": {"kind": "invalid_request", "times": 9}}])],
        "blocked",
        "invalid_request",
        1,
    ),
]


@pytest.mark.parametrize("case", EXITS, ids=[e.name for e in EXITS])
async def test_every_way_out_ends_the_turn_once_after_what_it_held(
    harness: Harness, providers: SharedProviders, tmp_path: Path, case: Exit
):
    """Each exit becomes an `End`: one `turn.ended`, the last event the turn wrote, with the
    outcome and its kind, after every event the turn held (a read-only step's reply and
    results), and the result counts the steps begun."""
    delay = 20 if case.interrupt_on == "text" else 0  # a stream slow enough to be cut
    ctx = context(tmp_path, providers, case.rules, case.max_steps, delay, **case.options)

    def interrupt(kind: str) -> None:
        if kind == case.interrupt_on:
            ctx.interrupt.set()

    port = Watched(harness.port, interrupt)
    result = await TurnRunner(ctx, port).run(["in_0"])
    assert (result.outcome, result.error_kind, result.steps) == (
        case.outcome,
        case.kind,
        case.steps,
    )
    events = written(harness)
    end = ended(events)
    assert (end.outcome, end.error_kind) == (case.outcome, case.kind)
    last = port.writes[-1]
    assert last.kind == "end" and not port.inner.holding
    if case.name == "interrupted while a read-only step is held":
        # the reply and its results were held for the boundary: the end writes them first
        assert last.types[:2] == ["message.added", "usage.recorded"]
        assert last.types[-2:] == ["message.added", "turn.ended"]
    if case.name == "a spent allowance":  # the boundary wrote the held step, then none was left
        boundary = port.writes[-2]
        assert boundary.kind == "promote" and "tool.ended" in boundary.types
        assert last.types == ["turn.ended"]


async def test_a_shutdown_leaves_the_turn_open_with_what_streamed_kept(
    harness: Harness, providers: SharedProviders, tmp_path: Path
):
    """An interrupt meaning "this process is shutting down" is no `End`: the turn stays open
    for the next driver, and what streamed is kept as an aborted message."""
    shutdown = asyncio.Event()
    rules = [(".", [{"text": "a long answer to cut"}])]
    ctx = context(tmp_path, providers, rules, delay_ms=20, shutdown=shutdown)

    def stop(kind: str) -> None:
        if kind == "text":
            shutdown.set()
            ctx.interrupt.set()

    with pytest.raises(Interrupted):
        await TurnRunner(ctx, Watched(harness.port, stop)).run(["in_0"])
    events = written(harness)
    assert not any(isinstance(e, TurnEnded) for e in events)
    [kept] = [e.message for e in events if isinstance(e, MessageAdded)]
    assert kept.aborted and (kept.metadata or {}).get("aborted_by") == "shutdown"


async def test_each_turn_of_a_runner_starts_from_a_fresh_state(
    harness: Harness, providers: SharedProviders, tmp_path: Path
):
    """A runner that runs a second turn reports that turn's steps and usage alone (before the
    state had a name, its usage summed every turn the runner had run)."""
    ctx = context(tmp_path, providers, [(".", [{"text": "done"}])])
    runner = TurnRunner(ctx, Watched(harness.port))
    first = await runner.run(["in_0"])
    harness.admit("again")
    await harness.port.promote_steers(0)  # as the drain delivers the next turn's input
    second = await runner.run()
    assert (first.steps, second.steps) == (1, 1)
    usage = [e for e in written(harness) if isinstance(e, UsageRecorded)]
    assert [u.input_tokens for u in usage] == [first.usage.input_tokens, second.usage.input_tokens]
    assert second.usage.input_tokens > first.usage.input_tokens > 0  # a longer history


async def test_a_batch_of_steers_renews_the_allowance_once(
    harness: Harness, providers: SharedProviders, tmp_path: Path
):
    """Issue 37 item 21: three steers delivered at one boundary renew the step allowance once,
    to `max_steps` (not once per steer): with two steps allowed, the turn takes its first step,
    the batch gives two more, and the third step's boundary finds none left."""
    rules = [("^steer", [GOAL] * 5 + [{"text": "never"}]), (".", [GOAL, {"text": "x"}])]
    ctx = context(tmp_path, providers, rules, max_steps=2)
    steered: list[str] = []

    def steer(kind: str) -> None:
        if kind == "tool_start" and not steered:  # three admitted while step 1's call runs
            steered.append(kind)
            for n in (1, 2, 3):
                harness.admit(f"steer {n}")

    port = Watched(harness.port, steer)
    result = await TurnRunner(ctx, port).run(["in_0"])
    assert (result.outcome, result.error_kind, result.steps) == ("failed", "StepLimitError", 3)
    batches = [w.delivered for w in port.writes if w.kind == "promote" and w.delivered]
    assert [len(b) for b in batches] == [3]  # one boundary delivered the batch
    transcript = [m.text() for m in await transcript_of(harness)]
    assert transcript.count("steer 1") == 1 and "never" not in transcript
