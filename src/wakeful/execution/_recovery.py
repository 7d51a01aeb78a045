"""Recovery at drain start: heal tool calls an earlier process left running or unanswered
(invariant 6) and settle or resume a turn an earlier process left open (invariant 10).

A call found `running` is failed with a result saying it may have partially run; a call whose
assistant message is durable but whose `tool.started` is not never ran, and gets a result saying
so. Neither is ever replayed. An open turn is resumed with a durable continuation instruction;
the continuations already in the turn are the attempt count, so the bound survives any number of
crashes; past it the turn fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..events import MessageAdded, Outcome, SessionEvent, ToolCallEnded
from ..messages import Message, TextBlock, TextOrigin, ToolResultBlock
from ..runner import read_approvals
from ..store import ClaimToken, SqlStore, TurnRow
from ._delegation import delegation_of

PARTIAL_RESULT = (
    "This tool call was still running when its process stopped; it may have partially run. "
    "It was not replayed. Check its effects before relying on them."
)
NOT_RUN_RESULT = (
    "This tool call was not run: the process driving the session stopped before it started. "
    "Call it again if it is still needed."
)
CONTINUATION = (
    "The process driving this session stopped unexpectedly and a new one resumed it. "
    "Continue the task from the transcript; tool calls marked as interrupted were not replayed."
)


def heal_running_tools(store: SqlStore, session_id: str, claim: ClaimToken | None) -> int:
    """Fail every `running` tool call with a synthetic result; return how many."""
    running = store.tool_calls(session_id, status="running")
    if not running:
        return 0
    events: list[SessionEvent] = []
    by_message: dict[str, list[ToolResultBlock]] = {}
    for call in running:
        events.append(
            ToolCallEnded(
                call_id=call.call_id, message_id=call.message_id, status="failed", partial=True
            )
        )
        by_message.setdefault(call.message_id, []).append(
            ToolResultBlock(call_id=call.call_id, output=PARTIAL_RESULT, is_error=True)
        )
    for message_id, results in by_message.items():
        reply = Message(
            role="user", blocks=tuple(results), metadata={"tool_results_for": message_id}
        )
        events.append(MessageAdded(message=reply))
    store.append(session_id, events, claim)
    return len(running)


def heal_unstarted_calls(store: SqlStore, session_id: str, claim: ClaimToken) -> int:
    """Answer the newest assistant message's calls that never started; return how many.

    Only the newest assistant message can hold them: a crash between persisting the reply and
    persisting its `tool.started` events. The result goes right after it, keeping pairs valid.
    Calls waiting for approval (`approval.requested`) were not started on purpose: they wait on.
    """
    messages = store.messages(session_id)
    last = next(
        (i for i in range(len(messages) - 1, -1, -1)
         if messages[i].role == "assistant" and not messages[i].aborted),
        None,
    )  # fmt: skip
    if last is None or not messages[last].tool_calls():
        return 0
    started = {c.call_id for c in store.tool_calls(session_id) if c.message_id == messages[last].id}
    answered = {r.call_id for m in messages[last + 1 :] for r in m.tool_results()}
    missing = [c for c in messages[last].tool_calls() if c.id not in started | answered]
    step = read_approvals(store, session_id).step if missing else None
    if step is not None and step.message_id == messages[last].id:
        return 0
    if not missing:
        return 0
    results = tuple(
        ToolResultBlock(call_id=c.id, output=NOT_RUN_RESULT, is_error=True) for c in missing
    )
    reply = Message(role="user", blocks=results, metadata={"tool_results_for": messages[last].id})
    store.append(session_id, [MessageAdded(message=reply)], claim)
    return len(missing)


def open_turn(store: SqlStore, session_id: str) -> TurnRow | None:
    """The turn that started and never ended, or None."""
    running = [t for t in store.turns(session_id) if t.status == "running"]
    return running[-1] if running else None


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """What to do with an open turn: resume it (`end` is None) or end it with `end`."""

    end: Outcome | None = None
    error: str | None = None
    error_kind: str | None = None
    final_text: str = ""


def plan_recovery(
    store: SqlStore, session_id: str, turn: TurnRow, claim: ClaimToken, max_attempts: int
) -> RecoveryPlan:
    """Decide how an open turn ends or resumes; append the continuation when it resumes.

    A turn whose newest message is a complete final reply (no tool calls, not partial, not
    aborted) had
    finished: it ends `completed` without another request. An orphaned foreground child (its
    parent's `task` call was failed with the parent's process) ends `failed`. A turn that already
    had `max_attempts` continuations ends `failed`; otherwise a continuation is appended. A
    turn whose calls wait for approval (or were decided and not run) resumes as it is: the
    runner pauses it again or runs the decided calls.
    """
    if read_approvals(store, session_id).step is not None:  # the turn runs or re-pauses it
        return RecoveryPlan()
    messages = [m for seq, m in store.messages_with_seq(session_id, turn.started_seq)]
    if messages and _is_final_reply(messages[-1]):
        return RecoveryPlan("completed", final_text=messages[-1].text())
    if delegation_of(store, session_id) == "foreground":
        return RecoveryPlan(
            "failed", error="the parent's task call stopped with its process; not resumed",
            error_kind="orphaned_child",
        )  # fmt: skip
    attempts = sum(1 for m in messages if (m.metadata or {}).get("recovery_of") == turn.turn_id)
    if attempts >= max_attempts:
        return RecoveryPlan(
            "failed", error=f"recovery gave up after {attempts} attempts",
            error_kind="recovery_exhausted",
        )  # fmt: skip
    note = Message(
        role="user",
        blocks=(TextBlock(text=CONTINUATION, origin=TextOrigin(kind="event", source="wakeful")),),
        metadata={"recovery_of": turn.turn_id, "attempt": attempts + 1},
    )
    store.append(session_id, [MessageAdded(message=note, turn_id=turn.turn_id)], claim)
    return RecoveryPlan()


def _is_final_reply(message: Message) -> bool:
    return (
        message.role == "assistant"
        and not message.tool_calls()
        and not (message.metadata or {}).get("partial")
        and not message.aborted  # output cut short: the step is asked again
        and bool(message.blocks)
    )
