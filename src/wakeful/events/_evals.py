"""Events of an eval run: a session of its own whose log holds the run's inputs and results
(`wakeful replay`, `wakeful eval`; docs/replay.md).

Invariant: the cases and models are written once, in `eval.started`, before any of them runs;
each (case, model) pair is written `eval.case_started` before its request leaves the process
and `eval.case_ended` after, so a restarted run reads from the log what is done (never run
again) and what was cut by a crash (its reply never reached the store: sent again, as the next
attempt).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class _Event(_Model):
    v: int = 1


class EvalCase(_Model):
    """One input of a run. `kind`: `replay` sends the recorded request of a step (`session_id`,
    `receipt_id`), `fork` re-runs that step's turn from the step on a fork (tools really run),
    `prompt` sends `prompt` as a fresh one-message request, `turn` drives a fresh session's
    turn with `prompt` (tools really run at `location`). `graders` are the suite's grader
    tables, as written."""

    id: str
    kind: Literal["replay", "fork", "prompt", "turn"]
    prompt: str | None = None
    system: str | None = None
    session_id: str | None = None
    receipt_id: str | None = None
    turn: int | None = None
    step: int | None = None
    location: str | None = None
    graders: tuple[dict[str, JsonValue], ...] = ()
    to_end: bool = False  # a `fork` also re-sends the later turns' inputs, turn by turn


class ToolCallSeen(_Model):
    """A tool call a reply made: its name and arguments."""

    name: str
    input: JsonValue = None


class Grade(_Model):
    """One grader's verdict on a reply (`detail`: why, in a line)."""

    grader: str
    passed: bool
    detail: str = ""


class TurnSummary(_Model):
    """One turn of a continuation, to compare turn by turn: its number in the source session,
    its last reply, its tool calls, its cost, and why it did not complete (`error`)."""

    turn: int
    text: str = ""
    tool_calls: tuple[ToolCallSeen, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # None: a request's model had no known price
    error: str | None = None


class CaseResult(_Model):
    """What one model answered to one case: the reply, its cost, and the grades.

    `error` is set (and `finish` None) when no reply came; `passed` is every grade passing
    and no error. `session_id` names the session a `turn` case ran in."""

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCallSeen, ...] = ()
    finish: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # None: no known price (or no request), never shown as zero
    latency_ms: int = 0
    error: str | None = None
    error_kind: str | None = None
    grades: tuple[Grade, ...] = ()
    passed: bool = False
    session_id: str | None = None
    request_digest: str | None = None
    turns: tuple[TurnSummary, ...] = ()  # a `fork` case with `to_end`: every turn, in order


class EvalStarted(_Event):
    """A run's inputs: its cases and models (model specs), written before any case runs.
    `source` links a replay to the step it replays (session, receipt, turn, step)."""

    type: Literal["eval.started"] = "eval.started"
    name: str
    kind: Literal["eval", "replay"] = "eval"
    suite_digest: str | None = None
    models: tuple[str, ...]
    cases: tuple[EvalCase, ...]
    source: dict[str, JsonValue] | None = None


class EvalCaseStarted(_Event):
    """One (case, model) about to be sent: `attempt` counts the sends of that pair (a second
    one means the first was cut by a crash); `owner` is the process running the run."""

    type: Literal["eval.case_started"] = "eval.case_started"
    case_id: str
    model: str
    attempt: int = 1
    owner: str = ""


class EvalCaseEnded(_Event):
    """The result of one (case, model): written once, never run again."""

    type: Literal["eval.case_ended"] = "eval.case_ended"
    case_id: str
    model: str
    attempt: int = 1
    result: CaseResult


class EvalEnded(_Event):
    """Every (case, model) of the run has its result."""

    type: Literal["eval.ended"] = "eval.ended"
    results: int = 0
