"""Run records (the spec's `SessionRun`): one per turn, derived from the durable log.

Nothing new is stored: a record is folded from `turn.started`, `usage.recorded`,
`receipt.recorded`, `retry.scheduled` and `turn.ended` events between a turn's start and end,
with what the run ran as and why from the session's `session.created` / `session.updated`
(agent and model) and its first input's `inbox.enqueued` (origin, label), and the time it
waited on a person from `approval.requested` / `approval.decided` (docs/runner.md, "Run
records"). A turn is `reverted` when a `session.reverted` hid it (its start at or after the
revert's `from_seq`) and no `session.unreverted` brought it back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `session show` folds the plain event bodies, without the event models
    from ..store import Store

STATUS = {
    "completed": "completed",
    "interrupted": "aborted",
    "failed": "error",
    "blocked": "error",
    "paused": "error",
}


# What a retry entry of a run shows (the spec's `SessionRunRetry`), from its `retry.scheduled`.
RETRY_KEYS = (
    "attempt",
    "max_attempts",
    "error_kind",
    "error",
    "status_code",
    "code",
    "delay_ms",
    "deadline_ms",
)


@dataclass
class RunRecord:
    """One turn as a run: status, times, usage, cost, steps and the retries it took."""

    id: str
    input_ids: tuple[str, ...]
    started_ms: int
    status: str = "running"
    outcome: str | None = None
    ended_ms: int | None = None
    error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cache_read: int = 0  # of `tokens_in`, read from the provider's prompt cache
    tokens_cache_write: int = 0  # of `tokens_in`, written to the provider's prompt cache
    cost_usd: float = 0.0  # of the priced requests
    unpriced: int = 0  # requests whose model had no known price (cost unknown, never zero)
    steps: int = 0
    retries: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False  # its last reply stopped at the output limit
    agent: str | None = None  # the agent profile it ran as
    # agent, model (as asked), and the caps its first request ran under (`RunContext.run_options`)
    options: dict[str, Any] = field(default_factory=dict)
    label: str | None = None  # a host's display label: its first input's `metadata.label`
    origin: dict[str, Any] = field(default_factory=dict)  # kind, source, sender, display
    user_wait_ms: int = 0  # time its approvals waited on a person (docs/approvals.md)
    estimate_ms: int | None = None  # the median wall time of the earlier completed runs
    # A child session's run: the parent's turn and call that asked for it, its depth (0: not a
    # child's run), and the child's earlier turn it resumes (`execution/_children.py`).
    parent_turn_id: str | None = None
    parent_call_id: str | None = None
    depth: int = 0
    resumed_from: str | None = None
    started_seq: int = 0  # the seq of its `turn.started`
    reverted: bool = False  # a rewind hid it (see the module docstring)

    @property
    def cache_hit_ratio(self) -> float | None:
        """The share of the turn's input tokens read from the prompt cache (None: no input)."""
        return None if self.tokens_in <= 0 else round(self.tokens_cache_read / self.tokens_in, 4)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON (the CLI and API contract)."""
        return {
            "id": self.id,
            "input_ids": list(self.input_ids),
            "status": self.status,
            "outcome": self.outcome,
            "started_ms": self.started_ms,
            "ended_ms": self.ended_ms,
            "error": self.error,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_cache_read": self.tokens_cache_read,
            "tokens_cache_write": self.tokens_cache_write,
            "cache_hit_ratio": self.cache_hit_ratio,
            "cost_usd": None if self.unpriced else self.cost_usd,
            "unpriced_requests": self.unpriced,
            "steps": self.steps,
            "retries": self.retries,
            "truncated": self.truncated,
            "agent": self.agent,
            "options": self.options,
            "label": self.label,
            "origin": self.origin,
            "user_wait_ms": self.user_wait_ms,
            "estimate_ms": self.estimate_ms,
            "parent_turn_id": self.parent_turn_id,
            "parent_call_id": self.parent_call_id,
            "depth": self.depth,
            "resumed_from": self.resumed_from,
            "reverted": self.reverted,
        }


def _fold(run: RunRecord, kind: str, event: Mapping[str, Any], at_ms: int) -> None:
    if kind == "usage.recorded":
        run.tokens_in += event["input_tokens"]
        run.tokens_out += event["output_tokens"]
        run.tokens_cache_read += event["cache_read_tokens"]
        run.tokens_cache_write += event["cache_write_tokens"]
        cost = event.get("cost_usd")
        if cost is None:
            run.unpriced += 1
        else:
            run.cost_usd += cost
    elif kind == "receipt.recorded":
        run.steps = max(run.steps, event["step"])
        if event.get("purpose", "step") == "step":
            run.options.setdefault("model", event["model"])
            for key, value in (event.get("options") or {}).items():
                run.options.setdefault(key, value)  # as the run's first request had them
    elif kind == "retry.scheduled":
        run.retries.append({key: event.get(key) for key in RETRY_KEYS})
    elif kind == "turn.ended":
        run.status = STATUS[event["outcome"]]
        run.outcome = event["outcome"]
        run.ended_ms = at_ms
        run.error = event.get("error")
        run.truncated = event["truncated"]


_KINDS = (
    "turn.started",
    "turn.ended",
    "usage.recorded",
    "receipt.recorded",
    "retry.scheduled",
    "session.created",
    "session.updated",
    "inbox.enqueued",
    "approval.requested",
    "approval.decided",
    "session.reverted",
    "session.unreverted",
)


def run_records(store: Store, session_id: str) -> list[RunRecord]:
    """Every turn of the session as a run record, oldest first.

    A turn still `running` whose session reads `interrupted` (its driver died: no live claim,
    see `Store.find_session`) is reported as `aborted`, as the spec shows a run whose process
    died. A local store's events are folded as plain bodies (`PlainReads.plain_events`: no model
    is built for them), any other `Store`'s as their models' fields.
    """
    from ..store import PlainReads

    if isinstance(store, PlainReads):
        events = [
            (e.seq, e.at_ms, e.type, e.data) for e in store.plain_events(session_id, types=_KINDS)
        ]
    else:
        events = [
            (e.seq, e.at_ms, e.type, vars(e.event)) for e in store.events(session_id, types=_KINDS)
        ]
    runs = _Folder().fold(events)
    if runs and runs[-1].status == "running" and store.get_session(session_id).status != "running":
        runs[-1].status = "aborted"
    return runs


class _Folder:
    """Folds a session's events into run records; holds what is read between turns."""

    def __init__(self) -> None:
        self.agent: str | None = None
        self.inputs: dict[str, tuple[str, Mapping[str, Any]]] = {}  # input id -> kind, payload
        self.asked: dict[str, tuple[RunRecord, int]] = {}  # call id -> its run, when asked
        self.undoable: list[RunRecord] = []  # hidden by reverts an unrevert can still undo

    def fold(self, events: Sequence[tuple[int, int, str, Mapping[str, Any]]]) -> list[RunRecord]:
        runs: list[RunRecord] = []
        current: RunRecord | None = None
        for seq, at_ms, kind, event in events:
            if kind in ("session.created", "session.updated"):
                self.agent = event.get("agent") or self.agent
            elif kind == "inbox.enqueued":
                self.inputs[event["input_id"]] = (event["kind"], event["payload"])
            elif kind == "approval.requested" and current is not None:
                self.asked[event["call_id"]] = (current, at_ms)
            elif kind == "approval.decided" and event["call_id"] in self.asked:
                run, asked_ms = self.asked.pop(event["call_id"])
                run.user_wait_ms += max(0, at_ms - asked_ms)
            elif kind in ("session.reverted", "session.unreverted"):
                self.revert(runs, event.get("from_seq") if kind == "session.reverted" else None)
            elif kind == "turn.started":
                current = self.start(event, at_ms, runs)
                current.started_seq = seq
                runs.append(current)
                self.undoable = []  # a new turn's input made every pending revert final
            elif current is not None:
                _fold(current, kind, event, at_ms)
        return runs

    def revert(self, runs: list[RunRecord], from_seq: int | None) -> None:
        """A revert hides the runs started at or after `from_seq`; an unrevert (None) shows
        those the pending reverts hid."""
        if from_seq is None:
            for run in self.undoable:
                run.reverted = False
            self.undoable = []
            return
        hidden = [r for r in runs if r.started_seq >= from_seq and not r.reverted]
        for run in hidden:
            run.reverted = True
        self.undoable += hidden

    def start(self, event: Mapping[str, Any], at_ms: int, runs: list[RunRecord]) -> RunRecord:
        """A new run: its agent, and its origin and label from its first input."""
        run = RunRecord(event["turn_id"], tuple(event["input_ids"]), at_ms, agent=self.agent)
        run.options["agent"] = self.agent
        done = sorted(
            r.ended_ms - r.started_ms
            for r in runs
            if r.status == "completed" and r.ended_ms is not None
        )
        run.estimate_ms = done[len(done) // 2] if done else None
        if run.input_ids and run.input_ids[0] in self.inputs:
            kind, payload = self.inputs[run.input_ids[0]]
            metadata = payload.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            origin = payload.get("origin")
            origin = origin if isinstance(origin, dict) else {}
            run.label = _text(metadata.get("label"))
            run.origin = {
                "kind": "schedule" if "schedule_id" in metadata else kind,
                "source": origin.get("source"),
                "sender": origin.get("sender"),
                "display": _text(metadata.get("display")),
            }
            run.parent_turn_id = _text(metadata.get("parent_turn_id"))
            run.parent_call_id = _text(metadata.get("parent_call_id"))
            run.resumed_from = _text(metadata.get("resumed_from"))
            depth = metadata.get("depth")
            run.depth = depth if isinstance(depth, int) else 0
        return run


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
