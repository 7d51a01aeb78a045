"""Durable event types: the facts of a session's log.

Each event is a frozen pydantic model discriminated by `type` and carries a schema `v`ersion.
An event is the only way a session changes; projections are derived from events in the same
transaction (see `wakeful.store`). Live-only deltas (streamed text) are never events.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ..errors import CorruptStateError
from ..messages import Message
from ._evals import EvalCaseEnded, EvalCaseStarted, EvalEnded, EvalStarted
from ._marks import NO_INSTRUCTION_VALUE
from ._shaping import (
    ArtifactRecorded,
    ExtensionStateSet,
    HistoryEdited,
    MetadataUpdated,
    SessionReverted,
    SessionUnreverted,
)

Delivery: TypeAlias = Literal["steer", "queue"]
InputKind: TypeAlias = Literal[
    "user", "synthetic", "subagent_report", "compaction", "move", "approval"
]
CONTROL_KINDS: frozenset[str] = frozenset({"compaction", "move", "approval"})
Decision: TypeAlias = Literal["allow", "deny", "always"]
Outcome: TypeAlias = Literal["completed", "interrupted", "failed", "paused", "blocked"]
ToolStatus: TypeAlias = Literal["completed", "failed"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    v: int = 1


class SessionCreated(_Event):
    type: Literal["session.created"] = "session.created"
    title: str | None = None
    agent: str | None = None
    model: str | None = None
    parent_id: str | None = None
    root_id: str | None = None
    forked_from: str | None = None
    fork_seq: int | None = None
    metadata: dict[str, JsonValue] | None = None
    # Where the session lives: its workspace root, absolute (None: created without one, before
    # locations were recorded; such a session runs where its driver is).
    location: str | None = None


class SessionUpdated(_Event):
    """Title, agent, model or archive marker changed (absent fields are unchanged)."""

    type: Literal["session.updated"] = "session.updated"
    title: str | None = None
    agent: str | None = None
    model: str | None = None
    archived: bool | None = None


class SessionMoved(_Event):
    """A `move` control item changed the session's location (`previous` -> `location`)."""

    type: Literal["session.moved"] = "session.moved"
    location: str
    previous: str | None = None
    input_id: str | None = None


class InputEnqueued(_Event):
    """An input admitted to the inbox. `actor` is who admitted it (docs/access.md, "Who did
    what": a server's user, `operator`, or `local:NAME`); None for what the runtime admits
    itself (a subagent's report, a continuation) and for inputs admitted before it was kept."""

    type: Literal["inbox.enqueued"] = "inbox.enqueued"
    input_id: str
    kind: InputKind
    delivery: Delivery = "steer"
    payload: dict[str, JsonValue]
    actor: str | None = None  # stored without the key when None (`dump_event`)


class InputDelivered(_Event):
    """An inbox item left the inbox and, unless it is a control item, became a transcript message.

    Version 2 names the message (`message_id`) instead of copying it: the message is derived
    from the `inbox.enqueued` payload by `wakeful.store`'s `input_message`, so a delivered input
    is stored once. Version 1 events carry the whole `message` and stay readable.
    """

    type: Literal["inbox.delivered"] = "inbox.delivered"
    input_id: str
    message: Message | None = None
    message_id: str | None = None


class InputRejected(_Event):
    """A malformed inbox item was settled without delivery (invariant 4)."""

    type: Literal["inbox.rejected"] = "inbox.rejected"
    input_id: str
    reason: str


class MessageAdded(_Event):
    type: Literal["message.added"] = "message.added"
    message: Message
    turn_id: str | None = None


class TurnStarted(_Event):
    type: Literal["turn.started"] = "turn.started"
    turn_id: str
    input_ids: tuple[str, ...] = ()


class TurnEnded(_Event):
    """A turn's terminal outcome; `truncated`: its last reply stopped at the output limit."""

    type: Literal["turn.ended"] = "turn.ended"
    turn_id: str
    outcome: Outcome
    error: str | None = None
    error_kind: str | None = None
    truncated: bool = False


class ToolCallStarted(_Event):
    """Written before a tool's side effects begin (invariant 6)."""

    type: Literal["tool.started"] = "tool.started"
    call_id: str
    message_id: str
    name: str
    input: dict[str, JsonValue] = Field(default_factory=dict)


class ToolCallEnded(_Event):
    type: Literal["tool.ended"] = "tool.ended"
    call_id: str
    message_id: str
    status: ToolStatus
    partial: bool = False


class HostedToolCall(_Event):
    """A call the provider ran itself (a server tool: Anthropic's `web_search`), kept as a call
    with its outcome (issue 37 item 23). Written with the reply that holds it, in the same
    commit: nothing of ours runs, so there is no `tool.started` to fence and no running state
    for recovery to fail. `status`: `failed` when its result block is an error or missing."""

    type: Literal["tool.hosted"] = "tool.hosted"
    call_id: str
    message_id: str
    name: str
    input: dict[str, JsonValue] = Field(default_factory=dict)
    status: ToolStatus


class ApprovalRequested(_Event):
    """A call whose permission is `ask` waits for a decision nobody present could give.

    Written with the assistant message that holds the call, instead of its `tool.started`;
    `preview` is what the person deciding is shown (the command, or the diff of a write).
    """

    type: Literal["approval.requested"] = "approval.requested"
    call_id: str
    message_id: str
    name: str
    input: dict[str, JsonValue] = Field(default_factory=dict)
    preview: str = ""


class ApprovalDecided(_Event):
    """A decision on a call that needed approval: `allow` (once), `always` (this tool, for the
    rest of the session) or `deny`. `input_id` names the inbox item that carried it (a decision
    given later, from the CLI, the API or the inspector); None when given on a terminal while
    the turn ran. `name` is the tool's name when known."""

    type: Literal["approval.decided"] = "approval.decided"
    call_id: str
    decision: Decision
    name: str | None = None
    input_id: str | None = None


class ReceiptRecorded(_Event):
    """The exact prompt of one physical attempt, persisted before the request (invariant 7).

    The request's history is named by message ids. `base` None: `message_ids` is the whole list
    (every receipt before issue 25). `base` (receipt id, kept): the list is the first `kept`
    messages of that earlier receipt of the session, then `message_ids` (only what is new), so a
    turn's receipts grow with its steps, not with the square of its history
    (`docs/runner.md`). `expand` applies the rule; the store's `receipts()` hands out
    receipts already expanded.
    """

    type: Literal["receipt.recorded"] = "receipt.recorded"
    receipt_id: str
    turn_id: str | None = None  # None: a request outside any turn (a manual compaction)
    step: int
    attempt: int
    model: str
    request_digest: str
    sections: tuple[tuple[str, str, str], ...] = ()
    message_ids: tuple[str, ...] = ()
    base: tuple[str, int] | None = None
    purpose: Literal["step", "compaction"] = "step"
    # The run options in force besides the model (`RunContext.run_options`: the agent's step
    # allowance, the output limit, the retry budget, the session budget's caps), read by the run
    # record: on a turn's first step, and on a later one whose options changed; else None.
    options: dict[str, JsonValue] | None = None
    # The OpenTelemetry trace and span (the step's) this request was sent under, when tracing
    # is on (`docs/tracing.md`): a receipt and its trace find each other.
    trace_id: str | None = None
    span_id: str | None = None

    def expand(self, base_ids: list[str] | None) -> list[str]:
        """The complete message ids of the request, built in place from `base_ids`, the complete
        ids of the `base` receipt (None for a receipt without one): a chain of receipts expands
        in time linear in what they store. Raises `CorruptStateError` when the base is missing
        or holds fewer than `kept` messages."""
        if self.base is None:
            return list(self.message_ids)
        rid, kept = self.base
        if base_ids is None or not 0 <= kept <= len(base_ids):
            raise CorruptStateError(
                f"receipt {self.receipt_id} extends the first {kept} messages of {rid}, "
                f"which has {'no list' if base_ids is None else len(base_ids)}"
            )
        del base_ids[kept:]
        base_ids.extend(self.message_ids)
        return base_ids


class UsageRecorded(_Event):
    """What one request used and cost. `input_tokens` counts every input token, including
    those read from (`cache_read_tokens`) and written to (`cache_write_tokens`) the provider's
    prompt cache; `cost_usd` prices each kind at its own rate, and is None (stored without the
    key) when the model had no known price: unknown, never zero. `receipt_id` names the
    request's receipt (None: recorded before receipts were linked)."""

    type: Literal["usage.recorded"] = "usage.recorded"
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    receipt_id: str | None = None


class BudgetRaised(_Event):
    """`wakeful approve SESSION --budget` changed a root session's `[budgets]` limits, in its
    log: `set_*` replaces the limit in force, `add_*` adds to it (docs/spend.md)."""

    type: Literal["budget.raised"] = "budget.raised"
    add_tokens: int = 0
    add_usd: float = 0.0
    set_tokens: int | None = None
    set_usd: float | None = None
    actor: str | None = None  # who raised it (docs/access.md); None: not recorded


class BudgetNoticed(_Event):
    """A session's spend reached the notice share (`[budgets] notice_percent`) of one of its
    limits, or of its agent's or user's (`scope`, e.g. `agent build on 2026-12-07`; None: the
    session's own): written once per limit in force, before the request it was found at."""

    type: Literal["budget.noticed"] = "budget.noticed"
    limit_kind: Literal["tokens", "usd"]
    used: float
    limit: float
    percent: int
    scope: str | None = None  # stored without the key when None (`dump_event`)

    @property
    def text(self) -> str:
        """The notice as the terminal and the log show it."""
        share = round(100 * self.used / self.limit) if self.limit else 100
        if self.limit_kind == "tokens":
            spent = f"{int(self.used):,} of its {int(self.limit):,} tokens"
        else:
            spent = f"${self.used:.4f} of its ${self.limit:.4f}"
        who = self.scope or "the session"
        return f"budget: {who} used {spent} ({share}%, notice at {self.percent}%)"


class RetryScheduled(_Event):
    """A durable retry deadline (invariant 9)."""

    type: Literal["retry.scheduled"] = "retry.scheduled"
    turn_id: str | None = None  # stored without the key when None (`dump_event`)
    step: int
    attempt: int
    deadline_ms: int
    error_kind: str
    error: str
    # What the run record's retry entry shows (`runner/_runs.py`); None on retries recorded
    # before they were kept, or when the failure had none (no HTTP status, no code).
    delay_ms: int | None = None
    status_code: int | None = None
    code: str | None = None
    max_attempts: int | None = None  # the budget's size: the first attempt plus `max_retries`


class RetryCleared(_Event):
    type: Literal["retry.cleared"] = "retry.cleared"


class InterruptRequested(_Event):
    """Someone asked the session's driver, wherever it runs, to stop the current turn."""

    type: Literal["session.interrupt_requested"] = "session.interrupt_requested"
    reason: str = "user"
    actor: str | None = None  # who asked (docs/access.md); None: not recorded


class SessionError(_Event):
    type: Literal["session.error"] = "session.error"
    error: str
    input_id: str | None = None


CompactionTrigger: TypeAlias = Literal["auto", "manual", "overflow", "idle"]


class CompactionEnded(_Event):
    """A compaction boundary: the summary message stands in for history through `through_seq`.

    Active history is the summary, then the retained tail from `first_kept_id` on (none: no
    tail), then everything after the summary. `instructions` snapshots the current instruction
    values (source key -> digest): the new epoch's initial values (None when the session had
    no delta yet). `input_id` names the manual compaction request it answers.
    """

    type: Literal["compaction.ended"] = "compaction.ended"
    summary_message_id: str
    through_seq: int
    reason: CompactionTrigger = "auto"
    first_kept_id: str | None = None
    replaced: int = 0
    dropped: int = 0
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    effective_tokens: int = 0
    receipt_id: str | None = None
    input_id: str | None = None
    instructions: dict[str, str] | None = None  # None: recorded before the first delta
    restored_files: tuple[str, ...] = ()  # files read again and attached after the summary


class CompactionTail(_Event):
    """A compaction under the `tail` strategy: no summary; from now on every tool result in a
    message before `hide_before_id` (in request order) is sent as a fixed stub, the stored
    messages untouched. `hidden` counts the tool results this one newly hid; `through_seq` is
    the seq of the last message before the hide point."""

    type: Literal["compaction.tail"] = "compaction.tail"
    reason: CompactionTrigger = "auto"
    hide_before_id: str
    through_seq: int
    hidden: int = 0
    effective_tokens: int = 0
    input_id: str | None = None
    # Media blocks of the hidden messages (images, audio, video, documents) go as labels too
    # (issue 37 item 20); False on hide points recorded before, which hid tool results only.
    media: bool = False


class CompactionSkipped(_Event):
    """A compaction that did not run: nothing older than the tail, or an interrupt aborted it."""

    type: Literal["compaction.skipped"] = "compaction.skipped"
    reason: CompactionTrigger
    # not-needed: an idle compaction found the session active again, or not long (`idle`)
    why: Literal["nothing-to-compact", "aborted", "not-needed"]
    input_id: str | None = None


class CompactionFailed(_Event):
    """A compaction that failed (the summary request failed, or came back empty)."""

    type: Literal["compaction.failed"] = "compaction.failed"
    reason: CompactionTrigger
    error: str
    error_kind: str
    input_id: str | None = None


class InstructionsUpdated(_Event):
    """Instruction value delta: source key -> SHA-256 digest, or `INSTRUCTION_REMOVED` /
    `INSTRUCTION_ABSENT` for a source without a value."""

    type: Literal["instructions.updated"] = "instructions.updated"
    delta: dict[str, str]
    text: str | None = None

    def values(self) -> dict[str, str]:
        """The delta's sources that have a value, key -> digest, in order."""
        return {k: d for k, d in self.delta.items() if d not in NO_INSTRUCTION_VALUE}


class WorkStateUpdated(_Event):
    """A goal, plan or todo list set by a tool; each replaces the previous value of its kind."""

    type: Literal["work_state.updated"] = "work_state.updated"
    kind: Literal["goal", "plan", "todos", "jobs"]
    value: JsonValue


class MessagesHidden(_Event):
    """Messages removed from the transcript (an Agents SDK `pop_item` or `clear_session`).

    The `message.added` events stay in the log (readable by `wakeful log`); the projection
    drops the named messages, so `messages()` and every surface built on it no longer show them.
    """

    type: Literal["messages.hidden"] = "messages.hidden"
    message_ids: tuple[str, ...]
    reason: str | None = None


SessionEvent: TypeAlias = Annotated[
    SessionCreated
    | SessionUpdated
    | SessionMoved
    | InputEnqueued
    | InputDelivered
    | InputRejected
    | MessageAdded
    | TurnStarted
    | TurnEnded
    | ToolCallStarted
    | ToolCallEnded
    | HostedToolCall
    | ApprovalRequested
    | ApprovalDecided
    | ReceiptRecorded
    | UsageRecorded
    | BudgetRaised
    | BudgetNoticed
    | RetryScheduled
    | RetryCleared
    | SessionError
    | InterruptRequested
    | CompactionEnded
    | CompactionTail
    | CompactionSkipped
    | CompactionFailed
    | InstructionsUpdated
    | WorkStateUpdated
    | MessagesHidden
    | SessionReverted
    | SessionUnreverted
    | HistoryEdited
    | ArtifactRecorded
    | MetadataUpdated
    | ExtensionStateSet
    | EvalStarted
    | EvalCaseStarted
    | EvalCaseEnded
    | EvalEnded,
    Field(discriminator="type"),
]
