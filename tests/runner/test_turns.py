"""End-to-end turns on the scripted provider, over a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.allow import ALLOW_WRITES
from wakeful.config import Config, RetryConfig
from wakeful.execution import Runtime
from wakeful.messages import is_wire_valid
from wakeful.providers import make_provider
from wakeful.runner import verify_receipt


def script(tmp_path: Path, rules: list[dict], **top: object) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": rules, **top}))
    return f"scripted:{path}"


def runtime(tmp_path: Path, model: str, **kw: object) -> Runtime:
    config = Config(
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=200, poll_interval_ms=5),
        permissions=ALLOW_WRITES,
    )
    return Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config, **kw)


async def test_multi_step_tool_use(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("alpha\n")
    model = script(
        tmp_path,
        [
            {
                "match": "notes",
                "replies": [
                    {"tool_calls": [{"name": "read_file", "input": {"path": "notes.txt"}}]},
                    {
                        "tool_calls": [
                            {"name": "write_file", "input": {"path": "out.txt", "content": "beta"}}
                        ]
                    },
                    {"text": "done: copied"},
                ],
            }
        ],
    )
    rt = runtime(tmp_path, model)
    [turn] = await rt.run("read the notes")
    assert turn.outcome == "completed" and turn.steps == 3 and turn.final_text == "done: copied"
    assert (tmp_path / "out.txt").read_text() == "beta"
    sid = rt.store.list_sessions().sessions[0].id
    messages = rt.store.messages(sid)
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert "alpha" in str(messages[2].tool_results()[0].output)
    assert is_wire_valid(messages)
    calls = rt.store.tool_calls(sid)
    assert [c.status for c in calls] == ["completed", "completed"]
    assert calls[0].message_id == messages[1].id
    await rt.aclose()


async def test_rate_limit_retry_is_durable_and_honours_retry_after(tmp_path: Path):
    model = script(
        tmp_path,
        [
            {
                "match": ".",
                "replies": [
                    {
                        "text": "ok after wait",
                        "error": {"kind": "rate_limit", "times": 2, "retry_after_ms": 30},
                    },
                ],
            }
        ],
    )
    rt = runtime(tmp_path, model)
    [turn] = await rt.run("hello")
    assert turn.outcome == "completed" and turn.final_text == "ok after wait"
    sid = rt.store.list_sessions().sessions[0].id
    retries = rt.store.events(sid, types=["retry.scheduled"])
    assert [r.event.attempt for r in retries] == [2, 3]  # type: ignore[union-attr]
    receipt_times = [e.at_ms for e in rt.store.events(sid, types=["receipt.recorded"])]
    for r, failed_at in zip(retries, receipt_times, strict=False):
        # the deadline is at least retry-after past the failed attempt (its receipt came first)
        assert r.event.deadline_ms - failed_at >= 30  # type: ignore[union-attr]
    assert rt.store.retry_state(sid) is None
    receipts = rt.store.receipts(sid)
    assert [(r.step, r.attempt) for r in receipts] == [(1, 1), (1, 2), (1, 3)]
    provider = make_provider(model)
    assert all(verify_receipt(rt.store, sid, r, provider) for r in receipts)
    await rt.aclose()


async def test_incomplete_stream_after_output_keeps_partial_and_continues(tmp_path: Path):
    model = script(
        tmp_path,
        [
            {
                "match": ".",
                "replies": [
                    {
                        "text": "first part that gets cut",
                        "error": {"kind": "incomplete_stream", "times": 1, "after_chars": 10},
                    },
                    {"text": "rest of it"},
                ],
            }
        ],
        chunk_chars=5,
    )
    rt = runtime(tmp_path, model)
    [turn] = await rt.run("tell me")
    assert turn.outcome == "completed" and turn.final_text == "rest of it"
    sid = rt.store.list_sessions().sessions[0].id
    messages = rt.store.messages(sid)
    partial, note, final = messages[1], messages[2], messages[3]
    assert (
        partial.role == "assistant"
        and partial.text() == "first part"
        and partial.metadata["partial"]
    )
    assert note.role == "user" and "cut off" in note.text()
    assert final.id != partial.id
    await rt.aclose()


async def test_authentication_pauses_the_turn(tmp_path: Path):
    model = script(
        tmp_path,
        [
            {
                "match": ".",
                "replies": [
                    {"text": "never", "error": {"kind": "authentication", "times": 1}},
                ],
            }
        ],
    )
    rt = runtime(tmp_path, model)
    [turn] = await rt.run("hello")
    assert turn.outcome == "paused" and turn.error_kind == "authentication"
    sid = rt.store.list_sessions().sessions[0].id
    assert rt.store.get_session(sid).status == "paused"
    assert rt.store.current_claim(sid) is None
    await rt.aclose()


async def test_content_filter_fails_the_step_and_keeps_partial(tmp_path: Path):
    model = script(
        tmp_path,
        [{"match": ".", "replies": [{"text": "some partial words", "finish": "content_filter"}]}],
    )
    rt = runtime(tmp_path, model)
    [turn] = await rt.run("hello")
    assert turn.outcome == "failed" and turn.error_kind == "content_filter"
    sid = rt.store.list_sessions().sessions[0].id
    assert rt.store.messages(sid)[-1].text() == "some partial words"
    await rt.aclose()


async def test_tool_errors_reach_the_model(tmp_path: Path):
    model = script(
        tmp_path,
        [
            {
                "match": ".",
                "replies": [
                    {
                        "tool_calls": [
                            {"name": "read_file", "input": {"nope": 1}},
                            {"name": "read_file", "input": {"path": "../../etc/passwd"}},
                            {"name": "no_such_tool", "input": {}},
                        ]
                    },
                    {"text": "handled"},
                ],
            }
        ],
    )
    rt = runtime(tmp_path, model)
    [turn] = await rt.run("go")
    assert turn.outcome == "completed"
    sid = rt.store.list_sessions().sessions[0].id
    results = rt.store.messages(sid)[2].tool_results()
    assert [r.is_error for r in results] == [True, True, True]
    assert "path" in str(results[0].output)
    assert "no_such_tool" in str(results[2].output)
    await rt.aclose()


async def test_steer_admitted_mid_turn_is_delivered_at_the_next_step(tmp_path: Path):
    model = script(
        tmp_path,
        [
            {
                "match": "first",
                "replies": [
                    {"tool_calls": [{"name": "list_files", "input": {"path": "."}}]},
                    {"text": "first done"},
                ],
            },
            {"match": "steer", "replies": [{"text": "saw the steer"}]},
        ],
    )
    seen: list[str] = []

    def listener(ev):
        if ev.kind == "tool_start" and not seen:
            seen.append("x")
            rt.send("steer now", session_id=ev.session_id, resume=False)

    rt = runtime(tmp_path, model, listener=listener)
    [turn] = await rt.run("first task")
    sid = rt.store.list_sessions().sessions[0].id
    texts = [m.text() for m in rt.store.messages(sid) if m.role == "assistant"]
    assert turn.outcome == "completed" and texts[-1] == "saw the steer"
    assert rt.store.pending(sid) == []
    await rt.aclose()


async def test_unknown_model_spec_is_a_usage_error(tmp_path: Path):
    from wakeful.errors import UsageError

    with pytest.raises(UsageError):
        make_provider("nonsense:model")
