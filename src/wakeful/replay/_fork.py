"""A recorded turn re-run from one of its steps on another model, as a fork: a real session
(`forked_from` the source) holding the history before the turn, the turn's inputs admitted
again, its steps before the chosen one answered from the recording (replies and tool results
as recorded) and every step from it on by the new model, its tools really running at the
fork's location under the usual approvals. The fork is an ordinary session afterwards:
continue it, compare it turn by turn with the original.

Invariant: the source is only read; the fork's id and input ids derive from the run, case and
model, so a run restarted after a crash resumes the same fork (the runtime's recovery), never
a second one.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from ..errors import NotFoundError
from ..events import (
    CaseResult,
    EvalCase,
    InputDelivered,
    InputEnqueued,
    MessageAdded,
    ReceiptRecorded,
    StoredEvent,
    ToolCallSeen,
    TurnEnded,
    TurnStarted,
    TurnSummary,
    UsageRecorded,
)
from ..execution import Place, Runtime, off_loop
from ..providers import Provider
from ..runner import CostSum, TurnResult
from ..store import SqlStore, Store, open_store
from ._answer import from_message
from ._check import RecordedToolbox
from ._recording import Exchange, Live, RecordedProvider, Recording, read_recording


@dataclass(frozen=True, slots=True)
class TurnStart:
    """Where a turn began: its id, the seq just before its first input was delivered (a fork
    through it holds the history the turn started from) and its inputs as admitted."""

    turn_id: str
    before_seq: int
    inputs: tuple[InputEnqueued, ...]


def turn_start(store: Store, session_id: str, turn_id: str) -> TurnStart:
    """How `turn_id` of `session_id` began (`NotFoundError` for a turn the log lacks)."""
    events = store.events(session_id, types=["inbox.enqueued", "inbox.delivered", "turn.started"])
    enqueued = {e.event.input_id: e.event for e in events if isinstance(e.event, InputEnqueued)}
    started = next(
        (
            e.event
            for e in events
            if isinstance(e.event, TurnStarted) and e.event.turn_id == turn_id
        ),
        None,
    )
    if started is None:
        raise NotFoundError(f"no turn {turn_id} in {session_id}")
    ids = set(started.input_ids)
    delivered = [
        e.seq for e in events if isinstance(e.event, InputDelivered) and e.event.input_id in ids
    ]
    first = min(delivered) if delivered else 1
    inputs = tuple(enqueued[i] for i in started.input_ids if i in enqueued)
    return TurnStart(turn_id, first - 1, inputs)


def turn_result(
    store: Store, session_id: str, turn_id: str, *, skip: int = 0, elapsed_ms: int | None = None
) -> CaseResult:
    """A turn's outcome as a result, from its reply number `skip` on: the last reply's text,
    every tool call from there, the tokens and cost of those requests, and (unless given) the
    time from the first of them to the turn's end."""
    events = store.events(
        session_id, types=["receipt.recorded", "message.added", "usage.recorded", "turn.ended"]
    )
    replies = [
        e
        for e in events
        if isinstance(e.event, MessageAdded)
        and e.event.turn_id == turn_id
        and e.event.message.role == "assistant"
    ][skip:]
    steps = [
        e
        for e in events
        if isinstance(e.event, ReceiptRecorded)
        and e.event.turn_id == turn_id
        and e.event.purpose == "step"
    ]
    ended = next(
        (e for e in events if isinstance(e.event, TurnEnded) and e.event.turn_id == turn_id), None
    )
    total = _usage(events, steps, skip)
    if elapsed_ms is None:
        begin = next(
            (
                e.at_ms
                for e in steps
                if isinstance(e.event, ReceiptRecorded) and e.event.step > skip
            ),
            0,
        )
        elapsed_ms = (ended.at_ms - begin) if ended is not None and begin else 0
    last = _message(replies[-1]) if replies else None
    result = from_message(last, total, None, elapsed_ms, "")
    calls = tuple(
        ToolCallSeen(name=c.name, input=c.input) for e in replies for c in _message(e).tool_calls()
    )
    known = total.cost_usd
    update: dict[str, Any] = {
        "tool_calls": calls,
        "session_id": session_id,
        "cost_usd": None if known is None else round(known, 8),
    }
    return result.model_copy(update=update | _failure(ended))


def _usage(events: list[StoredEvent], steps: list[StoredEvent], skip: int) -> UsageRecorded:
    """The tokens and cost of the turn's requests from step `skip + 1` on, summed."""
    counted = {
        e.event.receipt_id
        for e in steps
        if isinstance(e.event, ReceiptRecorded) and e.event.step > skip
    }
    usages = [
        e.event
        for e in events
        if isinstance(e.event, UsageRecorded) and e.event.receipt_id in counted
    ]
    costs = CostSum()
    for u in usages:
        costs = costs.add(u.cost_usd)
    return UsageRecorded(
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        cost_usd=costs.known,
    )


def _failure(ended: StoredEvent | None) -> dict[str, Any]:
    """What a turn that did not complete (or did not end) sets on its result: an error, no
    finish, the error's kind (`turn` when it has none)."""
    outcome = ended.event if ended is not None and isinstance(ended.event, TurnEnded) else None
    if outcome is not None and outcome.outcome == "completed":
        return {}
    state = "did not end" if outcome is None else f"ended {outcome.outcome}"
    why = f": {outcome.error}" if outcome is not None and outcome.error else ""
    kind = (outcome.error_kind if outcome else None) or "turn"
    return {"error": f"the turn {state}{why}", "finish": None, "error_kind": kind}


def _message(stored: StoredEvent) -> Any:
    assert isinstance(stored.event, MessageAdded)
    return stored.event.message


class ForkRuntime(Runtime):
    """A runtime whose session model answers from `prefix` first (the recorded steps before the
    chosen one) and then for real, its tools likewise (`RecordedProvider` with `then_live`)."""

    def __init__(self, recording: Recording, prefix: list[Exchange], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._live = Live()
        self._prefix = deque(prefix)
        self.toolbox = RecordedToolbox(recording, self._live)

    def build_provider(self, spec: str, place: Place | None = None) -> Provider:
        """The real provider of `spec` behind the recorded prefix."""
        return RecordedProvider(super().build_provider(spec, place), self._prefix, self._live)


def _ids(run_id: str, case: EvalCase, model: str) -> tuple[str, str]:
    digest = hashlib.sha256(f"{run_id}\0{case.id}\0{model}\0fork".encode()).hexdigest()
    return f"ses_{digest[:24]}", digest[24:40]


async def _send_turn(
    driver: Runtime, fork_id: str, inputs: tuple[InputEnqueued, ...], ids: list[str]
) -> list[TurnResult]:
    """Admit one turn's inputs to the fork (idempotent by their derived ids) and drive it."""
    for item, input_id in zip(inputs, ids, strict=True):
        await off_loop(
            driver.send,
            session_id=fork_id,
            input_id=input_id,
            kind=item.kind,
            payload=item.payload,
            delivery=item.delivery,
            create=False,
            resume=False,
        )
    return await driver.drive_input(fork_id, ids[0]) if ids else []


def summary(result: CaseResult, turn: int) -> TurnSummary:
    """A turn's result as one row of a turn-by-turn comparison."""
    return TurnSummary(
        turn=turn,
        text=result.text,
        tool_calls=result.tool_calls,
        input_tokens=result.input_tokens,
        output_tokens=result.output_tokens,
        cost_usd=result.cost_usd,
        error=result.error,
    )


def later_turns(store: SqlStore, session_id: str, turn_id: str) -> list[tuple[int, str]]:
    """The (number, id) of each turn of the session after `turn_id`, in order."""
    ids = [t.turn_id for t in store.turns(session_id)]
    at = ids.index(turn_id) if turn_id in ids else len(ids)
    return [(n, tid) for n, tid in enumerate(ids, 1) if n > at + 1]


async def run_fork(runtime: Runtime, run_id: str, case: EvalCase, model: str) -> CaseResult:
    """Re-run `case`'s recorded turn from its step on `model` as a fork (module docstring) and
    return the fork's turn, from that step on, as the result; with `case.to_end`, the later
    turns' inputs follow, each driven in turn, and `turns` compares them one by one."""
    store: SqlStore = runtime.store
    source, receipt_id = case.session_id or "", case.receipt_id or ""
    [receipt] = [r for r in await off_loop(store.receipts, source) if r.receipt_id == receipt_id]
    turn_id, step = receipt.turn_id or "", receipt.step
    start = await off_loop(turn_start, store, source, turn_id)
    recording = await off_loop(read_recording, store, source)
    prefix = [
        x
        for x in recording.exchanges
        if x.receipt.turn_id == turn_id
        and x.receipt.purpose == "step"
        and x.receipt.step < step
        and x.reply is not None
    ]
    fork_id, tag = _ids(run_id, case, model)
    at = (start.before_seq, step)
    prefix = await _open_fork(runtime, fork_id, run_id, case, model, at, prefix)
    later = await off_loop(later_turns, store, source, turn_id) if case.to_end else []
    driver = ForkRuntime(
        recording,
        prefix,
        store=open_store(store.url),
        workspace=runtime.workspace,
        config=runtime.config,
        ask=runtime.ask,
        model=model,
    )
    began = time.monotonic()
    try:
        ids = [f"in_{tag}_0_{n}" for n in range(len(start.inputs))]
        first = await _send_turn(driver, fork_id, start.inputs, ids)
        elapsed = int((time.monotonic() - began) * 1000)
        followed: list[tuple[int, list[TurnResult]]] = []
        for number, later_id in later:
            inputs = (await off_loop(turn_start, store, source, later_id)).inputs
            ids = [f"in_{tag}_{number}_{n}" for n in range(len(inputs))]
            followed.append((number, await _send_turn(driver, fork_id, inputs, ids)))
    finally:
        await driver.aclose()
    result = await off_loop(
        turn_result,
        store,
        fork_id,
        first[-1].turn_id if first else "",
        skip=step - 1,
        elapsed_ms=elapsed,
    )
    if not case.to_end:
        return result
    return await _turn_by_turn(store, fork_id, result, case.turn or 0, followed)


async def _open_fork(
    runtime: Runtime,
    fork_id: str,
    run_id: str,
    case: EvalCase,
    model: str,
    at: tuple[int, int],
    prefix: list[Exchange],
) -> list[Exchange]:
    """Fork `case`'s session through the seq `at` holds as `fork_id` on `model` (its title
    names the step `at` holds), unless a run before a crash did; the recorded replies of
    `prefix` the fork has yet to be given."""
    store: SqlStore = runtime.store
    source, (before_seq, step) = case.session_id or "", at
    if await off_loop(store.find_session, fork_id) is None:
        runtime.check_model(model)
        meta: dict[str, JsonValue] = dict(await off_loop(store.metadata, source))
        meta |= {"eval_run": run_id, "eval_case": case.id}
        title = f"fork of {source} turn {case.turn} from step {step} on {model}"
        await off_loop(
            store.fork, source, before_seq, new_id=fork_id, model=model, title=title, metadata=meta
        )
        return prefix
    # resumed after a crash: the replies the fork already has are not asked again
    done = await off_loop(store.events, fork_id, types=["message.added"])
    answered = sum(
        isinstance(e.event, MessageAdded) and e.event.message.role == "assistant" for e in done
    )
    return prefix[answered:]


async def _turn_by_turn(
    store: SqlStore,
    fork_id: str,
    result: CaseResult,
    number: int,
    followed: list[tuple[int, list[TurnResult]]],
) -> CaseResult:
    """`result` (the fork's turn `number`) with a row of `turns` for it and for each turn that
    followed it on the fork."""
    rows = [summary(result, number)]
    for later_number, turns in followed:
        later_result = await off_loop(
            turn_result, store, fork_id, turns[-1].turn_id if turns else ""
        )
        rows.append(summary(later_result, later_number))
    return result.model_copy(update={"turns": tuple(rows)})


async def original_turns(
    store: SqlStore, session_id: str, turn_id: str, step: int, number: int, to_end: bool
) -> CaseResult:
    """The recorded turn from `step` on as a result (the left column of a fork's comparison);
    with `to_end`, with every later turn as a row of `turns`."""
    first = await off_loop(turn_result, store, session_id, turn_id, skip=step - 1)
    if not to_end:
        return first
    rows = [summary(first, number)]
    for later_number, later_id in await off_loop(later_turns, store, session_id, turn_id):
        later = await off_loop(turn_result, store, session_id, later_id)
        rows.append(summary(later, later_number))
    return first.model_copy(update={"turns": tuple(rows)})
