"""Loop guards: a scripted loop of identical tool calls pauses the turn with reason `loop` at
the configured threshold (on by default), naming the repeated call; steps that bring nothing
new pause it too; turned off, the turn runs to its step limit; a new prompt continues."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Wk, write_script
from wakeful.config import AgentConfig, Config, LoopGuardConfig
from wakeful.events import ToolCallStarted
from wakeful.execution import Runtime

LIST = {"name": "list_files", "input": {"path": "."}}
GREP = {"name": "grep", "input": {"pattern": "nothing-matches-this"}}


def _model(tmp_path: Path, replies: list[dict]) -> str:
    path = tmp_path / "loop.json"
    path.write_text(
        json.dumps(
            {
                "rules": [
                    {"match": "done", "replies": [{"text": "ok, stopping"}]},
                    {"match": ".", "replies": replies},
                ]
            }
        )
    )
    return f"scripted:{path}"


async def _turn(tmp_path: Path, replies: list[dict], config: Config) -> tuple[Runtime, object]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "a.txt").write_text("a\n")
    rt = Runtime(
        str(tmp_path / "s.db"), model=_model(tmp_path, replies), workspace=work, config=config
    )
    [turn] = await rt.run("look around")
    return rt, turn


def _calls(rt: Runtime) -> int:
    row = rt.store.latest_session()
    assert row is not None
    return sum(isinstance(e.event, ToolCallStarted) for e in rt.store.events(row.id))


async def test_identical_calls_pause_with_reason_loop_at_the_threshold(tmp_path: Path) -> None:
    config = Config(loop_guard=LoopGuardConfig(repeats=3))
    rt, turn = await _turn(tmp_path, [{"tool_calls": [LIST]}], config)
    try:
        assert (turn.outcome, turn.error_kind) == ("paused", "loop")  # type: ignore[attr-defined]
        assert 'list_files {"path": "."}' in turn.error  # type: ignore[attr-defined]
        assert "3 times" in turn.error  # type: ignore[attr-defined]
        assert _calls(rt) == 3
        row = rt.store.latest_session()
        assert row is not None and row.status == "paused"
        [again] = await rt.run("done", session_id=row.id)  # a new prompt continues
        assert again.outcome == "completed"
    finally:
        await rt.aclose()


async def test_on_by_default_with_generous_thresholds(tmp_path: Path) -> None:
    rt, turn = await _turn(tmp_path, [{"tool_calls": [LIST]}], Config())
    try:
        assert (turn.outcome, turn.error_kind) == ("paused", "loop")  # type: ignore[attr-defined]
        assert _calls(rt) == LoopGuardConfig().repeats == 10
    finally:
        await rt.aclose()


async def test_steps_with_nothing_new_pause_too(tmp_path: Path) -> None:
    config = Config(loop_guard=LoopGuardConfig(repeats=50, no_progress_steps=3))
    replies = [{"tool_calls": [LIST]}, {"tool_calls": [GREP]}] * 10
    rt, turn = await _turn(tmp_path, replies, config)
    try:
        assert (turn.outcome, turn.error_kind) == ("paused", "loop")  # type: ignore[attr-defined]
        assert "3 steps in a row" in turn.error  # type: ignore[attr-defined]
        assert _calls(rt) == 5  # two new, then three that repeat
    finally:
        await rt.aclose()


async def test_turned_off_the_turn_runs_to_its_step_limit(tmp_path: Path) -> None:
    config = Config(
        loop_guard=LoopGuardConfig(enabled=False), agents={"build": AgentConfig(max_steps=8)}
    )
    rt, turn = await _turn(tmp_path, [{"tool_calls": [LIST]}], config)
    try:
        assert turn.error_kind != "loop"  # type: ignore[attr-defined]
        assert _calls(rt) == 8
    finally:
        await rt.aclose()


def test_the_command_line_shows_the_pause(wk: Wk, workdir: Path) -> None:
    model = write_script(workdir, [{"match": ".", "replies": [{"tool_calls": [LIST]}]}])
    (workdir / "wakeful.toml").write_text("[loop_guard]\nrepeats = 2\n")
    done = wk("run", "--model", model, "look", check=False)
    assert done.returncode == 4, (done.stdout, done.stderr)
    assert "loop" in done.stdout + done.stderr and "list_files" in done.stdout + done.stderr
