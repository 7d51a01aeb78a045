"""A bench's own process counted as its subprocesses are (`bench/_counting`), plus its store's
units of work by the code that opened them (issue 36 item 1).

`install(folder)` loads `bench/_counting/sitecustomize.py` into this process (statements,
commits and round trips counted on the client, as in every process a bench starts) and wraps
the store backends' `transaction`: each unit is counted, read or write, by the store function
that opened it and the two callers outside the store before it (`where`), e.g.
`w session_write < execution/_writes.py:promote_step < execution/_port.py:_promote`. A call
sent off the event loop (`off_loop`) is named by the coroutine that sent it.
"""

from __future__ import annotations

import contextvars
import importlib.util
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench._counting import HERE

UNITS: Counter[str] = Counter()
"""Units opened since `install`, by kind and opener (see the module docstring)."""
_lock = threading.Lock()
_CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("_CALLER", default="")
_counts: Any = None


def install(folder: Path) -> None:
    """Count this process from now on (idempotent); its figures go to `folder` at exit."""
    global _counts
    if _counts is not None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["WAKEFUL_COUNT_DIR"] = str(folder)
    spec = importlib.util.spec_from_file_location(
        "_bench_counting_site", f"{HERE}/sitecustomize.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # patches sqlite3 now, psycopg when it is imported
    for name, patch in module._PATCHES.items():  # psycopg, wakeful's wire: imported already
        if name in sys.modules:
            patch(sys.modules[name])
    _counts = module.COUNTS
    _wrap_backends()
    _wrap_off_loop()


def figures() -> dict[str, int]:
    """This process's client-side figures so far (`bench/_counting`), with its units."""
    assert _counts is not None, "install first"
    with _counts.lock:
        out = dict(_counts.figures)
    with _lock:
        out["write_units"] = sum(n for k, n in UNITS.items() if k.startswith("w "))
        out["read_units"] = sum(n for k, n in UNITS.items() if k.startswith("r "))
    return out


def _wrap_backends() -> None:
    from wakeful.store import _postgres, _sqlite

    for cls in (_sqlite.SqliteBackend, _postgres.PostgresBackend):
        cls.transaction = _units(cls.transaction)  # type: ignore[method-assign]


def _units(transaction: Callable[..., Any]) -> Callable[..., Any]:
    @contextmanager
    def counted(self: Any, *, write: bool, batched: bool = False) -> Iterator[Any]:
        name = _opener(write)
        with _lock:
            UNITS[name] += 1
        with transaction(self, write=write, batched=batched) as tx:
            yield tx

    return counted


def _opener(write: bool) -> str:
    names: list[str] = []
    entry = ""  # the outermost store function of the call (the store method asked)
    frame: Any = sys._getframe(2)
    while frame is not None and len(names) < 2:
        path = frame.f_code.co_filename
        if "wakeful" in path:
            short = path.rsplit("wakeful/", 1)[-1]
            if "/store/" in path:
                entry = frame.f_code.co_name
            elif "_off_loop" not in short:
                names.append(f"{short}:{frame.f_code.co_name}")
        frame = frame.f_back
    if len(names) < 2 and (caller := _CALLER.get()):
        names.append(caller)
    return ("w " if write else "r ") + entry + " < " + " < ".join(names)


def _wrap_off_loop() -> None:
    """Name the coroutine that sent a call off the loop (the thread's stack stops there)."""
    from wakeful.execution import _off_loop

    run = _off_loop.StoreThreads.run

    async def named(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        frame: Any = sys._getframe(1)
        while frame is not None and "_off_loop" in frame.f_code.co_filename:
            frame = frame.f_back
        if frame is not None:
            short = frame.f_code.co_filename.rsplit("wakeful/", 1)[-1]
            _CALLER.set(f"{short}:{frame.f_code.co_name}")
        return await run(self, fn, *args, **kwargs)

    _off_loop.StoreThreads.run = named  # type: ignore[method-assign]
