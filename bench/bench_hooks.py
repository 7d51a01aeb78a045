"""What observing a turn costs: the turn loop's ms per step with everything an observer can
attach (a hook on every kind, one open `runtime.events()` stream, OpenTelemetry spans to the
SDK's in-memory exporter), next to the same loop with nothing attached (the baseline, same
run, interleaved rounds). Scripted provider, SQLite, one process.

    python bench/bench_hooks.py [--steps 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.bench_runner import write_script
from wakeful.config import Config
from wakeful.execution import HOOK_KINDS, HookEvent, Runtime, TurnEnd


async def turn(folder: Path, model: str, steps: int, parts: frozenset[str]) -> tuple[float, int]:
    observed = bool(parts)
    config = Config.model_validate(
        {"agents": {"build": {"max_steps": steps + 5}}, "loop_guard": {"enabled": False}}
    )  # the same call step after step, on purpose
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rt = Runtime(
        str(folder / f"bench-{'-'.join(sorted(parts))}.db"),
        model=model,
        workspace=folder,
        config=config,
        tracer_provider=provider if "spans" in parts else None,
    )
    if "spans" not in parts:
        rt.tracing = None
    seen: list[HookEvent] = []
    items = 0
    reader = None
    if "hooks" in parts:
        for kind in HOOK_KINDS:
            rt.hooks.on(kind, seen.append)  # type: ignore[arg-type]  # every name of HOOK_KINDS
    if observed:
        sid = rt.create_session().id

        async def read() -> int:
            count = 0
            async with rt.events(sid) as stream:
                async for item in stream:
                    count += 1
                    if isinstance(item, TurnEnd):
                        return count
            return count

        if "events" in parts:
            reader = asyncio.ensure_future(read())
        await asyncio.sleep(0)
    else:
        sid = None
    start = time.perf_counter()
    [done] = await rt.run("go", session_id=sid)
    elapsed = time.perf_counter() - start
    assert done.steps == steps and done.outcome == "completed", done
    if reader is not None:
        items = await reader
    await rt.aclose()
    if "spans" in parts:
        assert len(exporter.get_finished_spans()) >= 2 * steps
    if "hooks" in parts:
        assert len(seen) >= 4 * steps
    return elapsed, items


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n = args.steps
    variants = {
        "turn loop, nothing attached (baseline)": frozenset(),
        "  + a sync hook on every kind": frozenset({"hooks"}),
        "  + one open events() stream": frozenset({"events"}),
        "  + OTel spans (SDK, in-memory exporter)": frozenset({"spans"}),
        "  + all three": frozenset({"hooks", "events", "spans"}),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):  # interleaved, so drift on a shared machine hits all
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            model = write_script(folder, n)
            for name, parts in variants.items():
                times[name].append(asyncio.run(turn(folder, model, n, parts))[0])
    bare = statistics.median(times["turn loop, nothing attached (baseline)"])
    print(f"{'measure':<48}{'ms/step':>10}{'added':>10}")
    for name in variants:
        t = statistics.median(times[name])
        print(f"{name:<48}{t / n * 1000:>10.2f}{(t - bare) / n * 1000:>10.2f}")
    print(f"rounds: {args.rounds}, medians, {n} steps per turn")


if __name__ == "__main__":
    main()
