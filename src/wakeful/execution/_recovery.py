"""Recovery at drain start: heal tool calls an earlier process left running (invariant 6) and
settle or resume a turn an earlier process left open (invariant 10).
"""

from __future__ import annotations

from ..events import MessageAdded, SessionEvent, ToolCallEnded, TurnEnded
from ..messages import Message, TextBlock, TextOrigin, ToolResultBlock
from ..store import ClaimToken, SqlStore

PARTIAL_RESULT = (
    "This tool call was still running when its process stopped; it may have partially run. "
    "It was not replayed. Check its effects before relying on them."
)
CONTINUATION = (
    "The process driving this session stopped unexpectedly and a new one resumed it. "
    "Continue the task from the transcript; tool calls marked as interrupted were not replayed."
)


def heal_running_tools(store: SqlStore, session_id: str, claim: ClaimToken) -> int:
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


def open_turn(store: SqlStore, session_id: str) -> str | None:
    """The id of a turn that started and never ended, or None."""
    running = [t for t in store.turns(session_id) if t.status == "running"]
    return running[-1].turn_id if running else None


def continue_or_fail(
    store: SqlStore,
    session_id: str,
    turn_id: str,
    claim: ClaimToken,
    attempts: int,
    max_attempts: int,
) -> bool:
    """Append the continuation instruction (True), or fail the turn when attempts ran out (False)."""
    if attempts > max_attempts:
        store.append(
            session_id,
            [TurnEnded(turn_id=turn_id, outcome="failed", error=f"recovery gave up after {max_attempts} attempts",
                       error_kind="recovery_exhausted")],
            claim,
        )  # fmt: skip
        return False
    note = Message(
        role="user",
        blocks=(TextBlock(text=CONTINUATION, origin=TextOrigin(kind="event", source="wakeful")),),
    )
    store.append(session_id, [MessageAdded(message=note, turn_id=turn_id)], claim)
    return True
