"""Token estimation speed and the cost of deciding "compact or not" on a long session.

Run: `python bench/bench_compaction.py [--messages N] [--steps S]`

1. Tokens estimated per second: the local estimate (characters / 4 over every block) applied to
   realistic messages one at a time, as the active history does when it reads a message.
2. The decision on an N-message session in SQLite (rounds of user text, an assistant tool call
   and its result; no compaction yet, a window large enough that the answer is "no"):
   - cold: a new runner's first decision (reads the transcript once, estimates every message);
   - warm: each later decision after one more message (reads and estimates only that one);
   - the instruction baseline lookup each attempt also pays (a scan for the epoch's start).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from wakeful.config import CompactionConfig  # noqa: E402
from wakeful.events import InstructionsUpdated, MessageAdded  # noqa: E402
from wakeful.execution._port import StorePort  # noqa: E402
from wakeful.instructions import baseline  # noqa: E402
from wakeful.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock  # noqa: E402
from wakeful.providers import ScriptedProvider  # noqa: E402
from wakeful.runner import BUILTIN_AGENTS, Compactor, RunContext, Section, ToolContext  # noqa: E402
from wakeful.runner._active import ActiveHistory, message_tokens  # noqa: E402
from wakeful.store import open_store  # noqa: E402

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "while",
    "the",
    "build",
    "runs",
    "its",
    "tests",
    "again",
]


def text(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(n))


def conversation(n: int) -> list[Message]:
    """`n` messages in rounds of user text, assistant tool call, tool result, assistant text."""
    out: list[Message] = []
    i = 0
    while len(out) < n:
        call = ToolCallBlock(id=f"call_{i}", name="read_file", input={"path": f"src/mod_{i}.py"})
        out += [
            Message(role="user", blocks=(TextBlock(text=text(40, i)),)),
            Message(role="assistant", blocks=(TextBlock(text=text(20, i)), call)),
            Message(role="user", blocks=(ToolResultBlock(call_id=call.id, output=text(300, i)),)),
            Message(role="assistant", blocks=(TextBlock(text=text(60, i)),)),
        ]
        i += 1
    return out[:n]


def estimate_rate(messages: list[Message]) -> tuple[float, float]:
    start = time.perf_counter()
    tokens = sum(message_tokens(m) for m in messages)
    elapsed = time.perf_counter() - start
    return tokens / elapsed, len(messages) / elapsed


def context(sid: str, workspace: Path) -> RunContext:
    script = {"context_window": 100_000_000, "rules": [{"match": ".", "replies": [{}]}]}
    provider = ScriptedProvider.from_dict(script)
    return RunContext(
        providers=lambda spec: provider,
        model_spec="scripted:bench",
        agent=BUILTIN_AGENTS["build"],
        tools={},
        tool_context=ToolContext(workspace=workspace, session_id=sid),
        compaction=CompactionConfig(),
    )


async def decisions(folder: Path, n: int, steps: int) -> dict[str, float]:
    store = open_store(str(folder / "bench.db"))
    sid = store.create_session().id
    builtin = b"You are a careful agent."
    delta = InstructionsUpdated(delta={"builtin": hashlib.sha256(builtin).hexdigest()})
    store.append(sid, [delta], blobs=[builtin])  # the first delta, as every session has
    messages = conversation(n)
    for i in range(0, n, 500):
        store.append(sid, [MessageAdded(message=m) for m in messages[i : i + 500]])
    sections = [Section("system.agent", "agent:build", BUILTIN_AGENTS["build"].system_prompt)]
    port = StorePort(store, sid, None)
    history = ActiveHistory(port)  # the runner's view, read as a step reads it
    compactor = Compactor(context(sid, folder), port, history)

    start = time.perf_counter()
    await history.refresh()
    assert not await compactor.before_request("turn", 1, sections)
    cold = time.perf_counter() - start

    extra = conversation(steps)
    warm = 0.0
    for message in extra:
        store.append(sid, [MessageAdded(message=message)])
        start = time.perf_counter()
        await history.refresh()
        assert not await compactor.before_request("turn", 1, sections)
        warm += time.perf_counter() - start

    start = time.perf_counter()
    for _ in range(20):
        baseline(store, sid)
    lookup = (time.perf_counter() - start) / 20
    store.close()
    return {"cold": cold, "warm": warm / steps, "baseline": lookup}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    tokens_s, messages_s = estimate_rate(conversation(args.messages))
    with tempfile.TemporaryDirectory() as tmp:
        got = asyncio.run(decisions(Path(tmp), args.messages, args.steps))
    print(f"token estimation: {tokens_s / 1e6:.2f} M tokens/s ({messages_s:,.0f} messages/s)")
    print(f"decide on a {args.messages:,}-message session:")
    print(f"  cold (first decision of a runner, reads the transcript) {got['cold'] * 1000:9.2f} ms")
    print(f"  warm (one new message since the last decision)          {got['warm'] * 1000:9.3f} ms")
    print(
        f"  instruction baseline lookup (once per attempt)          {got['baseline'] * 1000:9.2f} ms"
    )


if __name__ == "__main__":
    main()
