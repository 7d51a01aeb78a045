"""Running one assistant message's tool calls: durable before side effects, outcomes in order.

Invariant 6: every call's `tool.started` is committed before any tool runs: the turn commits
them with the assistant message that holds the calls (`started_events`), so a reply and its
calls become durable together. Calls run
concurrently; their outcomes are published together, in call order, with the tool-result
message. An interrupt cancels unfinished calls, which end `failed` with a result saying they
may have partially run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import replace

from ..events import MessageAdded, SessionEvent, ToolCallEnded, ToolCallStarted, WorkStateUpdated
from ..messages import Message, ToolCallBlock, ToolResultBlock, tool_result_text
from ..store import artifacts_from_metadata
from ._crashpoints import crash_point
from ._stream import until_interrupted
from .tools import PermissionPolicy, Tool, ToolContext, ToolOutcome, cap_result, run_tool_call
from .tools._base import RetryCall

LIVE_OUTPUT_CHARS = 2000  # a live `tool_end` carries this much of the output (the message: all)
Ended = tuple[ToolResultBlock, ToolOutcome]  # a call's result and outcome
INTERRUPTED_RESULT = (
    "The tool call was interrupted before it finished; it may have partially run. "
    "Check its effects before relying on them."
)


def started_events(message: Message) -> list[SessionEvent]:
    """The `tool.started` events of `message`'s calls, to commit with the message itself."""
    return [
        ToolCallStarted(call_id=c.id, message_id=message.id, name=c.name, input=c.input)
        for c in message.tool_calls()
    ]


async def run_tools(
    message: Message,
    *,
    tools: Mapping[str, Tool],
    tool_context: ToolContext,
    policy: PermissionPolicy,
    ask: Callable[[str, dict[str, object]], Awaitable[bool]] | None,
    save: Callable[[Sequence[SessionEvent], Sequence[bytes]], Awaitable[None]],
    live: Callable[..., None],
    interrupt: asyncio.Event,
    turn_id: str,
    approved: Mapping[str, bool] | None = None,
    now_ms: Callable[[], int] = lambda: 0,
    retry: RetryCall | None = None,
) -> list[ToolResultBlock]:
    """Run and publish the tool calls of `message` (their `tool.started` already committed);
    return their results in order. `save` commits the outcomes and the tool-result message
    (it waits out transient store faults: the side effects already happened). `approved` holds
    decisions already made on `ask` calls; `retry` makes a call that failed transiently again
    (`run_tool_call`)."""
    calls = message.tool_calls()
    crash_point("tool.started")
    decided = approved or {}

    def one(call: ToolCallBlock) -> Coroutine[object, None, Ended]:
        context = replace(tool_context, turn_id=turn_id, call_id=call.id)
        return _one(tools, call, context, policy, ask, live, decided.get(call.id), retry)

    if len(calls) == 1:  # awaited in this task, the interrupt's waiter beside it
        finished: list[tuple[Ended] | None] = [await until_interrupted(interrupt, one(calls[0]))]
    else:
        finished = await _concurrently([one(c) for c in calls], interrupt)
    crash_point("tool.done")
    results, events, blobs = _outcomes(message, finished, turn_id, now_ms)
    await save(events, blobs)
    return results


async def _concurrently(
    calls: Sequence[Coroutine[object, None, Ended]], interrupt: asyncio.Event
) -> list[tuple[Ended] | None]:
    """Run `calls` as tasks until all end or `interrupt` is set (the unfinished are cancelled);
    each one's result in a 1-tuple, None for one cancelled (an exception it raised is
    raised)."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    waiter = asyncio.ensure_future(interrupt.wait())
    try:
        await asyncio.wait({*tasks, waiter}, return_when=asyncio.FIRST_COMPLETED)
        while not waiter.done() and not all(t.done() for t in tasks):
            await asyncio.wait({*tasks, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return [None if t.cancelled() else (t.result(),) for t in tasks]


def _outcomes(
    message: Message,
    finished: Sequence[tuple[Ended] | None],
    turn_id: str,
    now_ms: Callable[[], int],
) -> tuple[list[ToolResultBlock], list[SessionEvent], list[bytes]]:
    """The finished calls of `message` (in call order; None: interrupted), each held to the
    one cap on tool results (`tools/_cap.py`): their results, the events that record them
    (each call's end, a work-state update, artifacts, then one tool-result message), and the
    blobs their results carry (a capped result's whole text)."""
    results: list[ToolResultBlock] = []
    events: list[SessionEvent] = []
    blobs: list[bytes] = []
    for call, done in zip(message.tool_calls(), finished, strict=True):
        if done is None:
            result, outcome = _interrupted(call), None
        else:
            result, outcome = done[0]
        result, whole = cap_result(result)  # one cap for every tool; the whole text kept
        if whole is not None:
            blobs.append(whole)
        results.append(result)
        status = "failed" if result.is_error else "completed"
        events.append(
            ToolCallEnded(
                call_id=call.id, message_id=message.id, status=status, partial=done is None
            )
        )
        if outcome is not None and outcome.work_state is not None:
            kind, value = outcome.work_state
            events.append(WorkStateUpdated(kind=kind, value=value))
        if outcome is not None and not result.is_error:
            blobs.extend(outcome.blobs)
            events.extend(artifacts_from_metadata(result.metadata, turn_id=turn_id, at_ms=now_ms()))
    reply = Message(role="user", blocks=tuple(results), metadata={"tool_results_for": message.id})
    events.append(MessageAdded(message=reply, turn_id=turn_id))
    return results, events, blobs


async def _one(
    tools: Mapping[str, Tool],
    call: ToolCallBlock,
    ctx: ToolContext,
    policy: PermissionPolicy,
    ask: Callable[[str, dict[str, object]], Awaitable[bool]] | None,
    live: Callable[..., None],
    approved: bool | None,
    retry: RetryCall | None,
) -> tuple[ToolResultBlock, ToolOutcome]:
    live("tool_start", call_id=call.id, name=call.name, input=call.input)
    result, outcome = await run_tool_call(tools, call, ctx, policy, ask, approved, retry)
    output = tool_result_text(result.output)
    live(
        "tool_end",
        call_id=call.id,
        name=call.name,
        is_error=result.is_error,
        output=output[:LIVE_OUTPUT_CHARS],
        output_chars=len(output),
    )
    return result, outcome


def _interrupted(call: ToolCallBlock) -> ToolResultBlock:
    return ToolResultBlock(call_id=call.id, output=INTERRUPTED_RESULT, is_error=True)
