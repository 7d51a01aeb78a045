"""An eval run's durable record: a session of its own (never the source's) whose log holds the
run's inputs (`eval.started`) and, per (case, model), `eval.case_started` then
`eval.case_ended`; a replay is a run of one case.

Invariant: what a run still has to do is read from its log alone: a pair with a result is
done and never sent again; a pair started without a result was cut by a crash and is sent
again as its next attempt. A run whose last start was written by a process that still lives
belongs to that process: another refuses to resume it (`ConflictError`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from ..errors import ConflictError, NotFoundError, UsageError
from ..events import (
    CaseResult,
    EvalCase,
    EvalCaseEnded,
    EvalCaseStarted,
    EvalEnded,
    EvalStarted,
)
from ..execution import current_owner, owner_is_dead
from ..store import SqlStore, Store

RUN_TYPES = ("eval.started", "eval.case_started", "eval.case_ended", "eval.ended")
MAX_GENERATIONS = 10_000  # runs of one suite in one store, a bound on the id search


@dataclass(slots=True)
class RunView:
    """A run folded from its log: its inputs, each pair's newest attempt and result."""

    run_id: str
    started: EvalStarted
    results: dict[tuple[str, str], CaseResult] = field(default_factory=dict)
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    owner: str = ""
    ended: bool = False

    def pending(self) -> list[tuple[EvalCase, str]]:
        """The (case, model) pairs without a result, model by model in case order."""
        return [
            (case, model)
            for model in self.started.models
            for case in self.started.cases
            if (case.id, model) not in self.results
        ]

    @property
    def total(self) -> int:
        """How many results the run has when it is done."""
        return len(self.started.models) * len(self.started.cases)


def read_run(store: Store, run_id: str) -> RunView:
    """Fold the run `run_id` from its log (`NotFoundError`: no such session, or a session that
    is not a run)."""
    view: RunView | None = None
    for stored in store.events(run_id, types=RUN_TYPES):
        event = stored.event
        if isinstance(event, EvalStarted):
            view = RunView(run_id, event)
        elif view is None:
            break
        elif isinstance(event, EvalCaseStarted):
            view.attempts[(event.case_id, event.model)] = event.attempt
            view.owner = event.owner
        elif isinstance(event, EvalCaseEnded):
            view.results[(event.case_id, event.model)] = event.result
        elif isinstance(event, EvalEnded):
            view.ended = True
    if view is None:
        raise NotFoundError(f"{run_id} is not an eval or replay run")
    return view


def run_id_for(suite_digest: str, generation: int) -> str:
    """The id of a suite's `generation`-th run: derived, so that running the same suite again
    finds its unfinished run with key lookups, no listing."""
    text = f"wakeful-eval\0{suite_digest}\0{generation}"
    return "ses_" + hashlib.sha256(text.encode()).hexdigest()[:24]


def resumable(store: SqlStore, suite_digest: str) -> tuple[str, bool]:
    """The run of this suite to continue, and whether its inputs are written: the first
    generation that is unfinished, or the first free id after the finished ones."""
    for generation in range(MAX_GENERATIONS):
        run_id = run_id_for(suite_digest, generation)
        if store.find_session(run_id) is None:
            return run_id, False
        try:
            if not read_run(store, run_id).ended:
                return run_id, True
        except NotFoundError:  # created, and a crash came before its inputs were written
            return run_id, False
    raise UsageError(f"this suite has run {MAX_GENERATIONS} times in this store")


def create_run(
    store: SqlStore,
    run_id: str | None,
    started: EvalStarted,
    *,
    title: str,
    location: str | None,
    metadata: dict[str, JsonValue],
) -> str:
    """Create the run's session (unless a crash left it without its inputs) and write its
    inputs; return its id. A run is read only once `eval.started` is in its log."""
    from ..store import new_session_id

    sid = run_id or new_session_id()
    if store.find_session(sid) is None:
        store.create_session(sid, title=title, metadata=metadata, location=location)
    store.append(sid, [started])
    return sid


def claim_run(view: RunView) -> str:
    """This process as the run's owner: `ConflictError` when another live process ran it last
    and did not finish."""
    me = current_owner()
    if view.owner and view.owner != me and not view.ended and not owner_is_dead(view.owner):
        pid = view.owner.split("/")[1] if view.owner.count("/") >= 2 else view.owner
        raise ConflictError(f"run {view.run_id} is being run by another process (pid {pid})")
    return me


def start_pairs(
    store: SqlStore, view: RunView, pairs: Sequence[tuple[EvalCase, str]], owner: str
) -> list[int]:
    """Write `eval.case_started` for each pair (one transaction) before any is sent; return
    each pair's attempt number."""
    attempts = [view.attempts.get((c.id, m), 0) + 1 for c, m in pairs]
    events = [
        EvalCaseStarted(case_id=c.id, model=m, attempt=n, owner=owner)
        for (c, m), n in zip(pairs, attempts, strict=True)
    ]
    if events:
        store.append(view.run_id, events)
    for (c, m), n in zip(pairs, attempts, strict=True):
        view.attempts[(c.id, m)] = n
    view.owner = owner
    return attempts


def end_pair(store: SqlStore, view: RunView, case_id: str, model: str, result: CaseResult) -> None:
    """Write the pair's result, once: a pair already done is a `ConflictError` (the one place
    that would run a case twice)."""
    key = (case_id, model)
    if key in view.results:
        raise ConflictError(f"case {case_id} on {model} already has its result")
    attempt = view.attempts.get(key, 1)
    event = EvalCaseEnded(case_id=case_id, model=model, attempt=attempt, result=result)
    store.append(view.run_id, [event])
    view.results[key] = result


def end_run(store: SqlStore, view: RunView) -> None:
    """Mark the run finished (every pair has its result)."""
    if not view.ended and len(view.results) >= view.total:
        store.append(view.run_id, [EvalEnded(results=len(view.results))])
        view.ended = True
