"""Recovery at drain start: heal tool calls an earlier process left running or unanswered
(invariant 6) and settle or resume a turn an earlier process left open (invariant 10).

A call found `running` is failed with a result saying it may have partially run; a call whose
assistant message is durable but whose `tool.started` is not never ran, and gets a result saying
so. Neither is ever replayed. An open turn is resumed with a durable continuation instruction;
the continuations already in the turn are the attempt count, so the bound survives any number of
crashes; past it the turn fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from ..events import MessageAdded, Outcome, SessionEvent, ToolCallEnded
from ..messages import RECOVERY_OF, Message, TextBlock, TextOrigin, ToolResultBlock
from ..runner import (
    APPROVAL_TYPES,
    LOOKBACK_EVENTS,
    ApprovalLog,
    crash_point,
    fold_approvals,
    read_approvals,
)
from ..store import (
    Claim,
    ClaimToken,
    DriveReads,
    InstructionState,
    LocalStore,
    RecoveryView,
    ToolCallRow,
    TurnRow,
    fence,
)
from ._delegation import delegation_from, delegation_of
from ._first_writes import FirstWrites
from ._port import Opened
from ._writes import compaction_boundary

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


def heal_running_tools(store: LocalStore, session_id: str, claim: ClaimToken | None) -> int:
    """Fail every `running` tool call with a synthetic result; return how many."""
    running = store.tool_calls(session_id, status="running")
    if running:
        store.append(session_id, running_results(running), claim)
    return len(running)


def running_results(running: Sequence[ToolCallRow]) -> list[SessionEvent]:
    """The events that fail the `running` calls `running`: each call's `tool.ended` (partial),
    then one result message per assistant message."""
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
    return events


def heal_unstarted_calls(store: LocalStore, session_id: str, claim: ClaimToken) -> int:
    """Answer the newest assistant message's calls that never started; return how many.

    Only the newest assistant message can hold them: a crash between persisting the reply and
    persisting its `tool.started` events. The result goes right after it, keeping pairs valid.
    Calls waiting for approval (`approval.requested`) were not started on purpose: they wait on.
    """
    events = unstarted_results(
        store.messages(session_id),
        store.tool_calls(session_id),
        lambda: read_approvals(store, session_id),
    )
    if events:
        store.append(session_id, events, claim)
    return sum(len(e.message.tool_results()) for e in events if isinstance(e, MessageAdded))


def unstarted_results(
    messages: Sequence[Message], calls: Sequence[ToolCallRow], approvals: Callable[[], ApprovalLog]
) -> list[SessionEvent]:
    """The result message for the newest assistant message's calls that never started (see
    `heal_unstarted_calls`), or nothing; `approvals` is read only when some are missing."""
    last = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if messages[i].role == "assistant" and not messages[i].aborted
        ),
        None,
    )
    if last is None or not messages[last].tool_calls():
        return []
    started = {c.call_id for c in calls if c.message_id == messages[last].id}
    answered = {r.call_id for m in messages[last + 1 :] for r in m.tool_results()}
    missing = [c for c in messages[last].tool_calls() if c.id not in started | answered]
    if not missing:
        return []
    step = approvals().step
    if step is not None and step.message_id == messages[last].id:
        return []
    results = tuple(
        ToolResultBlock(call_id=c.id, output=NOT_RUN_RESULT, is_error=True) for c in missing
    )
    reply = Message(role="user", blocks=results, metadata={"tool_results_for": messages[last].id})
    return [MessageAdded(message=reply)]


def open_turn(store: LocalStore, session_id: str) -> TurnRow | None:
    """The turn that started and never ended, or None."""
    return newest_open(store.turns(session_id))


def newest_open(turns: Sequence[TurnRow]) -> TurnRow | None:
    """The newest of `turns` that started and never ended, or None."""
    running = [t for t in turns if t.status == "running"]
    return running[-1] if running else None


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """What to do with an open turn: resume it (`end` is None) or end it with `end`."""

    end: Outcome | None = None
    error: str | None = None
    error_kind: str | None = None
    final_text: str = ""


def plan_recovery(
    store: LocalStore, session_id: str, turn: TurnRow, claim: ClaimToken, max_attempts: int
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
    plan, events = decide(
        turn, messages, lambda: delegation_of(store, session_id), max_attempts, healed=False
    )
    if events:
        store.append(session_id, events, claim)
    return plan


def decide(
    turn: TurnRow,
    messages: Sequence[Message],
    delegation: Callable[[], str | None],
    max_attempts: int,
    *,
    healed: bool,
) -> tuple[RecoveryPlan, list[SessionEvent]]:
    """`plan_recovery`'s rules (no approval step open) over the turn's `messages`; `healed`:
    results that heal its calls are being written first (its newest message is then theirs).
    Returns the plan and the continuation to append (none when the turn ends)."""
    if not healed and messages and _is_final_reply(messages[-1]):
        return RecoveryPlan("completed", final_text=messages[-1].text()), []
    if delegation() == "foreground":
        return RecoveryPlan(
            "failed",
            error="the parent's task call stopped with its process; not resumed",
            error_kind="orphaned_child",
        ), []
    attempts = sum(1 for m in messages if (m.metadata or {}).get(RECOVERY_OF) == turn.turn_id)
    if attempts >= max_attempts:
        return RecoveryPlan(
            "failed",
            error=f"recovery gave up after {attempts} attempts",
            error_kind="recovery_exhausted",
        ), []
    note = Message(
        role="user",
        blocks=(TextBlock(text=CONTINUATION, origin=TextOrigin(kind="event", source="wakeful")),),
        metadata={RECOVERY_OF: turn.turn_id, "attempt": attempts + 1},
    )
    return RecoveryPlan(), [MessageAdded(message=note, turn_id=turn.turn_id)]


@dataclass(frozen=True, slots=True)
class Recovered:
    """A session a batch recovery already healed: its open turn (None: none) and the plan
    for it (the continuation, if any, is written); and what the batch read for its drive (None:
    the drive reads it): the row and facts its context is built from, the instruction state
    its turn's first sync plans from (`RecoveryView`) and, when the turn resumes, what it
    reads first (`Opened`)."""

    turn: TurnRow | None
    plan: RecoveryPlan | None
    drive: DriveReads | None = None
    instructions: InstructionState | None = None
    opening: Opened | None = None  # the resumed turn's opening, read after the batch's write
    first: FirstWrites | None = None  # where the resumed turn's first commit goes (its batch's)


def recover_batch(
    store: LocalStore, claims: Sequence[Claim], max_attempts: int
) -> dict[str, Recovered]:
    """Heal and plan the sessions of a batch of taken-over `claims` together: one read
    transaction for all of them (`LocalStore.recovery_views`, which reads what their drives
    read first too), the rules above for each, and one write transaction
    (`LocalStore.append_batch`) for every session's healing results and continuation, each
    fenced by its own claim. The resumed turns' first commits (their first receipts) are
    written together too, by their drives (`Recovered.first`, `_first_writes.py`). Returns
    the sessions recovered; a session whose claim was lost meanwhile (or that is gone) is left
    out and must not be driven."""
    views = store.recovery_views([c.session_id for c in claims], APPROVAL_TYPES)
    out: dict[str, Recovered] = {}
    writes: list[tuple[str, Sequence[SessionEvent], ClaimToken]] = []
    for claim in claims:
        sid, view = claim.session_id, views.get(claim.session_id)
        if view is None:
            continue
        approvals = _approvals(view)
        messages = [m for _seq, m in view.messages]
        events = running_results([c for c in view.calls if c.status == "running"])
        events += unstarted_results(messages, view.calls, approvals)
        turn, plan = newest_open(view.turns), None
        if turn is not None and approvals().step is not None:
            plan = RecoveryPlan()  # the turn runs or re-pauses its approval step
        elif turn is not None:
            in_turn = [m for seq, m in view.messages if seq > turn.started_seq]
            delegation = partial(delegation_from, view.parent_id, view.created)
            plan, note = decide(turn, in_turn, delegation, max_attempts, healed=bool(events))
            events += note
        out[sid] = Recovered(turn, plan, view.drive, view.instructions)
        writes.append((sid, events, fence(claim)))
    written = store.append_batch(writes)
    lost = {sid for sid, events, _ in writes if events and sid not in written}
    if written:
        crash_point("drain.healed")
    kept = _with_openings(store, {sid: r for sid, r in out.items() if sid not in lost})
    resumed = [sid for sid, r in kept.items() if r.opening is not None]
    if len(resumed) < 2:
        return kept
    first = FirstWrites(store, resumed)
    return {sid: replace(r, first=first) if sid in resumed else r for sid, r in kept.items()}


def _with_openings(store: LocalStore, recovered: dict[str, Recovered]) -> dict[str, Recovered]:
    """`recovered`, each resumed turn with its opening (`Opened`) read for the whole batch in
    one read after the batch's write: what each turn would read first, a read of its own.
    Only the claim's driver writes what it holds until the turn's first write (approvals are
    decided through the inbox, which the driver delivers)."""
    resumed = [s for s, r in recovered.items() if r.plan is not None and r.plan.end is None]
    if not resumed:
        return recovered
    openings = store.openings(resumed, APPROVAL_TYPES, LOOKBACK_EVENTS)
    out = dict(recovered)
    for sid, (opening, messages) in openings.items():
        boundary = compaction_boundary(opening.compactions)
        history = [(seq, m) for seq, m in messages if seq > boundary]
        out[sid] = replace(recovered[sid], opening=(opening, boundary, history))
    return out


def _approvals(view: RecoveryView) -> Callable[[], ApprovalLog]:
    """The session's approval log from `view`, folded once when first asked for."""
    folded: list[ApprovalLog] = []

    def get() -> ApprovalLog:
        if not folded:
            folded.append(fold_approvals(view.events, lambda: {c.message_id for c in view.calls}))
        return folded[0]

    return get


def _is_final_reply(message: Message) -> bool:
    return (
        message.role == "assistant"
        and not message.tool_calls()
        and not (message.metadata or {}).get("partial")
        and not message.aborted  # output cut short: the step is asked again
        and bool(message.blocks)
    )
