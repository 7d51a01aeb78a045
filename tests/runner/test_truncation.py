"""A reply stopped by the output limit (`finish: length`) is recorded and reported as truncated:
on the message, the turn's end event, the turn result and the run record."""

from __future__ import annotations

import json
from pathlib import Path

from wakeful.config import Config
from wakeful.events import TurnEnded
from wakeful.execution import Runtime
from wakeful.runner._runs import run_records


def runtime(
    tmp_path: Path, rules: list[dict[str, object]], config: Config | None = None
) -> Runtime:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": rules}))
    model = f"scripted:{path}"
    return Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config)


async def test_a_reply_cut_by_the_output_limit_is_marked_truncated(tmp_path: Path) -> None:
    rt = runtime(
        tmp_path,
        [
            {
                "match": "long",
                "replies": [{"text": "The first words of a long", "finish": "length"}],
            },
            {"match": ".", "replies": [{"text": "short and whole"}]},
        ],
    )
    [cut] = await rt.run("write something long")
    sid = rt.store.list_sessions().sessions[0].id
    [whole] = await rt.run("and now briefly", session_id=sid)
    assert (cut.outcome, cut.truncated, cut.final_text) == (
        "completed",
        True,
        "The first words of a long",
    )
    assert (whole.outcome, whole.truncated) == ("completed", False)
    replies = [m for m in rt.store.messages(sid) if m.role == "assistant"]
    assert [(m.metadata or {}).get("truncated") for m in replies] == [True, None]
    ends = [e.event for e in rt.store.events(sid, types=["turn.ended"])]
    assert [e.truncated for e in ends if isinstance(e, TurnEnded)] == [True, False]
    assert [r.truncated for r in run_records(rt.store, sid)] == [True, False]
    assert run_records(rt.store, sid)[0].to_json()["truncated"] is True
    await rt.aclose()


async def test_a_truncated_reply_before_tool_steps_does_not_mark_the_turn(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    rt = runtime(
        tmp_path,
        [
            {
                "match": ".",
                "replies": [
                    {
                        "text": "Reading",
                        "tool_calls": [{"name": "read_file", "input": {"path": "a.txt"}}],
                        "finish": "length",
                    },
                    {"text": "It says alpha."},
                ],
            }
        ],
    )
    [turn] = await rt.run("read a.txt")
    assert turn.steps == 2 and not turn.truncated
    sid = rt.store.list_sessions().sessions[0].id
    first = [m for m in rt.store.messages(sid) if m.role == "assistant"][0]
    assert first.metadata is not None and first.metadata["truncated"] is True
    await rt.aclose()
