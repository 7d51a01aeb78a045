"""`runtime.events(session_id)`: typed live and durable events of a turn, each once, in order."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from wakeful.execution import (
    Durable,
    Lifecycle,
    Runtime,
    StepEnd,
    StepStart,
    StreamItem,
    TextChunk,
    ToolProgress,
    TurnEnd,
)
from wakeful.runner import LiveEvent


def runtime(tmp_path: Path, **kw: object) -> Runtime:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "chunk_chars": 3,
                "rules": [
                    {
                        "match": ".",
                        "replies": [
                            {
                                "text": "let me look",
                                "tool_calls": [{"name": "shell", "input": {"command": "echo hi"}}],
                            },
                            {"text": "all done here"},
                        ],
                    }
                ],
            }
        )
    )

    async def allow(name: str, tool_input: dict[str, object]) -> bool:
        return True

    return Runtime(
        str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=tmp_path, ask=allow, **kw
    )  # type: ignore[arg-type]  # Runtime's own keywords


async def collect(rt: Runtime, sid: str) -> list[StreamItem]:
    out: list[StreamItem] = []
    async with rt.events(sid) as stream:
        sent = rt.send("go", session_id=sid)
        async for item in stream:
            out.append(item)
            if isinstance(item, TurnEnd):
                break
    assert sent.session_id == sid
    return out


async def test_a_turn_streams_typed_live_and_durable_events(tmp_path: Path):
    legacy: list[LiveEvent] = []
    rt = runtime(tmp_path, listener=legacy.append)
    sid = rt.create_session().id
    items = await collect(rt, sid)
    text = "".join(i.text for i in items if isinstance(i, TextChunk))
    assert text == "let me lookall done here"
    assert len([i for i in items if isinstance(i, TextChunk)]) > 2  # deltas, not whole replies
    tools = [(i.phase, i.name) for i in items if isinstance(i, ToolProgress) and i.phase != "input"]
    assert tools == [("start", "shell"), ("end", "shell")]
    assert [(i.step, i.attempt) for i in items if isinstance(i, StepStart)] == [(1, 1), (2, 1)]
    ends = [i for i in items if isinstance(i, StepEnd)]
    assert [e.finish_reason for e in ends] == ["tool_calls", "stop"]
    end = items[-1]
    assert isinstance(end, TurnEnd) and end.outcome == "completed"
    # Durable events: every one committed for the turn, once, in log order, and the turn's
    # `turn.ended` before the live turn end.
    durable = [i.event for i in items if isinstance(i, Durable)]
    seqs = [d.seq for d in durable]
    assert seqs == sorted(set(seqs))
    assert seqs == [s.seq for s in rt.store.events(sid, after=seqs[0] - 1)]
    types = [d.type for d in durable]
    assert types[-1] == "turn.ended" and "message.added" in types and "tool.ended" in types
    assert end.turn_id == durable[-1].event.turn_id  # type: ignore[union-attr]  # a TurnEnded
    starts = [i for i in items if isinstance(i, Lifecycle) and i.kind == "turn_start"]
    assert len(starts) == 1
    # The single listener of earlier versions still sees what it saw, and only that.
    assert {e.kind for e in legacy} <= {
        "step",
        "text",
        "reasoning",
        "tool_input",
        "tool_start",
        "tool_end",
        "retry",
        "turn_end",
        "compaction",
    }
    assert "".join(str(e.data["text"]) for e in legacy if e.kind == "text") == text
    await rt.aclose()


async def test_a_closed_stream_ends_and_other_sessions_do_not_leak_in(tmp_path: Path):
    rt = runtime(tmp_path)
    sid, other = rt.create_session().id, rt.create_session().id
    stream = rt.events(sid)
    reader = asyncio.ensure_future(stream.__anext__())
    await rt.run("go", session_id=other)
    await asyncio.sleep(0.05)
    assert not reader.done()  # nothing of the other session's turn reached this stream
    await stream.aclose()
    await asyncio.wait_for(asyncio.gather(reader, return_exceptions=True), 5)
    assert isinstance(reader.exception(), StopAsyncIteration)
    await rt.aclose()
