"""Running a run's pending (case, model) pairs: each model its own lane, with a concurrency
limit and a request rate, every pair written as started before its request is sent and its
result written after (`_runs.py`), the grades with it.

Invariant: a pair is sent only after its start is durable and is never sent once its result
is; every store call runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from ..errors import UsageError, WakefulError
from ..events import CaseResult, EvalCase
from ..execution import Runtime, off_loop
from ..providers import Provider
from ..runner import PriceTable
from ._answer import ask, user_request
from ._fork import run_fork, turn_result
from ._graders import JUDGE_SYSTEM, grade
from ._runs import RunView, claim_run, end_pair, end_run, start_pairs
from ._source import Recorded, for_target, load_step, step_receipts

JUDGE_TOKENS = 256


@dataclass(frozen=True, slots=True)
class Limits:
    """How hard one model may be driven: requests at once, and requests per minute (None:
    no rate limit)."""

    concurrency: int = 4
    rpm: float | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """One pair done: how many of the run's pairs are, and this one's outcome."""

    done: int
    total: int
    case_id: str
    model: str
    passed: bool


class _Pace:
    """Spaces a model's requests at least 60/rpm seconds apart (None: no spacing)."""

    def __init__(self, rpm: float | None) -> None:
        self._gap = 60.0 / rpm if rpm else 0.0
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        """Return when the lane's next request may leave."""
        if not self._gap:
            return
        async with self._lock:
            now = time.monotonic()
            delay = self._next - now
            self._next = max(now, self._next) + self._gap
        if delay > 0:
            await asyncio.sleep(delay)


class Engine:
    """Runs the pending pairs of one run (see the module docstring); `run` returns the view."""

    def __init__(
        self,
        runtime: Runtime,
        view: RunView,
        *,
        base: Path,
        limits: Mapping[str, Limits] | None = None,
        progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.store = runtime.store
        self.prices = PriceTable.of(runtime.config.prices)  # costs as the runtime's turns price
        self.view = view
        self.base = base
        self.limits = dict(limits or {})
        self.progress = progress
        self._providers: dict[str, Provider] = {}
        self._steps: dict[str, Recorded] = {}
        self._lanes: dict[str, tuple[asyncio.Semaphore, _Pace]] = {}
        self._owner = ""
        self._done = len(view.results)  # results written, counted on the loop (progress)

    def _lane(self, model: str) -> tuple[asyncio.Semaphore, _Pace]:
        if model not in self._lanes:
            limit = self.limits.get(model, Limits())
            self._lanes[model] = (asyncio.Semaphore(max(1, limit.concurrency)), _Pace(limit.rpm))
        return self._lanes[model]

    def provider(self, spec: str) -> Provider:
        """The one provider of `spec` this run uses (built with the workspace's `[providers]`
        options; `UsageError` when it cannot be built, e.g. no API key)."""
        if spec not in self._providers:
            self._providers[spec] = self.runtime.build_provider(spec)
        return self._providers[spec]

    async def run(self) -> RunView:
        """Send every pending pair, lane by lane; write the run's end when all have results."""
        self._owner = claim_run(self.view)
        for spec in self.view.started.models:  # every model can be built: fail before sending
            self.provider(spec)
        try:
            pairs = self.view.pending()
            await asyncio.gather(*(self._pair(case, model) for case, model in pairs))
            await off_loop(end_run, self.store, self.view)
        finally:
            for provider in self._providers.values():
                await provider.aclose()
        return self.view

    async def _pair(self, case: EvalCase, model: str) -> None:
        gate, pace = self._lane(model)
        async with gate:
            await off_loop(start_pairs, self.store, self.view, [(case, model)], self._owner)
            await pace.wait()  # right before the request leaves
            result = await self._answer(case, model)
            grades = await grade(case.graders, result, case, base=self.base, judge=self._judge)
            passed = result.error is None and all(g.passed for g in grades)
            result = result.model_copy(update={"grades": grades, "passed": passed})
            await off_loop(end_pair, self.store, self.view, case.id, model, result)
        self._done += 1
        if self.progress is not None:
            self.progress(Progress(self._done, self.view.total, case.id, model, passed))

    async def _answer(self, case: EvalCase, model: str) -> CaseResult:
        try:
            if case.kind in ("replay", "fork"):
                await off_loop(self.recorded, case)  # the step exists and verifies
            if case.kind == "replay":
                recorded = await off_loop(self.recorded, case)
                provider = self.provider(model)
                request = await off_loop(for_target, self.store, recorded, provider)
                return await ask(provider, request, model, self.prices)
            if case.kind == "fork":
                return await run_fork(self.runtime, self.view.run_id, case, model)
            if case.kind == "prompt":
                provider = self.provider(model)
                request = user_request(
                    provider.model, case.prompt or "", case.system, provider.max_output_tokens
                )
                return await ask(provider, request, model, self.prices)
            return await self._turn(case, model)
        except WakefulError as err:  # the case cannot run (its source is gone): its result says so
            return CaseResult(error=str(err), error_kind=type(err).__name__)

    def recorded(self, case: EvalCase) -> Recorded:
        """The recorded step a `replay` case sends (read and verified once per run)."""
        if case.id not in self._steps:
            if case.session_id is None or case.receipt_id is None:
                raise UsageError(f"case {case.id}: a replay case names a session and a receipt")
            steps = [
                s
                for s in step_receipts(self.store, case.session_id)
                if s.receipt.receipt_id == case.receipt_id
            ]
            if not steps:
                raise UsageError(
                    f"case {case.id}: no receipt {case.receipt_id} in {case.session_id}"
                )
            options = self.runtime.config.providers.options_for(steps[0].receipt.model)
            self._steps[case.id] = load_step(self.store, case.session_id, steps[0], options)
        return self._steps[case.id]

    async def _judge(self, spec: str, question: str) -> str:
        provider = self.provider(spec)
        result = await ask(
            provider, user_request(provider.model, question, JUDGE_SYSTEM, JUDGE_TOKENS), spec
        )
        if result.error is not None:
            raise UsageError(f"judge {spec}: {result.error}")
        return result.text

    async def _turn(self, case: EvalCase, model: str) -> CaseResult:
        """A fresh session's turn on `model`: its id and input id derive from the run, case and
        model, so after a crash the same session is resumed, never a second one started."""
        key = f"{self.view.run_id}\0{case.id}\0{model}".encode()
        digest = hashlib.sha256(key).hexdigest()
        sid, input_id = f"ses_{digest[:24]}", f"in_{digest[24:48]}"
        runtime = self.runtime
        if await off_loop(self.store.find_session, sid) is None:
            self.runtime.check_model(model)
            meta: dict[str, JsonValue] = {"eval_run": self.view.run_id, "eval_case": case.id}
            await off_loop(
                runtime.create_session,
                session_id=sid,
                model=model,
                agent=runtime.agent_name,
                title=f"eval {case.id} on {model}",
                metadata=meta,
                location=case.location or str(runtime.workspace),
            )
        started = time.monotonic()
        await off_loop(
            runtime.send,
            case.prompt or "",
            session_id=sid,
            input_id=input_id,
            create=False,
            resume=False,
        )
        turns = await runtime.drive_input(sid, input_id)
        elapsed = int((time.monotonic() - started) * 1000)
        turn_id = turns[-1].turn_id if turns else ""
        return await off_loop(turn_result, self.store, sid, turn_id, elapsed_ms=elapsed)
