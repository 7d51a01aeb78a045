"""Run records (the spec's `SessionRun`): one per turn, derived from the durable log.

Nothing new is stored: a record is folded from `turn.started`, `usage.recorded`,
`receipt.recorded`, `retry.scheduled` and `turn.ended` events between a turn's start and end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `session show` folds the plain event bodies, without the event models
    from ..store import Store

STATUS = {"completed": "completed", "interrupted": "aborted", "failed": "error", "blocked": "error",
          "paused": "error"}  # fmt: skip


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
    cost_usd: float = 0.0
    steps: int = 0
    retries: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False  # its last reply stopped at the output limit

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
            "cost_usd": self.cost_usd,
            "steps": self.steps,
            "retries": self.retries,
            "truncated": self.truncated,
        }


def _fold(run: RunRecord, kind: str, event: Mapping[str, Any], at_ms: int) -> None:
    if kind == "usage.recorded":
        run.tokens_in += event["input_tokens"]
        run.tokens_out += event["output_tokens"]
        run.tokens_cache_read += event["cache_read_tokens"]
        run.tokens_cache_write += event["cache_write_tokens"]
        run.cost_usd += event["cost_usd"]
    elif kind == "receipt.recorded":
        run.steps = max(run.steps, event["step"])
    elif kind == "retry.scheduled":
        run.retries.append(
            {
                "attempt": event["attempt"],
                "error_kind": event["error_kind"],
                "deadline_ms": event["deadline_ms"],
            }
        )
    elif kind == "turn.ended":
        run.status = STATUS[event["outcome"]]
        run.outcome = event["outcome"]
        run.ended_ms = at_ms
        run.error = event.get("error")
        run.truncated = event["truncated"]


def run_records(store: Store, session_id: str) -> list[RunRecord]:
    """Every turn of the session as a run record, oldest first.

    A turn still `running` whose session reads `interrupted` (its driver died: no live claim,
    see `SqlStore.find_session`) is reported as `aborted`, as the spec shows a run whose process
    died. A local store's events are folded as plain bodies (`SqlStore.plain_events`: no model
    is built for them), any other `Store`'s as their models' fields.
    """
    from ..store import SqlStore

    kinds = ["turn.started", "turn.ended", "usage.recorded", "receipt.recorded", "retry.scheduled"]
    if isinstance(store, SqlStore):
        events = [(e.at_ms, e.type, e.data) for e in store.plain_events(session_id, types=kinds)]
    else:
        events = [(e.at_ms, e.type, vars(e.event)) for e in store.events(session_id, types=kinds)]
    runs: list[RunRecord] = []
    current: RunRecord | None = None
    for at_ms, kind, event in events:
        if kind == "turn.started":
            current = RunRecord(event["turn_id"], tuple(event["input_ids"]), at_ms)
            runs.append(current)
        elif current is not None:
            _fold(current, kind, event, at_ms)
    if runs and runs[-1].status == "running" and store.get_session(session_id).status != "running":
        runs[-1].status = "aborted"
    return runs
