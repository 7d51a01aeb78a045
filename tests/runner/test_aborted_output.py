"""Output cut short is kept (001): what an interrupt or a shutdown cut off mid-stream stays in
the transcript as an `aborted` assistant message, with the usage the provider reported, and is
never sent to a model again."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.allow import ALLOW_WRITES
from tests.execution.helpers import check_session, write_script
from wakeful.cli._tools_view import transcript_lines
from wakeful.config import Config, ExecutionConfig, RetryConfig
from wakeful.events import MessageAdded, UsageRecorded
from wakeful.execution import Runtime, run_worker
from wakeful.messages import TextBlock, ThinkingBlock
from wakeful.runner import LiveEvent
from wakeful.runner._prompt import rebuild_request

CONFIG = Config(
    permissions=ALLOW_WRITES,
    retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    execution=ExecutionConfig(poll_interval_ms=10, lease_ms=300),
)
LONG = "streamed words " * 40


def runtime(db: str, tmp_path: Path) -> Runtime:
    model = write_script(
        tmp_path / "script.json",
        [
            {"match": "long", "replies": [{"reasoning": "let me think", "text": LONG}]},
            {"match": ".", "replies": [{"text": "short answer"}]},
        ],
        chunk_delay_ms=5,
        chunk_chars=5,
    )
    return Runtime(db, model=model, workspace=tmp_path, config=CONFIG)


def after_text(chunks: int, action: object) -> object:
    seen = [0]

    def listener(ev: LiveEvent) -> None:
        if ev.kind == "text":
            seen[0] += 1
            if seen[0] == chunks:
                action(ev)  # type: ignore[operator]

    return listener


async def test_an_interrupt_keeps_the_streamed_text_as_an_aborted_message(
    db_url: str, tmp_path: Path
) -> None:
    rt = runtime(db_url, tmp_path)
    rt.listener = after_text(3, lambda ev: rt.interrupt(ev.session_id))  # type: ignore[assignment]
    [turn] = await rt.run("a long one")
    assert turn.outcome == "interrupted"
    sid = turn_session(rt)
    [aborted] = [m for m in rt.store.messages(sid) if m.aborted]
    assert aborted.role == "assistant" and aborted.metadata is not None
    assert aborted.metadata["aborted_by"] == "interrupt"
    assert aborted.metadata["turn_id"] == turn.turn_id
    text = aborted.text()
    assert len(text) >= 15 and LONG.startswith(text) and text != LONG
    assert isinstance(aborted.blocks[0], ThinkingBlock)
    assert aborted.blocks[0].text == "let me think"
    # The usage the provider reported before the cut is recorded right after it.
    events = rt.store.events(sid, types=["message.added", "usage.recorded"])
    i = next(
        k
        for k, e in enumerate(events)
        if isinstance(e.event, MessageAdded) and e.event.message.id == aborted.id
    )
    usage = events[i + 1].event
    assert isinstance(usage, UsageRecorded) and usage.input_tokens > 0
    assert usage.output_tokens == 0
    assert ("assistant, aborted (not sent to the model)", text) in transcript_lines(
        rt.store.plain_messages(sid)
    )
    # The next request does not contain it.
    rt.listener = None
    [again] = await rt.run("and now?", session_id=sid)
    assert again.outcome == "completed" and again.final_text == "short answer"
    last = rt.store.receipts(sid)[-1]
    request = rebuild_request(rt.store, sid, last, rt_provider_name(rt))
    sent = [b.text for m in request.messages for b in m.blocks if isinstance(b, TextBlock)]
    assert sent and not any("streamed words" in t for t in sent)
    assert all(not m.aborted for m in request.messages)
    check_session(rt.store, sid)
    await rt.aclose()


async def test_a_shutdown_keeps_the_streamed_text_and_the_next_driver_asks_again(
    db_url: str, tmp_path: Path
) -> None:
    rt = runtime(db_url, tmp_path)
    sid = rt.send("a long one", resume=False).session_id
    stop = asyncio.Event()
    rt.listener = after_text(2, lambda ev: stop.set())  # type: ignore[assignment]
    await run_worker(rt, stop=stop)
    [turn] = rt.store.turns(sid)
    assert turn.status == "running"  # a shutdown leaves the turn open
    [aborted] = [m for m in rt.store.messages(sid) if m.aborted]
    assert aborted.metadata is not None and aborted.metadata["aborted_by"] == "shutdown"
    assert LONG.startswith(aborted.text()) and aborted.text()
    await rt.aclose()
    successor = runtime(db_url, tmp_path)
    await asyncio.sleep(CONFIG.execution.lease_ms / 1000 + 0.1)
    stats = await run_worker(successor, once=True)
    assert stats.turns == 1
    [turn] = successor.store.turns(sid)
    assert turn.status == "completed"
    replies = [m for m in successor.store.messages(sid) if m.role == "assistant"]
    assert [m.aborted for m in replies] == [True, False]
    assert replies[-1].text() == LONG  # asked again, from the start
    check_session(successor.store, sid)
    await successor.aclose()


def turn_session(rt: Runtime) -> str:
    return rt.store.list_sessions().sessions[0].id


def rt_provider_name(rt: Runtime) -> str:
    return "scripted"
