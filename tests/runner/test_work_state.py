"""The `runtime.work_state` section: caps, and goal/plan/todos surviving compaction."""

from __future__ import annotations

import json
from pathlib import Path

from wakeful.config import CompactionConfig, Config
from wakeful.events import CompactionEnded
from wakeful.execution import Runtime
from wakeful.runner._work_state import MAX_BYTES, MAX_ENTRIES, render_work_state

SUMMARY_RULE = {
    "match": "^Summarize the conversation below",
    "replies": [{"text": "## Objective\n- go on"}],
}
PAD = "lorem ipsum dolor sit amet " * 12


def todos(n: int, width: int = 20) -> list[dict[str, str]]:
    return [{"content": f"todo {i:03d} " + "x" * width, "status": "pending"} for i in range(n)]


def test_each_collection_is_capped_at_64_entries_and_says_so():
    text = render_work_state({"goal": "ship it", "todos": todos(100), "jobs": todos(70)})
    assert text.count("- [pending] todo") == 2 * MAX_ENTRIES
    assert "todo 063" in text and "todo 064" not in text
    assert "36 more todos entries not shown (cap 64)" in text
    assert "6 more jobs entries not shown (cap 64)" in text


def test_the_section_is_capped_at_16_kib_and_says_so():
    text = render_work_state({"goal": "g", "plan": "step " * 10_000, "todos": todos(64, 300)})
    assert len(text.encode()) <= MAX_BYTES
    assert "work state truncated to 16 KiB" in text


def test_no_work_state_renders_nothing():
    assert render_work_state({}) == ""
    assert render_work_state({"goal": "", "todos": []}) == ""


async def test_work_state_survives_compaction_within_its_caps(tmp_path: Path):
    setup = {
        "tool_calls": [
            {"name": "goal_set", "input": {"goal": "migrate the billing service"}},
            {"name": "plan_write", "input": {"plan": "phase " * 4_000}},
            {"name": "todo_write", "input": {"todos": todos(100)}},
        ]
    }
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            {
                "context_window": 16_000,
                "max_output_tokens": 500,
                "chunk_chars": 4096,
                "rules": [
                    SUMMARY_RULE,
                    {"match": "^plan", "replies": [setup, {"text": "planned"}]},
                    {"match": ".", "replies": [{"text": "ok " + PAD}]},
                ],
            }
        )
    )
    # The separate summary request, whose text holds the work state (the cached one sends it
    # as the request's note: `test_cached_summary.py`).
    config = Config(compaction=CompactionConfig(reserved=500, reuse_cache=False))
    rt = Runtime(
        str(tmp_path / "s.db"), model=f"scripted:{path}", workspace=tmp_path, config=config
    )
    [turn] = await rt.run("plan the work")
    assert turn.outcome == "completed"
    sid = rt.store.list_sessions().sessions[0].id
    before = rt.store.work_state(sid)
    for i in range(60):
        [turn] = await rt.run(f"turn {i}: {PAD}", session_id=sid)
        assert turn.outcome == "completed"
    ended = [e.event for e in rt.store.events(sid, types=["compaction.ended"])]
    assert ended and all(isinstance(e, CompactionEnded) for e in ended)

    # The durable work state is untouched; the section regenerated from it is within caps.
    assert rt.store.work_state(sid) == before and len(before["todos"]) == 100  # type: ignore[arg-type]
    last = rt.store.receipts(sid)[-1]
    assert last.purpose == "step" and last.message_ids[0] == ended[-1].summary_message_id
    [digest] = [d for s, _src, d in last.sections if s == "note.runtime.work_state"]
    section = rt.store.get_blob(digest).decode()
    assert len(section.encode()) <= MAX_BYTES
    assert "migrate the billing service" in section
    assert section.count("- [pending] todo") <= MAX_ENTRIES
    assert "work state truncated to 16 KiB" in section or "more todos entries" in section
    # The summary request saw the work state too.
    summary = [r for r in rt.store.receipts(sid) if r.purpose == "compaction"][-1]
    [body] = [d for s, _src, d in summary.sections if s == "input.compaction"]
    assert "<work-state>" in rt.store.get_blob(body).decode()
    await rt.aclose()
