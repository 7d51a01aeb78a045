"""Turns run against the in-memory session port: the runner on its own, no store.

These check what the runner does with its port (the order and grouping of its writes), which
the store-backed tests can only see after the fact.
"""

from __future__ import annotations

import json
from pathlib import Path

from wakeful.events import InputDelivered, MessageAdded, ReceiptRecorded
from wakeful.runner import (
    BUILTIN_AGENTS,
    LiveEvent,
    MemoryPort,
    RunContext,
    SharedProviders,
    ToolContext,
    TurnRunner,
    builtin_tools,
)


def context(tmp_path: Path, replies: list[dict], providers: SharedProviders) -> RunContext:
    path = tmp_path / "script.json"
    rules = [{"match": ".", "replies": replies}]
    path.write_text(json.dumps({"rules": rules, "chunk_chars": 4}))
    agent = BUILTIN_AGENTS["build"]
    tools = {n: t for n, t in builtin_tools().items() if n in agent.tools}
    return RunContext(
        providers=providers, model_spec=f"scripted:{path}", agent=agent, tools=tools,
        tool_context=ToolContext(workspace=tmp_path, session_id="ses_memory"),
    )  # fmt: skip


async def test_the_final_reply_commits_with_the_steer_that_arrived_while_it_streamed(
    tmp_path: Path,
):
    providers = SharedProviders()
    steered: list[str] = []

    def listener(ev: LiveEvent) -> None:
        if ev.kind == "text" and not steered:  # another process admits while the reply streams
            steered.append(port.admit("one more thing").input_id)

    port = MemoryPort(listener=listener)
    port.admit("hello")
    await port.promote_steers(0)
    ctx = context(tmp_path, [{"text": "first answer here"}, {"text": "second"}], providers)
    result = await TurnRunner(ctx, port).run(["in_0"])
    await providers.aclose()
    assert result.outcome == "completed" and result.steps == 2
    [write] = [w for w in port.writes if any(isinstance(e, InputDelivered) for e in w)][1:]
    reply, delivered = write[0], [e for e in write if isinstance(e, InputDelivered)]
    assert isinstance(reply, MessageAdded) and reply.message.text() == "first answer here"
    assert [d.input_id for d in delivered] == steered  # the reply and the steer: one write


async def test_the_last_reply_is_written_at_the_step_boundary_before_the_end(tmp_path: Path):
    providers = SharedProviders()
    port = MemoryPort()
    port.admit("hello")
    await port.promote_steers(0)
    ctx = context(tmp_path, [{"text": "done"}], providers)
    result = await TurnRunner(ctx, port).run(["in_0"])
    await providers.aclose()
    assert result.outcome == "completed" and result.final_text == "done"
    kinds = [[type(e).__name__ for e in w] for w in port.writes[1:]]
    assert kinds == [
        ["TurnStarted"],
        ["ReceiptRecorded"],
        ["MessageAdded", "UsageRecorded"],  # the promotion found nothing: the reply alone
        ["TurnEnded"],  # durable before `turn.ending`: a crash there needs no new request
    ]


async def test_section_blobs_are_sent_once_per_port(tmp_path: Path):
    providers = SharedProviders()
    port = MemoryPort()
    port.admit("hello")
    await port.promote_steers(0)
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "x"}}]}
    ctx = context(tmp_path, [call, call, {"text": "done"}], providers)
    result = await TurnRunner(ctx, port).run(["in_0"])
    await providers.aclose()
    assert result.steps == 3
    receipts = [s.event for s in port.log if isinstance(s.event, ReceiptRecorded)]
    referenced = [digest for r in receipts for _id, _source, digest in r.sections]
    assert len(receipts) == 3 and set(referenced) <= set(port.blobs)
    assert port.blob_writes == len(set(referenced)) < len(referenced)  # each content once
