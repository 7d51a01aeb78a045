"""A proactive summary reuses the step's request (001): the same tools, system prompt and
history, so the provider reads them from its prompt cache, with the summary instruction after
the history; a reply without a summary falls back to the separate summary request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench._model_server import cache_prefix

from wakeful.config import CompactionConfig, Config, RetryConfig
from wakeful.events import CompactionEnded, ReceiptRecorded, UsageRecorded
from wakeful.execution import Runtime
from wakeful.providers import make_provider
from wakeful.providers._anthropic import AnthropicProvider
from wakeful.runner import LiveEvent, compaction_result, rebuild_request, verify_receipt

PAD = "lorem ipsum dolor sit amet " * 12  # ~80 tokens
CACHED = {"match": "^Stop the work here", "replies": [{"text": "## Objective\n- cached summary"}]}
SEPARATE = {
    "match": "^Summarize the conversation below",
    "replies": [{"text": "## Objective\n- separate summary"}],
}
REFUSING = {
    "match": "^Stop the work here",
    "replies": [{"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}],
}


def runtime(tmp_path: Path, rules: list[dict], **compaction: object) -> Runtime:
    path = tmp_path / "script.json"
    replies = {"match": ".", "replies": [{"text": "reply " + PAD}]}
    path.write_text(
        json.dumps(
            {
                "rules": [*rules, replies],
                "chunk_chars": 4096,
                "context_window": 3000,
                "max_output_tokens": 300,
            }
        )
    )
    config = Config(
        compaction=CompactionConfig(**{"reserved": 200, "tail_turns": 1, **compaction}),
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    )
    return Runtime(
        str(tmp_path / "s.db"), model=f"scripted:{path}", workspace=tmp_path, config=config
    )


async def chat_until_compacted(rt: Runtime) -> tuple[str, CompactionEnded]:
    sid: str | None = None
    for i in range(40):
        [turn] = await rt.run(f"turn {i}: {PAD}", session_id=sid)
        assert turn.outcome == "completed"
        sid = sid or rt.store.list_sessions().sessions[0].id
        ended = [e.event for e in rt.store.events(sid, types=["compaction.ended"])]
        if ended:
            assert isinstance(ended[0], CompactionEnded)
            return sid, ended[0]
    raise AssertionError("no compaction in 40 turns")


def receipt(rt: Runtime, sid: str, rid: str | None) -> ReceiptRecorded:
    [found] = [r for r in rt.store.receipts(sid) if r.receipt_id == rid]
    return found


async def test_the_summary_request_extends_the_steps_request(tmp_path: Path) -> None:
    rt = runtime(tmp_path, [CACHED, SEPARATE])
    sid, ended = await chat_until_compacted(rt)
    [summary] = [m for m in rt.store.messages(sid) if m.id == ended.summary_message_id]
    assert "cached summary" in json.dumps(summary.model_dump(mode="json"))
    used = receipt(rt, sid, ended.receipt_id)
    assert used.purpose == "compaction"
    before = [r for r in rt.store.receipts(sid) if r.purpose == "step"]
    step = max((r for r in before if r.message_ids), key=lambda r: len(r.message_ids))
    prefix = {s: d for s, _src, d in used.sections if s.startswith("system.") or s == "tools"}
    assert prefix == {
        s: d for s, _src, d in step.sections if s.startswith("system.") or s == "tools"
    }
    # The history the step sent before is a prefix of what the summary request sent.
    assert used.message_ids[: len(step.message_ids)] == step.message_ids
    assert any(s == "input.compaction" for s, _src, _d in used.sections)
    provider = make_provider(rt.model)
    assert verify_receipt(rt.store, sid, used, provider)
    await rt.aclose()


async def test_a_reply_without_a_summary_falls_back_to_the_separate_request(
    tmp_path: Path,
) -> None:
    rt = runtime(tmp_path, [REFUSING, SEPARATE])
    sid, ended = await chat_until_compacted(rt)
    [summary] = [m for m in rt.store.messages(sid) if m.id == ended.summary_message_id]
    assert "separate summary" in json.dumps(summary.model_dump(mode="json"))
    compaction_receipts = [r for r in rt.store.receipts(sid) if r.purpose == "compaction"]
    assert len(compaction_receipts) == 2  # the cached try, then the separate request
    assert receipt(rt, sid, ended.receipt_id).message_ids == ()  # the separate one: text only
    usage = [e.event for e in rt.store.events(sid, types=["usage.recorded"])]
    tried = compaction_receipts[0].receipt_id
    assert any(isinstance(u, UsageRecorded) and u.receipt_id == tried for u in usage)
    await rt.aclose()


async def test_reuse_cache_off_asks_the_separate_request_only(tmp_path: Path) -> None:
    rt = runtime(tmp_path, [CACHED, SEPARATE], reuse_cache=False)
    sid, ended = await chat_until_compacted(rt)
    assert [r.message_ids for r in rt.store.receipts(sid) if r.purpose == "compaction"] == [()]
    await rt.aclose()


def wire_prefix(rt: Runtime, sid: str, found: ReceiptRecorded) -> tuple[str, int]:
    """The request of `found` as an Anthropic body would be cached (tools, system, each
    message: `bench._model_server.cache_prefix`), and how many of its messages are settled."""
    request = rebuild_request(rt.store, sid, found, "anthropic")
    body = AnthropicProvider("claude-x", context_window=3000, max_output_tokens=300).wire_request(
        request
    )
    messages = body["messages"]
    assert isinstance(messages, list)
    settled = {**body, "messages": messages[: len(messages) - request.volatile]}
    return cache_prefix(body), len(cache_prefix(settled))


WORK = {
    "match": "^work",
    "replies": [
        {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]},
        {"text": "finished"},
    ],
}


@pytest.mark.parametrize("steered", [False, True])
async def test_a_manual_summary_extends_the_last_steps_request(
    tmp_path: Path, steered: bool
) -> None:
    """A manual compaction (between turns, or steered into a turn) asks with the request a
    step would send: the last step's request, byte for byte, is the prefix of the summary's."""
    rt = runtime(tmp_path, [CACHED, SEPARATE, WORK], auto=False)
    sid: str | None = None
    for i in range(4):
        [turn] = await rt.run(f"turn {i}: {PAD}", session_id=sid)
        sid = sid or rt.store.list_sessions().sessions[0].id
    assert sid is not None and not rt.store.events(sid, types=["compaction.ended"])
    if steered:  # sent while the turn's tool runs: it runs at the next step boundary

        def listener(ev: LiveEvent) -> None:
            if ev.kind == "tool_start" and compaction_result(rt.store, sid, "c1") is None:
                rt.compact(sid, tail_turns=1, input_id="c1", resume=False)

        rt.listener = listener
        [turn] = await rt.run("work now", session_id=sid)
        assert turn.final_text == "finished"
    else:
        rt.compact(sid, tail_turns=1, input_id="c1", resume=False)
        await rt.resume(sid)
    result = compaction_result(rt.store, sid, "c1")
    assert result is not None and result.compacted, result
    [ended] = [e.event for e in rt.store.events(sid, types=["compaction.ended"])]
    assert isinstance(ended, CompactionEnded)
    used = receipt(rt, sid, ended.receipt_id)
    receipts = rt.store.receipts(sid)  # in log order
    before = receipts[: receipts.index(used)]
    last_step = [r for r in before if r.purpose == "step"][-1]
    assert used.message_ids  # the history itself, not the text-rendered separate request
    summary_body, _ = wire_prefix(rt, sid, used)
    step_body, step_settled = wire_prefix(rt, sid, last_step)
    assert summary_body[:step_settled] == step_body[:step_settled]  # the cached prefix
    [summary] = [m for m in rt.store.messages(sid) if m.id == ended.summary_message_id]
    assert "cached summary" in json.dumps(summary.model_dump(mode="json"))
    provider = make_provider(rt.model)
    assert verify_receipt(rt.store, sid, used, provider)
    await rt.aclose()
