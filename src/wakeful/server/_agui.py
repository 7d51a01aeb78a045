"""A session's durable log as AG-UI events: one deterministic projection, so a stream resumes.

Each stored event maps to zero or more AG-UI events, numbered `SEQ:K` (the event's seq, the
index among those it maps to): the SSE ids and the cursor of a reconnect. The mapping depends
only on the log, so the events after any cursor are the same however often they are derived;
`AguiView` is the state it needs (the open run, the work state, user inputs admitted but not yet
delivered, the calls a run waits on), rebuilt by feeding it the log's events of `TYPES` up to
the cursor without emitting them.

| log | AG-UI |
| --- | --- |
| `turn.started` | `RUN_STARTED` (`threadId` the session, `runId` the input that started the turn, else the turn id), a `STATE_SNAPSHOT` of the work state, the user messages delivered with it |
| `inbox.delivered` of a user input | `TEXT_MESSAGE_START/CONTENT/END`, role `user` (inside a run; before one, right after its `RUN_STARTED`) |
| `message.added`, assistant | `TEXT_MESSAGE_START/CONTENT/END` of its text; `TOOL_CALL_START/ARGS/END` per call (args: the input as JSON) |
| `message.added`, tool results | `TOOL_CALL_RESULT` per result |
| `work_state.updated` | `STATE_SNAPSHOT` of the whole work state (goal, plan, todos, jobs) |
| `turn.ended` | `RUN_FINISHED`: `success`; `interrupt` with one interrupt per call awaiting approval; `cancelled` for an interrupted turn; `RUN_ERROR` for a failed or blocked one |

Text arrives whole, per message: live deltas are never stored (DESIGN.md), and a stream that
resumes from a cursor can only be made of what is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import TextMessageRole
from pydantic import JsonValue

from ..events import (
    ApprovalRequested,
    InputDelivered,
    InputEnqueued,
    MessageAdded,
    StoredEvent,
    TurnEnded,
    TurnStarted,
    WorkStateUpdated,
)
from ..messages import Message, tool_result_text

# The log's event types the projection reads (a cursor's state is rebuilt from these alone).
TYPES = (
    "inbox.enqueued",
    "inbox.delivered",
    "turn.started",
    "turn.ended",
    "message.added",
    "approval.requested",
    "work_state.updated",
)
# The payload metadata key holding the id an AG-UI client gave a message it sent.
AGUI_ID = "agui_message_id"
# What a resume entry's payload may say (`RunAgentInput.resume`, docs/server.md "AG-UI").
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"decision": {"type": "string", "enum": ["allow", "always", "deny"]}},
    "required": ["decision"],
}


def _text(message_id: str, text: str, role: TextMessageRole) -> list[BaseEvent]:
    return [
        TextMessageStartEvent(message_id=message_id, role=role),
        TextMessageContentEvent(message_id=message_id, delta=text),
        TextMessageEndEvent(message_id=message_id),
    ]


def _assistant(message: Message) -> list[BaseEvent]:
    out: list[BaseEvent] = []
    if text := message.text():
        out += _text(message.id, text, "assistant")
    for call in message.tool_calls():
        out += [
            ToolCallStartEvent(
                tool_call_id=call.id, tool_call_name=call.name, parent_message_id=message.id
            ),
            ToolCallArgsEvent(tool_call_id=call.id, delta=json.dumps(call.input)),
            ToolCallEndEvent(tool_call_id=call.id),
        ]
    return out


def _results(message: Message) -> list[BaseEvent]:
    return [
        ToolCallResultEvent(
            message_id=f"{message.id}.{i}",
            tool_call_id=r.call_id,
            content=tool_result_text(r.output),
            role="tool",
        )
        for i, r in enumerate(message.tool_results())
    ]


@dataclass
class AguiView:
    """The projection's state over one session's log (see the module docstring)."""

    session_id: str
    work: dict[str, JsonValue] = field(default_factory=dict)
    run_id: str | None = None  # the open run
    run_seq: int = 0  # the seq of its `turn.started`
    waiting: list[ApprovalRequested] = field(default_factory=list)
    # user inputs admitted, not delivered: text and the AG-UI client's message id
    inputs: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    delivered: list[tuple[str, str]] = field(default_factory=list)  # before their run started

    def feed(self, stored: StoredEvent) -> list[BaseEvent]:
        """The AG-UI events of one stored event, in order (the state moves on)."""
        event = stored.event
        if isinstance(event, InputEnqueued):
            text, meta = event.payload.get("text"), event.payload.get("metadata")
            if event.kind == "user" and isinstance(text, str):
                known = meta.get(AGUI_ID) if isinstance(meta, dict) else None
                self.inputs[event.input_id] = (text, known if isinstance(known, str) else None)
            return []
        if isinstance(event, InputDelivered):
            found = self.inputs.pop(event.input_id, None)
            if found is None:
                return []
            text, known = found
            message_id = known or event.message_id or event.input_id
            if self.run_id is None:
                self.delivered.append((message_id, text))
                return []
            return _text(message_id, text, "user")
        if isinstance(event, TurnStarted):
            return self._started(stored.seq, event)
        if self.run_id is None:  # nothing else belongs to the stream outside a run
            if isinstance(event, WorkStateUpdated):
                self.work[event.kind] = event.value
            return []
        return self._in_run(event)

    def _started(self, seq: int, event: TurnStarted) -> list[BaseEvent]:
        self.run_id = event.input_ids[0] if event.input_ids else event.turn_id
        self.run_seq = seq
        self.waiting = []
        out: list[BaseEvent] = [
            RunStartedEvent(thread_id=self.session_id, run_id=self.run_id),
            StateSnapshotEvent(snapshot=dict(self.work)),
        ]
        for message_id, text in self.delivered:
            out += _text(message_id, text, "user")
        self.delivered = []
        return out

    def _in_run(self, event: Any) -> list[BaseEvent]:
        if isinstance(event, MessageAdded):
            if event.message.role == "assistant":
                return _assistant(event.message)
            if event.message.role == "user":
                return _results(event.message)
            return []
        if isinstance(event, WorkStateUpdated):
            self.work[event.kind] = event.value
            return [StateSnapshotEvent(snapshot=dict(self.work))]
        if isinstance(event, ApprovalRequested):
            self.waiting.append(event)
            return []
        if isinstance(event, TurnEnded):
            return [self._ended(event)]
        return []

    def _ended(self, event: TurnEnded) -> BaseEvent:
        run_id, self.run_id = self.run_id or event.turn_id, None
        if event.outcome in ("failed", "blocked") or (
            event.outcome == "paused" and event.error_kind != "awaiting_approval"
        ):
            return RunErrorEvent(
                message=event.error or event.outcome, code=event.error_kind or event.outcome
            )
        outcome: Any = RunFinishedSuccessOutcome()
        if event.outcome == "interrupted":
            outcome = RunFinishedCancelledOutcome()
        elif event.outcome == "paused" and self.waiting:
            outcome = RunFinishedInterruptOutcome(
                interrupts=[
                    Interrupt(
                        id=r.call_id,
                        reason="tool_approval",
                        tool_call_id=r.call_id,
                        message=r.preview,
                        response_schema=DECISION_SCHEMA,
                    )
                    for r in self.waiting
                ]
            )
        return RunFinishedEvent(thread_id=self.session_id, run_id=run_id, outcome=outcome)


def parse_cursor(text: str) -> tuple[int, int]:
    """`SEQ` (after that event) or `SEQ:K` (after the K-th AG-UI event of event SEQ) as
    `(seq, k)`, `k` -1 for a whole event; `ValueError` for anything else."""
    seq, _, k = text.strip().partition(":")
    if not seq.isdigit() or len(seq) > 16 or (k and (not k.isdigit() or len(k) > 6)):
        raise ValueError(text)
    return int(seq), int(k) if k else -1
