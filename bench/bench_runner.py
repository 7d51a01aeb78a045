"""Steps per second of the whole turn loop on the scripted provider (SQLite, one process).

Prints the loop's rate next to two baselines from the same run: the scripted provider streaming
the same replies on its own (same requests, no store, no tools), so the difference is the
runtime's own overhead per step, and a raw `sqlite3` one-row commit with the same pragmas on the
same disk, the floor under each of a step's commits (two per step here: the receipt, then the
reply with the results of its read-only call). Each figure is the median of `--rounds` runs.

It counts the statements and commits the turn sends on the store's write connection (as SQLite
traces them, FTS5's own left out) in a turn of their own, untimed (the tracer writes every bound
parameter into each statement's text: ~18% of the store thread's instructions), and prints the
bytes of the turn's receipts as stored (each names the previous receipt and lists only the new
message ids, issue 25) beside the same receipts encoded whole, as every
receipt was before (all message ids of the request), from the same run.

    python bench/bench_runner.py [--steps 300] [--rounds 3]

`--one-turn` runs the loop's turn once and prints nothing, for an instruction count that load
does not blur (docs/runner.md): the count of a `--steps 250` turn minus a `--steps 50` one,
over 200, is the instructions per step of every thread of the process:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python bench/bench_runner.py --one-turn --steps 250
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from wakeful.config import Config
from wakeful.events import dump_event
from wakeful.execution import Runtime
from wakeful.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock
from wakeful.providers import ModelRequest, make_provider
from wakeful.runner import BUILTIN_AGENTS


def write_script(folder: Path, steps: int) -> str:
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "bench"}}]}
    replies = [call] * (steps - 1) + [{"text": "done"}]
    path = folder / "script.json"
    path.write_text(
        json.dumps({"rules": [{"match": ".", "replies": replies}], "chunk_delay_ms": 0})
    )
    return f"scripted:{path}"


@dataclass(frozen=True)
class ReceiptBytes:
    """A turn's receipts: how many, their stored bytes, and the bytes encoded whole."""

    count: int
    stored: int
    whole: int
    largest_stored: int
    largest_whole: int
    statements: int  # on the write connection during the turn (FTS5's own left out)
    commits: int


async def loop_rate(
    folder: Path, model: str, steps: int, *, traced: bool = False
) -> tuple[float, ReceiptBytes]:
    """The turn's seconds and its receipts; with `traced`, its statements are counted (the
    tracer makes SQLite write every bound parameter into the statement's text and costs the
    store's thread ~18% of its instructions: a timed turn runs without it)."""
    config = Config.model_validate(
        {"agents": {"build": {"max_steps": steps + 5}}, "loop_guard": {"enabled": False}}
    )  # the same call step after step, on purpose
    rt = Runtime(str(folder / "bench.db"), model=model, workspace=folder, config=config)
    sent: list[str] = []
    if traced:
        rt.store.backend._conn.set_trace_callback(  # type: ignore[attr-defined]
            lambda sql: None if sql.startswith("--") else sent.append(sql.split(None, 1)[0].upper())
        )
    start = time.perf_counter()
    [turn] = await rt.run("go")
    elapsed = time.perf_counter() - start
    assert turn.steps == steps and turn.outcome == "completed", turn
    sid = rt.store.list_sessions().sessions[0].id
    whole = [len(dump_event(r).encode()) for r in rt.store.receipts(sid)]  # expanded: no base
    await rt.aclose()
    with sqlite3.connect(folder / "bench.db") as conn:
        stored = [
            n
            for (n,) in conn.execute(
                "SELECT LENGTH(CAST(data AS BLOB)) FROM events "
                "WHERE session_id = ? AND type = 'receipt.recorded'",
                (sid,),
            )
        ]
    assert len(stored) == len(whole) == steps
    counts = len(sent), sent.count("COMMIT")
    return elapsed, ReceiptBytes(
        len(stored), sum(stored), sum(whole), max(stored), max(whole), *counts
    )


async def provider_only(model: str, steps: int) -> float:
    provider = make_provider(model)
    history: list[Message] = [Message(role="user", blocks=(TextBlock(text="go"),))]
    agent = BUILTIN_AGENTS["build"]
    start = time.perf_counter()
    for k in range(steps):
        request = ModelRequest(
            model=provider.model, system=agent.system_prompt, messages=tuple(history)
        )
        finish = None
        async for event in provider.stream(request):
            finish = event
        assert finish is not None and finish.type == "finish"
        history.append(finish.message)
        if k < steps - 1:
            call = finish.message.blocks[-1]
            assert isinstance(call, ToolCallBlock)
            history.append(
                Message(role="user", blocks=(ToolResultBlock(call_id=call.id, output="ok"),))
            )
    elapsed = time.perf_counter() - start
    await provider.aclose()
    return elapsed


def raw_commit_ms(folder: Path, n: int = 300) -> float:
    """Milliseconds per one-row commit of raw `sqlite3` (WAL, synchronous FULL, same disk)."""
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data TEXT)")
    start = time.perf_counter()
    for _ in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (data) VALUES (?)", ("x" * 300,))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one-turn", action="store_true", help="one turn, nothing printed")
    args = parser.parse_args()
    n = args.steps
    if args.one_turn:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(loop_rate(Path(tmp), write_script(Path(tmp), n), n))
        return
    loops: list[float] = []
    bares: list[float] = []
    raws: list[float] = []
    for _ in range(args.rounds):  # interleaved, so drift on a shared machine hits all three
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            model = write_script(folder, n)
            elapsed, sizes = asyncio.run(loop_rate(folder, model, n))
            loops.append(elapsed)
            bares.append(asyncio.run(provider_only(model, n)))
            raws.append(raw_commit_ms(folder))
    with tempfile.TemporaryDirectory() as tmp:  # the statements counted in a turn of their own
        folder = Path(tmp)
        _, sizes = asyncio.run(loop_rate(folder, write_script(folder, n), n, traced=True))
    loop, bare, raw = statistics.median(loops), statistics.median(bares), statistics.median(raws)
    print(f"{'measure':<44}{'steps/s':>10}{'ms/step':>10}")
    print(f"{'whole loop (store, receipts, tools)':<44}{n / loop:>10.0f}{loop / n * 1000:>10.2f}")
    print(f"{'scripted provider alone (baseline)':<44}{n / bare:>10.0f}{bare / n * 1000:>10.2f}")
    print(f"{'runtime overhead per step':<44}{'':>10}{(loop - bare) / n * 1000:>10.2f}")
    print(f"{'raw sqlite3 one-row commit (baseline)':<44}{'':>10}{raw:>10.2f}")
    print(f"rounds: {args.rounds}, medians; target: at least 200 steps/s for the whole loop")
    print(
        f"write statements per step {sizes.statements / n:.2f}, commits per step "
        f"{sizes.commits / n:.2f} (a turn of their own, counted on the write connection)"
    )
    c = sizes.count
    print(f"\nreceipts of the {n}-step turn (the counted one; bytes of the event JSON)")
    print(f"{'encoding':<44}{'total KB':>10}{'B/receipt':>10}{'largest':>10}")
    print(
        f"{'stored: a base and the new ids':<44}{sizes.stored / 1000:>10.1f}"
        f"{sizes.stored / c:>10.0f}{sizes.largest_stored:>10}"
    )
    print(
        f"{'whole, as before (baseline)':<44}{sizes.whole / 1000:>10.1f}"
        f"{sizes.whole / c:>10.0f}{sizes.largest_whole:>10}"
    )


if __name__ == "__main__":
    main()
