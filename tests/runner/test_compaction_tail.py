"""The `tail` compaction strategy: older tool results hidden on the wire, no summary (001)."""

from __future__ import annotations

from pathlib import Path

from bench._model_server import cache_prefix

from wakeful.events import CompactionTail
from wakeful.messages import ToolResultBlock
from wakeful.providers import make_provider
from wakeful.providers._anthropic import AnthropicProvider
from wakeful.runner import compaction_result, rebuild_request, verify_receipt
from wakeful.runner._tail import HIDDEN_RESULT

from .test_compaction import SUMMARY_RULE, chat, runtime, script

BIG = "x = 1  # a line of a long file\n" * 70  # ~2,200 characters, ~550 tokens a read


def reads(tmp_path: Path) -> str:
    (tmp_path / "big.py").write_text(BIG)
    read = {"tool_calls": [{"name": "read_file", "input": {"path": "big.py"}}]}
    return script(
        tmp_path,
        [SUMMARY_RULE, {"match": "^turn", "replies": [read, {"text": "read it"}]}],
        context_window=6000,
        max_output_tokens=500,
    )


def results(messages: list) -> list[str]:
    return [
        b.output
        for m in messages
        for b in m.blocks
        if isinstance(b, ToolResultBlock) and isinstance(b.output, str)
    ]


async def test_a_tool_heavy_session_hides_older_results_before_it_summarizes(tmp_path: Path):
    model = reads(tmp_path)
    rt = runtime(tmp_path, model, strategy="tail")
    sid = await chat(rt, [f"turn {i}" for i in range(40)])  # ~22,000 tokens of tool results

    tails = [e.event for e in rt.store.events(sid, types=["compaction.tail"])]
    ended = rt.store.events(sid, types=["compaction.ended"])
    assert 3 <= len(tails) <= 20, len(tails)  # bounded: not at every step
    assert all(isinstance(t, CompactionTail) and t.hidden > 0 for t in tails)
    # Only once the stubs themselves fill the window does a summary take over.
    assert len(ended) <= 2 and ended[0].seq > rt.store.events(sid, types=["compaction.tail"])[3].seq
    assert not rt.store.events(sid, types=["compaction.failed"])
    receipts = rt.store.receipts(sid)
    assert sum(r.purpose == "compaction" for r in receipts) == len(ended)  # tails: no model call
    messages = rt.store.messages(sid)
    assert results(messages) == [BIG] * 40  # the log keeps every result whole

    # The last request: the hide point is on the receipt; older results went as the stub,
    # the retained turns' word for word; every receipt rebuilds to its digest.
    provider = make_provider(model)
    last = receipts[-1]
    assert ("tail", "compaction") in [(s, src) for s, src, _d in last.sections]
    sent = rebuild_request(rt.store, sid, last, provider.name)
    outputs = results(list(sent.messages))
    assert outputs.count(HIDDEN_RESULT) >= 5 and BIG in outputs
    assert outputs[-1] != HIDDEN_RESULT and "a line of a long file" in outputs[-1]
    assert all(verify_receipt(rt.store, sid, r, provider) for r in receipts)
    await rt.aclose()


async def test_a_manual_tail_compaction_reports_what_it_hid(tmp_path: Path):
    model = reads(tmp_path)
    rt = runtime(tmp_path, model, strategy="tail", auto=False)
    sid = await chat(rt, ["turn 1", "turn 2", "turn 3"])
    rt.send(session_id=sid, kind="compaction", payload={"tail_turns": 1}, input_id="c1")
    await rt.resume(sid)
    result = compaction_result(rt.store, sid, "c1")
    assert result is not None and result.compacted
    out = result.to_json()
    assert (out["strategy"], out["replaced"], out["summary_id"]) == ("tail", 2, None)

    rt.send(session_id=sid, kind="compaction", payload={"tail_turns": 1}, input_id="c2")
    await rt.resume(sid)
    again = compaction_result(rt.store, sid, "c2")  # nothing newer to hide
    assert again is not None and again.reason == "nothing-to-compact"

    await chat(rt, ["turn 4"], sid)  # a new runner reads the hide point from the store
    sent = rebuild_request(rt.store, sid, rt.store.receipts(sid)[-1], make_provider(model).name)
    assert results(list(sent.messages)).count(HIDDEN_RESULT) == 2
    await rt.aclose()


def first_request(rt, sid: str, turn_id: str, provider: str) -> str:
    """The first step request of `turn_id`, as the Anthropic body is cached (ids left out)."""
    [first] = [r for r in rt.store.receipts(sid) if r.turn_id == turn_id and r.step == 1][:1]
    request = rebuild_request(rt.store, sid, first, provider)
    wire = AnthropicProvider("claude-x", context_window=6000, max_output_tokens=500)
    return cache_prefix(wire.wire_request(request))


async def test_a_fork_keeps_the_hide_point_so_its_next_request_is_the_parents(tmp_path: Path):
    model = reads(tmp_path)
    rt = runtime(tmp_path, model, strategy="tail", auto=False)
    sid = await chat(rt, ["turn 1", "turn 2", "turn 3"])
    rt.send(session_id=sid, kind="compaction", payload={"tail_turns": 1}, input_id="c1")
    await rt.resume(sid)
    assert (result := compaction_result(rt.store, sid, "c1")) is not None and result.compacted
    fork = rt.fork(sid).id
    early = rt.fork(sid, rt.store.events(sid, types=["compaction.tail"])[0].seq - 1).id
    [carried] = [e.event for e in rt.store.events(fork, types=["compaction.tail"])]
    [parents] = [e.event for e in rt.store.events(sid, types=["compaction.tail"])]
    assert isinstance(carried, CompactionTail) and isinstance(parents, CompactionTail)
    assert carried.hide_before_id == parents.hide_before_id and carried.input_id is None
    assert not rt.store.events(early, types=["compaction.tail"])  # forked before it: none

    provider = make_provider(model).name
    sent = {}
    for session in (sid, fork):
        [turn] = await rt.run("turn 4", session_id=session)
        sent[session] = first_request(rt, session, turn.turn_id, provider)
    assert sent[fork] == sent[sid]  # byte for byte, the stubs included
    assert sent[sid].count("older tool result hidden") == 2
    await rt.aclose()
