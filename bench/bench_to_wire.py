"""Time `to_wire` on a 10,000-message conversation against baselines measured in the same run.

Run: `python bench/bench_to_wire.py [--messages N] [--repeat R]`

The conversation is realistic with some corruption: rounds of user text, an assistant message with
one to three tool calls and a user message with their results; about one round in twenty is
corrupted (a lost result, a duplicated result message, an aborted assistant message, a result
that arrives one round late). Baselines over the same messages:

- `model_copy`: one pydantic `model_copy()` per message (touching every message once);
- `codec`: dump the whole list to JSON with the message codec and load it back.

It also times half and double the size, to show the growth is linear (no quadratic scan).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from wakeful.messages import (  # noqa: E402
    Message,
    Repair,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    dump_messages,
    is_wire_valid,
    load_messages,
    to_wire,
)


def _round(k: int) -> list[Message]:
    calls = [
        ToolCallBlock(id=f"call_{k}_{j}", name="read_file", input={"path": f"src/{k}/{j}.py"})
        for j in range(1 + k % 3)
    ]
    results = [
        ToolResultBlock(call_id=c.id, output=f"contents of {c.input['path']}") for c in calls
    ]
    return [
        Message(id=f"u{k}", role="user", blocks=(TextBlock(text=f"step {k}: look at the code"),)),
        Message(id=f"a{k}", role="assistant", blocks=(TextBlock(text="Reading."), *calls)),
        Message(id=f"r{k}", role="user", blocks=tuple(results)),
    ]


def build(size: int) -> list[Message]:
    """About `size` messages; one round in twenty carries a corruption."""
    out: list[Message] = []
    late: Message | None = None
    k = 0
    while len(out) < size:
        user, reply, results = _round(k)
        out += [user, reply]
        if late is not None:
            out.append(late)  # a result from the previous round: must be moved back
            late = None
        kind = k % 80
        if kind == 10:
            pass  # lost result: needs a placeholder
        elif kind == 30:
            out += [results, results]  # duplicated result message
        elif kind == 50:
            out[-1] = reply.model_copy(update={"aborted": True})
            out.append(results)  # its results are now orphans
        elif kind == 70:
            late = results
        else:
            out.append(results)
        k += 1
    return out[:size]


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    """Best wall time of `repeat` runs, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    messages = build(args.messages)
    repairs: list[Repair] = []
    wire = to_wire(messages, "anthropic", on_repair=repairs.append)
    assert is_wire_valid(wire), "to_wire output must be wire-valid"
    print(f"conversation: {len(messages)} messages, {len(repairs)} repairs on the wire")

    t_wire = best_of(args.repeat, lambda: to_wire(messages, "anthropic"))
    t_copy = best_of(args.repeat, lambda: [m.model_copy() for m in messages])
    t_codec = best_of(args.repeat, lambda: load_messages(dump_messages(messages)))
    print(f"to_wire             {t_wire * 1000:8.2f} ms  (best of {args.repeat})")
    print(
        f"baseline model_copy {t_copy * 1000:8.2f} ms  ratio to_wire/model_copy = {t_wire / t_copy:.2f}"
    )
    print(
        f"baseline codec      {t_codec * 1000:8.2f} ms  ratio to_wire/codec      = {t_wire / t_codec:.2f}"
    )

    print("linearity (time per message should stay flat):")
    for size in (args.messages // 2, args.messages, args.messages * 2):
        sample = build(size)
        t = best_of(args.repeat, lambda s=sample: to_wire(s, "anthropic"))
        print(f"  {size:6d} messages {t * 1000:8.2f} ms  {t / size * 1e6:6.2f} us/message")


if __name__ == "__main__":
    main()
