"""Profile a bench's process, every thread of it: exact Python call counts, and its collector.

Loaded by `sitecustomize` when `WAKEFUL_PROFILE_DIR` names a folder (`bench_fleet.py
--profile DIR` sets it for the workers only). Each thread runs under a `cProfile.Profile` of
its own (the main thread from start-up, every other thread from its first call), and every
garbage collection is counted and timed by generation; at exit the process leaves
`PID-THREAD.prof` (pstats) per thread and `PID-gc.json` in the folder. `report` sums them:
calls per step by thread kind (the event loop's thread, the store's threads, the others) and
by module. The counts are exact and repeat from run to run; cProfile's times are not CPU (they
include waits and the profiler's own cost), so the report gives none.
"""

from __future__ import annotations

import atexit
import collections
import cProfile
import gc
import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

_DIR = os.environ.get("WAKEFUL_PROFILE_DIR", "")
_PROFILES: dict[str, cProfile.Profile] = {}
_GC: dict[str, list[float]] = {"collections": [0, 0, 0], "seconds": [0.0, 0.0, 0.0]}
_STARTED = [0.0]


def _collected(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _STARTED[0] = time.perf_counter()
        return
    generation = info["generation"]
    _GC["collections"][generation] += 1
    _GC["seconds"][generation] += time.perf_counter() - _STARTED[0]


def _profile_thread(*_args: Any) -> None:
    """The first profiling event of a new thread: give it a profiler of its own."""
    sys.setprofile(None)
    profile = cProfile.Profile()
    thread = threading.current_thread()
    _PROFILES[f"{thread.name}-{thread.ident}"] = profile
    profile.enable()


def _dump() -> None:
    pid = os.getpid()
    for name, profile in list(_PROFILES.items()):
        profile.disable()
        safe = re.sub(r"[^\w.-]", "_", name)
        profile.dump_stats(os.path.join(_DIR, f"{pid}-{safe}.prof"))
    times = os.times()
    figures = {**_GC, "user": times.user, "system": times.system, "argv": " ".join(sys.argv)}
    Path(_DIR, f"{pid}-gc.json").write_text(json.dumps(figures))


def start() -> None:
    """Profile this process from now on (see the module docstring)."""
    gc.callbacks.append(_collected)
    main = cProfile.Profile()
    _PROFILES["main"] = main
    threading.setprofile(_profile_thread)
    atexit.register(_dump)
    main.enable()


def _kind(name: str) -> str:
    if name == "main":
        return "event loop thread"
    if name.startswith("wakeful-store"):
        return "store threads"
    return "other threads"


def _group(path: str) -> str:
    """A function's file as a short group: wakeful's package/module, a library, the stdlib."""
    if "wakeful/" in path:
        return "wakeful/" + path.rsplit("wakeful/", 1)[1].removesuffix(".py")
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0]
    if path == "~":
        return "builtins"
    if "_counting" in path:
        return "bench counting"
    match = re.search(r"python3\.\d+/([\w.]+)", path)
    return f"stdlib {match.group(1) if match else path}".removesuffix(".py")


def report(folder: Path, steps: int, top: int = 12) -> str:
    """Python calls per step of the processes profiled into `folder`, by thread kind and,
    within each, by the module of the called function (the `top` most called); then the
    collector's collections and seconds by generation."""
    import pstats

    by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for path in sorted(folder.glob("*.prof")):
        name = path.stem.split("-", 1)[1]
        stats: Any = pstats.Stats(str(path))
        for (file, _line, _func), (_cc, calls, *_rest) in stats.stats.items():
            by_kind[_kind(name)][_group(file)] += calls
    lines = []
    for kind, groups in sorted(by_kind.items()):
        total = sum(groups.values())
        parts = ", ".join(f"{g} {n / steps:.0f}" for g, n in groups.most_common(top))
        lines.append(f"  {kind}: {total / steps:.0f} calls per step ({parts})")
    for path in sorted(folder.glob("*-gc.json")):
        gcs = json.loads(path.read_text())
        counts = "/".join(str(int(n)) for n in gcs["collections"])
        seconds = "/".join(f"{s:.2f}" for s in gcs["seconds"])
        lines.append(
            f"  collector: {counts} collections of generation 0/1/2, {seconds} s; process "
            f"CPU {gcs['user']:.1f} s user, {gcs['system']:.1f} s system"
        )
    return "\n".join(lines)


if _DIR:
    start()
