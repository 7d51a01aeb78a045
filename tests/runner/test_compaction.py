"""Compaction on the scripted provider over a real SQLite store: proactive, overflow, manual."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from wakeful.cli._main import cli
from wakeful.config import CompactionConfig, Config, ModelSettings, ProvidersConfig, RetryConfig
from wakeful.events import CompactionEnded, CompactionFailed, ReceiptRecorded
from wakeful.execution import Runtime
from wakeful.messages import CompactSummaryBlock, ImageBlock, is_wire_valid
from wakeful.providers import make_provider
from wakeful.runner import Budget, compaction_result, should_compact, verify_receipt

SUMMARY_RULE = {
    "match": "^Summarize the conversation below",
    "replies": [{"text": "## Objective\n- go on"}],
}
PAD = "lorem ipsum dolor sit amet " * 12  # ~80 tokens


def script(tmp_path: Path, rules: list[dict], name: str = "script.json", **top: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"rules": rules, "chunk_chars": 4096, **top}))
    return f"scripted:{path}"


def runtime(tmp_path: Path, spec: str, **compaction: object) -> Runtime:
    config = Config(
        # The separate summary request only (its receipts and rules are what these tests read;
        # the cached one is `test_cached_summary.py`'s).
        compaction=CompactionConfig(**{"reserved": 500, "reuse_cache": False, **compaction}),
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    )
    return Runtime(str(tmp_path / "s.db"), model=spec, workspace=tmp_path, config=config)


async def chat(rt: Runtime, texts: list[str], sid: str | None = None) -> str:
    for text in texts:
        turns = await rt.run(text, session_id=sid)
        assert [t.outcome for t in turns] == ["completed"], turns
        sid = sid or turns[0] and rt.store.list_sessions().sessions[0].id
    assert sid is not None
    return sid


def compactions(rt: Runtime, sid: str) -> list[CompactionEnded]:
    out = [e.event for e in rt.store.events(sid, types=["compaction.ended"])]
    return [e for e in out if isinstance(e, CompactionEnded)]


def section(rt: Runtime, receipt: ReceiptRecorded, section_id: str) -> str:
    [digest] = [d for s, _src, d in receipt.sections if s == section_id]
    return rt.store.get_blob(digest).decode()


def test_the_decision_reads_the_budget():
    budget = Budget(
        context_window=10_000,
        max_output_tokens=1_000,
        reserved=1_000,
        threshold_percent=80,
        min_new_share_percent=10,
    )
    assert (budget.usable, budget.trigger, budget.min_growth) == (8_000, 6_400, 800)
    assert not should_compact(6_399, 10_000, False, budget)
    assert should_compact(6_400, 0, False, budget)
    assert not should_compact(7_000, 799, True, budget)  # too little new since the last one
    assert should_compact(7_000, 800, True, budget)
    tiny = Budget(4_000, 8_000, 12_000, 80, 10)  # defaults that would leave nothing usable
    assert tiny.usable == 1_000 and tiny.trigger == 800


async def test_a_300_turn_session_keeps_running_and_compacts_a_bounded_number_of_times(
    tmp_path: Path,
):
    model = script(
        tmp_path,
        [SUMMARY_RULE, {"match": ".", "replies": [{"text": "reply " + PAD}]}],
        context_window=6000,
        max_output_tokens=500,
    )
    rt = runtime(tmp_path, model)
    texts = [f"turn {i}: {PAD}" for i in range(300)]
    sid = await chat(rt, texts)

    ended = compactions(rt, sid)
    assert 5 <= len(ended) <= 30, len(ended)  # ~170 tokens a turn against a 4,000 trigger
    assert {e.reason for e in ended} == {"auto"}
    assert not rt.store.events(sid, types=["compaction.failed", "compaction.skipped"])
    for before, after in zip(ended, ended[1:], strict=False):  # never back to back
        assert after.through_seq - before.through_seq > 20

    # The full transcript is still there, in order; summaries were only added.
    messages = rt.store.messages(sid)
    inputs = [m.text() for m in messages if m.role == "user" and m.text()]
    assert inputs == texts
    summaries = [m for m in messages if any(isinstance(b, CompactSummaryBlock) for b in m.blocks)]
    assert [m.id for m in summaries] == [e.summary_message_id for e in ended]
    assert sum(m.role == "assistant" for m in messages) == 300

    # Every request is on the record and rebuilds to its digest; active history stays small.
    provider = make_provider(model)
    receipts = rt.store.receipts(sid)
    assert sum(r.purpose == "compaction" for r in receipts) == len(ended)
    assert all(verify_receipt(rt.store, sid, r, provider) for r in receipts)
    last = receipts[-1]
    by_id = {m.id: m for m in messages}
    sent = [by_id[i] for i in last.message_ids]
    assert sent[0].id == ended[-1].summary_message_id and len(sent) < 60
    assert is_wire_valid(sent[1:])
    await rt.aclose()


async def test_the_estimate_starts_from_the_last_provider_reported_input_tokens(tmp_path: Path):
    heavy = {"text": "ok", "usage": {"input_tokens": 4500}}  # the provider says: nearly full
    model = script(
        tmp_path,
        [
            SUMMARY_RULE,
            {"match": "^heavy", "replies": [heavy]},
            {"match": ".", "replies": [{"text": "ok"}]},
        ],
        context_window=6000,
        max_output_tokens=500,
    )
    rt = runtime(tmp_path, model)
    sid = await chat(rt, ["one", "two", "three", "heavy"])
    assert compactions(rt, sid) == []  # a local estimate of this history is far below 4,000
    [turn] = await rt.run("after", session_id=sid)  # a new runner reads the reported usage
    [ended] = compactions(rt, sid)
    assert ended.reason == "auto"
    [receipt] = [r for r in rt.store.receipts(sid) if r.purpose == "compaction"]
    assert receipt.turn_id == turn.turn_id
    await rt.aclose()


async def test_auto_false_never_compacts_proactively(tmp_path: Path):
    model = script(
        tmp_path,
        [SUMMARY_RULE, {"match": ".", "replies": [{"text": "reply " + PAD}]}],
        context_window=3000,
        max_output_tokens=300,
    )
    rt = runtime(tmp_path, model, auto=False)
    sid = await chat(rt, [f"turn {i}: {PAD}" for i in range(40)])
    ended = compactions(rt, sid)
    assert ended and {e.reason for e in ended} == {"overflow"}  # only the recovery path ran
    await rt.aclose()


async def test_an_overflow_reply_compacts_once_and_the_step_succeeds(tmp_path: Path):
    overflow = {"kind": "context_overflow", "times": 1}
    model = script(
        tmp_path,
        [
            SUMMARY_RULE,
            {"match": "^big", "replies": [{"text": "made it", "error": overflow}]},
            {"match": ".", "replies": [{"text": "ok " + PAD}]},
        ],
    )
    rt = runtime(tmp_path, model)
    sid = await chat(rt, [f"turn {i}: {PAD}" for i in range(6)])
    [turn] = await rt.run("big request", session_id=sid)
    assert turn.outcome == "completed" and turn.final_text == "made it"
    [ended] = compactions(rt, sid)
    assert ended.reason == "overflow" and ended.replaced > 0
    receipts = [r for r in rt.store.receipts(sid) if r.turn_id == turn.turn_id]
    assert [(r.purpose, r.step, r.attempt) for r in receipts] == [
        ("step", 1, 1),
        ("compaction", 1, 1),
        ("step", 1, 2),
    ]
    assert receipts[2].message_ids[0] == ended.summary_message_id
    provider = make_provider(model)
    assert all(verify_receipt(rt.store, sid, r, provider) for r in receipts)
    await rt.aclose()


async def test_a_second_overflow_ends_the_turn_failed(tmp_path: Path):
    overflow = {"kind": "context_overflow", "times": 2}
    model = script(
        tmp_path,
        [
            SUMMARY_RULE,
            {"match": "^big", "replies": [{"text": "never", "error": overflow}]},
            {"match": ".", "replies": [{"text": "ok " + PAD}]},
        ],
    )
    rt = runtime(tmp_path, model)
    sid = await chat(rt, [f"turn {i}: {PAD}" for i in range(6)])
    [turn] = await rt.run("big request", session_id=sid)
    assert turn.outcome == "failed" and turn.error_kind == "context_overflow"
    assert len(compactions(rt, sid)) == 1
    assert rt.store.get_session(sid).status == "failed"
    await rt.aclose()


async def test_an_overflow_with_nothing_older_fails_without_compacting(tmp_path: Path):
    overflow = {"kind": "context_overflow", "times": 1}
    model = script(
        tmp_path, [SUMMARY_RULE, {"match": ".", "replies": [{"text": "x", "error": overflow}]}]
    )
    rt = runtime(tmp_path, model)
    [turn] = await rt.run("first and only")
    assert turn.outcome == "failed" and turn.error_kind == "context_overflow"
    assert "nothing is older than the current turn" in (turn.error or "")
    sid = rt.store.list_sessions().sessions[0].id
    assert compactions(rt, sid) == []
    await rt.aclose()


async def test_failed_compactions_are_bounded_then_the_turn_fails(tmp_path: Path):
    goal = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}
    model = script(
        tmp_path,
        [
            {"match": "^Summarize the conversation below", "replies": [{"text": ""}]},
            {"match": "^long", "replies": [goal, goal, goal, {"text": "done"}]},
            {"match": ".", "replies": [{"text": "ok " + PAD}]},
        ],
        context_window=3100,  # the built-in tools' schemas take their part of it
        max_output_tokens=300,
    )
    quiet = runtime(tmp_path, model, auto=False)  # history over the threshold, not the window
    sid = await chat(quiet, [f"turn {i}: {PAD}" for i in range(9)])
    await quiet.aclose()
    rt = runtime(tmp_path, model, max_failures=2)
    [turn] = await rt.run("long task", session_id=sid)
    assert turn.outcome == "failed" and turn.error_kind == "CompactionError"
    assert "2 times in a row" in (turn.error or "")
    failed = [e.event for e in rt.store.events(sid, types=["compaction.failed"])]
    assert len(failed) == 2 and all(isinstance(e, CompactionFailed) for e in failed)
    receipts = [(r.purpose, r.step) for r in rt.store.receipts(sid) if r.turn_id == turn.turn_id]
    # The first failure let step 1 run; the second, before step 2, ended the turn.
    assert receipts == [("compaction", 1), ("step", 1), ("compaction", 2)]
    await rt.aclose()


async def test_a_too_long_summary_request_is_shrunk(tmp_path: Path):
    small = script(
        tmp_path, [SUMMARY_RULE], "small.json", context_window=1500, max_output_tokens=200
    )
    model = script(tmp_path, [SUMMARY_RULE, {"match": ".", "replies": [{"text": "ok " + PAD}]}])
    rt = runtime(tmp_path, model, model=small)
    sid = await chat(rt, [f"turn {i}: {PAD}" for i in range(20)])
    rt.send(session_id=sid, kind="compaction", payload={}, input_id="c1", resume=False)
    await rt.resume(sid)
    result = compaction_result(rt.store, sid, "c1")
    assert result is not None and result.compacted
    assert result.dropped > 0 and result.model == small
    [receipt] = [r for r in rt.store.receipts(sid) if r.purpose == "compaction"]
    assert receipt.model == small and verify_receipt(rt.store, sid, receipt, make_provider(small))
    await rt.aclose()


async def test_a_compaction_model_takes_its_providers_options(tmp_path: Path):
    """`[providers]` settings of the `[compaction] model` (here its context window and output
    limit) apply to the summary call, as to the session's own model: one builder."""
    small = script(tmp_path, [SUMMARY_RULE], "small.json")  # its script says 200000 tokens
    model = script(tmp_path, [SUMMARY_RULE, {"match": ".", "replies": [{"text": "ok " + PAD}]}])
    providers = ProvidersConfig(
        context_windows={small: 1500}, models={small: ModelSettings(max_output_tokens=200)}
    )
    config = Config(
        compaction=CompactionConfig(reserved=500, model=small),
        providers=providers,
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    )
    rt = Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config)
    sid = await chat(rt, [f"turn {i}: {PAD}" for i in range(20)])
    rt.send(session_id=sid, kind="compaction", payload={}, input_id="c1", resume=False)
    await rt.resume(sid)
    result = compaction_result(rt.store, sid, "c1")
    assert result is not None and result.compacted and result.model == small
    assert result.dropped > 0  # fitted into the configured 1500-token window
    await rt.aclose()


async def test_a_summary_request_that_stays_too_long_fails_with_a_typed_error(tmp_path: Path):
    always = {"kind": "context_overflow", "times": 99}
    summary = {
        "match": "^Summarize the conversation below",
        "replies": [{"text": "s", "error": always}],
    }
    model = script(tmp_path, [summary, {"match": ".", "replies": [{"text": "ok " + PAD}]}])
    rt = runtime(tmp_path, model)
    sid = await chat(rt, [f"turn {i}: {PAD}" for i in range(12)])
    rt.send(session_id=sid, kind="compaction", payload={}, input_id="c1", resume=False)
    await rt.resume(sid)
    result = compaction_result(rt.store, sid, "c1")
    assert result is not None and not result.compacted and result.reason == "failed"
    [failed] = [e.event for e in rt.store.events(sid, types=["compaction.failed"])]
    assert isinstance(failed, CompactionFailed)
    assert failed.error_kind == "CompactionPromptTooLongError"
    tries = [r for r in rt.store.receipts(sid) if r.purpose == "compaction"]
    assert [r.attempt for r in tries] == [1, 2, 3, 4]  # the request, then 3 smaller retries
    assert rt.store.pending(sid) == []
    await rt.aclose()


async def test_an_image_in_old_history_reaches_the_summary_request_only_as_its_label(
    tmp_path: Path,
):
    model = script(tmp_path, [SUMMARY_RULE, {"match": ".", "replies": [{"text": "ok"}]}])
    rt = runtime(tmp_path, model)
    data = base64.b64encode(b"\x89PNG-not-really" * 200).decode()
    image = {"type": "image", "media_type": "image/png", "data": data, "name": "diagram.png"}
    sent = rt.send(payload={"blocks": [{"type": "text", "text": "look at this"}, image]})
    sid = sent.session_id
    await rt.resume(sid)
    sid = await chat(rt, ["second", "third", "fourth"], sid)
    rt.send(session_id=sid, kind="compaction", payload={"tail_turns": 1}, input_id="c1")
    await rt.resume(sid)
    result = compaction_result(rt.store, sid, "c1")
    assert result is not None and result.compacted and result.replaced == 6

    [receipt] = [r for r in rt.store.receipts(sid) if r.purpose == "compaction"]
    body = section(rt, receipt, "input.compaction")
    assert "[Attached diagram.png (image/png)]" in body
    assert data[:40] not in body and "PNG-not-really" not in body
    assert verify_receipt(rt.store, sid, receipt, make_provider(model))
    stored = rt.store.messages(sid)[0].blocks[1]  # the durable block is untouched: a blob ref
    assert isinstance(stored, ImageBlock) and stored.ref is not None
    assert base64.b64encode(rt.store.get_blob(stored.ref)).decode() == data
    await rt.aclose()


async def test_manual_compaction_reports_nothing_to_compact_then_compacts(tmp_path: Path):
    model = script(tmp_path, [SUMMARY_RULE, {"match": ".", "replies": [{"text": "ok"}]}])
    rt = runtime(tmp_path, model)
    sid = await chat(rt, ["only turn"])
    rt.send(session_id=sid, kind="compaction", payload={"reason": "manual"}, input_id="c1")
    await rt.resume(sid)
    early = compaction_result(rt.store, sid, "c1")
    assert early is not None and early.to_json() == {
        "compacted": False,
        "trigger": "manual",
        "reason": "nothing-to-compact",
    }
    assert rt.store.receipts(sid)[-1].purpose == "step"  # no provider call

    await chat(rt, ["two", "three", "four"], sid)
    rt.send(session_id=sid, kind="compaction", payload={"reason": "manual"}, input_id="c2")
    await rt.resume(sid)
    done = compaction_result(rt.store, sid, "c2")
    assert done is not None and done.compacted
    out = done.to_json()
    assert out["replaced"] == 4 and out["dropped"] == 0 and out["model"] == model
    assert out["usage"]["input_tokens"] > 0 and out["effective_tokens"] > 0  # type: ignore[index]
    assert rt.store.pending(sid) == []
    # The next turn sends the summary and the two kept turns.
    await chat(rt, ["five"], sid)
    last = rt.store.receipts(sid)[-1]
    by_id = {m.id: m for m in rt.store.messages(sid)}
    texts = [by_id[i].text() for i in last.message_ids[1:]]
    assert last.message_ids[0] == done.summary_id
    assert texts == ["three", "ok", "four", "ok", "five"]
    await rt.aclose()


async def test_a_compaction_steered_mid_turn_runs_at_the_next_step_boundary(tmp_path: Path):
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}
    model = script(
        tmp_path,
        [
            SUMMARY_RULE,
            {"match": "^work", "replies": [call, {"text": "finished"}]},
            {"match": ".", "replies": [{"text": "ok"}]},
        ],
    )
    asked: list[str] = []

    def listener(ev):
        if ev.kind == "tool_start" and not asked:
            asked.append(
                rt.send(
                    session_id=ev.session_id,
                    kind="compaction",
                    payload={},
                    input_id="mid",
                    resume=False,
                ).input_id
            )

    rt = runtime(tmp_path, model)
    rt.listener = listener
    sid = await chat(rt, ["one", "two", "three"])
    [turn] = await rt.run("work now", session_id=sid)
    assert turn.outcome == "completed" and turn.final_text == "finished"
    result = compaction_result(rt.store, sid, "mid")
    assert result is not None and result.compacted  # the running turn stayed word for word
    step2 = [r for r in rt.store.receipts(sid) if r.turn_id == turn.turn_id][-1]
    by_id = {m.id: m for m in rt.store.messages(sid)}
    assert step2.message_ids[0] == result.summary_id
    assert "work now" in [by_id[i].text() for i in step2.message_ids]
    await rt.aclose()


def test_the_compact_command_prints_the_result(tmp_path: Path, monkeypatch):
    import asyncio

    model = script(tmp_path, [SUMMARY_RULE, {"match": ".", "replies": [{"text": "ok"}]}])
    db = str(tmp_path / "s.db")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WAKEFUL_CONFIG", str(tmp_path / "wakeful.toml"))
    (tmp_path / "wakeful.toml").write_text("[compaction]\nreserved = 500\n")

    async def seed() -> str:
        rt = Runtime(db, model=model, workspace=tmp_path)
        sid = await chat(rt, ["one", "two", "three", "four"])
        await rt.aclose()
        return sid

    sid = asyncio.run(seed())
    out = CliRunner().invoke(cli, ["compact", "--session", sid, "--format", "json", "--db", db])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["compacted"] is True and data["replaced"] == 4 and data["session_id"] == sid
    again = CliRunner().invoke(cli, ["compact", "--session", sid, "--db", db])
    assert again.exit_code == 0 and "nothing-to-compact" in again.output


async def test_an_interrupt_aborts_a_manual_compaction(tmp_path: Path):
    slow = {"match": "^Summarize the conversation below", "replies": [{"text": "s" * 400}]}
    path = tmp_path / "slow.json"
    path.write_text(
        json.dumps(
            {
                "rules": [slow, {"match": ".", "replies": [{"text": "ok"}]}],
                "chunk_chars": 8,
                "chunk_delay_ms": 20,
            }
        )
    )
    rt = runtime(tmp_path, f"scripted:{path}")
    sid = await chat(rt, ["one", "two", "three", "four"])

    def listener(ev):
        if ev.kind == "compaction" and ev.data.get("phase") == "start":
            rt.interrupt(ev.session_id)

    rt.listener = listener
    rt.send(session_id=sid, kind="compaction", payload={}, input_id="c1", resume=False)
    await rt.resume(sid)
    result = compaction_result(rt.store, sid, "c1")
    assert result is not None and result.to_json() == {
        "compacted": False,
        "trigger": "manual",
        "reason": "aborted",
    }
    assert compactions(rt, sid) == [] and rt.store.pending(sid) == []
    assert len(rt.store.messages(sid)) == 8  # nothing was added
    await rt.aclose()


async def test_effective_tokens_count_the_whole_next_request_also_between_turns(tmp_path: Path):
    """Issue 37 item 17: a manual compaction between turns, in a process that ran no step of the
    session, reports the next request's size with its system prompt and tools: at least their
    own estimate (on main it counted the summary and the kept messages alone)."""
    from wakeful.providers import estimate_request_tokens
    from wakeful.runner import rebuild_request
    from wakeful.runner._budget import sections_tokens
    from wakeful.runner._prompt import Section

    model = script(tmp_path, [SUMMARY_RULE, {"match": ".", "replies": [{"text": "ok"}]}])
    rt = runtime(tmp_path, model)
    sid = await chat(rt, ["one", "two", "three", "four"])
    await rt.aclose()
    rt = runtime(tmp_path, model)  # a fresh process: nothing estimated yet
    rt.send(session_id=sid, kind="compaction", payload={"tail_turns": 1}, input_id="c1")
    await rt.resume(sid)
    done = compaction_result(rt.store, sid, "c1")
    assert done is not None and done.compacted
    await chat(rt, ["five"], sid)
    last = rt.store.receipts(sid)[-1]
    sections = [Section(i, source, rt.store.get_blob(d).decode()) for i, source, d in last.sections]
    system_and_tools = sections_tokens(sections, "scripted")
    assert system_and_tools > 500
    assert done.effective_tokens >= system_and_tools
    sent = rebuild_request(rt.store, sid, last, "scripted")
    assert done.effective_tokens <= estimate_request_tokens(sent) * 1.2
    await rt.aclose()


@pytest.mark.parametrize("strategy", ["tail", "summary"])
async def test_an_overflow_stubs_old_tool_output_and_media_on_the_wire(
    tmp_path: Path, strategy: str
):
    """Issue 37 item 20 (001: "a context overflow mid-run stubs older tool output and media
    instead"): the overflow path's compaction, under either strategy, sends the older tool
    results as their stub and the older media as a label, and asks no model for a summary; the
    store keeps both whole, and every receipt rebuilds to its digest. On main the media went as
    it was, and under `summary` (the default) an overflow wrote a summary."""
    from wakeful.events import CompactionTail
    from wakeful.runner._tail import HIDDEN_RESULT, MEDIA_MARK

    overflow = {"kind": "context_overflow", "times": 1}
    goal = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}
    model = script(
        tmp_path,
        [
            {"match": "^big", "replies": [{"text": "made it", "error": overflow}]},
            {"match": "^look", "replies": [goal, {"text": "seen"}]},
            {"match": ".", "replies": [{"text": "ok"}]},
        ],
    )
    rt = runtime(tmp_path, model, strategy=strategy, auto=False, tail_turns=1)
    data = base64.b64encode(b"\x89PNG-not-really" * 200).decode()
    image = {"type": "image", "media_type": "image/png", "data": data, "name": "diagram.png"}
    sent = rt.send(payload={"blocks": [{"type": "text", "text": "look at this"}, image]})
    sid = sent.session_id
    await rt.resume(sid)
    sid = await chat(rt, ["second", "third"], sid)
    [turn] = await rt.run("big request", session_id=sid)
    assert turn.outcome == "completed" and turn.final_text == "made it"
    [tail] = [e.event for e in rt.store.events(sid, types=["compaction.tail"])]
    assert isinstance(tail, CompactionTail) and tail.reason == "overflow" and tail.media
    assert compactions(rt, sid) == []  # no summary
    assert [r.purpose for r in rt.store.receipts(sid)].count("compaction") == 0
    last = rt.store.receipts(sid)[-1]
    provider = make_provider(model)
    assert all(verify_receipt(rt.store, sid, r, provider) for r in rt.store.receipts(sid))
    from wakeful.runner import rebuild_request

    sent_messages = rebuild_request(rt.store, sid, last, provider.name).messages
    first = sent_messages[0]
    assert not any(isinstance(b, ImageBlock) for b in first.blocks)
    assert "[older image diagram.png (image/png) hidden to save context]" in first.text()
    outputs = [r.output for m in sent_messages for r in m.tool_results()]
    assert outputs == [HIDDEN_RESULT]
    stored = rt.store.messages(sid)[0]  # the store keeps the image
    assert any(isinstance(b, ImageBlock) for b in stored.blocks)
    tail_content = rt.store.get_blob(next(d for s, _src, d in last.sections if s == "tail"))
    assert tail_content.decode().endswith(MEDIA_MARK)
    await rt.aclose()
