"""The two things a user asks for: replay one recorded step to some models (`replay_step`), and
run a suite (`run_suite`, resuming its unfinished run). Both record a run of their own and
never write to a source session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from ..errors import UsageError
from ..events import CaseResult, EvalCase, EvalStarted
from ..execution import Runtime
from ..store import SqlStore
from ._answer import from_message
from ._engine import Engine, Progress
from ._fork import original_turns
from ._runs import RunView, create_run, read_run, resumable
from ._source import Recorded, Step, label, load_step, pick, step_receipts
from ._suite import Suite


@dataclass(frozen=True, slots=True)
class StepReplay:
    """A replay's outcome: the run it recorded, the step as recorded, and its reply as a result
    (the left column of the side-by-side)."""

    view: RunView
    recorded: Recorded
    original: CaseResult


async def replay_step(
    runtime: Runtime,
    session: str,
    models: Sequence[str],
    *,
    turn: int | None = None,
    step: int | None = None,
    fork: bool = False,
    to_end: bool = False,
    progress: Callable[[Progress], None] | None = None,
) -> StepReplay:
    """Send the recorded request of `session`'s step (default: the newest turn's last step),
    verified against its digest, to each of `models`; the results go to a new replay run linked
    to the source (`metadata.replay`). With `fork`, each model instead re-runs the step's turn
    from that step on a fork of its own (`_fork.py`), and `original` is the recorded turn from
    that step on; `to_end` also re-sends the later turns' inputs to each fork, and `turns`
    compares the two turn by turn."""
    if not models:
        raise UsageError("replay: give at least one --model")
    if len(set(models)) != len(models):
        raise UsageError("replay: a model is given twice")
    for spec in models:
        runtime.check_model(spec)
    store = runtime.store
    sid = store.resolve_session_id(session)
    steps = step_receipts(store, sid)
    chosen = steps[pick(steps, turn, step, None)]
    receipt = chosen.receipt
    recorded = load_step(store, sid, chosen, runtime.config.providers.options_for(receipt.model))
    run_id = _replay_run(store, sid, chosen, models, fork, to_end)
    view = await Engine(runtime, read_run(store, run_id), base=Path.cwd(), progress=progress).run()
    if fork:
        original = await original_turns(
            store, sid, receipt.turn_id or "", receipt.step, chosen.turn, to_end
        )
    else:
        original = from_message(
            recorded.reply, recorded.usage, None, recorded.latency_ms or 0, receipt.model
        )
    return StepReplay(view, recorded, original)


def _replay_run(
    store: SqlStore, sid: str, chosen: Step, models: Sequence[str], fork: bool, to_end: bool
) -> str:
    """Record the run of a step's replay (or fork re-run) to `models`, linked to its source
    (`metadata.replay`); its id."""
    receipt = chosen.receipt
    case = EvalCase(
        id=f"turn{chosen.turn}.step{receipt.step}",
        kind="fork" if fork else "replay",
        session_id=sid,
        receipt_id=receipt.receipt_id,
        turn=chosen.turn,
        step=receipt.step,
        to_end=fork and to_end,
    )
    source: dict[str, JsonValue] = {
        "session_id": sid,
        "receipt_id": receipt.receipt_id,
        "turn": chosen.turn,
        "step": receipt.step,
        "model": receipt.model,
        "fork": fork,
    }
    what = "fork re-run" if fork else "replay"
    name = f"{what} of {sid} {label(chosen)}"
    started = EvalStarted(
        name=name, kind="replay", models=tuple(models), cases=(case,), source=source
    )
    location = store.get_session(sid).location
    return create_run(
        store, None, started, title=name, location=location, metadata={"replay": source}
    )


async def run_suite(
    runtime: Runtime, suite: Suite, progress: Callable[[Progress], None] | None = None
) -> RunView:
    """Run `suite`: continue its unfinished run if there is one (what is done is never sent
    again), else start a new one; return the finished run."""
    judges = {str(g["model"]) for c in suite.cases for g in c.graders if g.get("kind") == "judge"}
    for spec in (*suite.models, *sorted(judges)):  # every model can be built: before any write
        runtime.check_model(spec)
    store = runtime.store
    run_id, exists = resumable(store, suite.digest)
    if not exists:
        started = EvalStarted(
            name=suite.name,
            kind="eval",
            suite_digest=suite.digest,
            models=suite.models,
            cases=suite.cases,
        )
        create_run(
            store,
            run_id,
            started,
            title=f"eval {suite.name}",
            location=str(suite.path.parent.resolve()),
            metadata={"eval": {"suite": str(suite.path), "digest": suite.digest}},
        )
    view = read_run(store, run_id)
    engine = Engine(
        runtime, view, base=suite.path.parent.resolve(), limits=suite.limits, progress=progress
    )
    return await engine.run()
