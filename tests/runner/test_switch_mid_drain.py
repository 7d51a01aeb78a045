"""Agent, model and tools resolved before each step (issue 37 item 22): a switch written while a
turn runs (`Runtime.switch`, as another process would write it) applies from the turn's next
step. On main the context was resolved once, when the drain started: the whole turn, and every
later turn of the same drain, ran on the old model."""

from __future__ import annotations

import json
from pathlib import Path

from wakeful.execution import Runtime
from wakeful.runner import LiveEvent

GOAL = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}


async def test_a_switch_written_mid_turn_applies_at_the_next_step(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"rules": [{"match": ".", "replies": [GOAL, {"text": "A done"}]}]}))
    b.write_text(json.dumps({"rules": [{"match": ".", "replies": [GOAL, {"text": "B done"}]}]}))
    rt = Runtime(str(tmp_path / "s.db"), model=f"scripted:{a}", workspace=tmp_path)
    sent = rt.send("go", resume=False)
    switched: list[str] = []

    def listen(ev: LiveEvent) -> None:
        if ev.kind == "tool_start" and not switched:  # step 1's call runs: switch now
            switched.append(rt.switch(sent.session_id, model=f"scripted:{b}", agent="plan").id)

    rt.listener = listen
    [turn] = await rt.drive_input(sent.session_id, sent.input_id)
    assert switched and turn.outcome == "completed" and turn.final_text == "B done"
    models = [r.model for r in rt.store.receipts(sent.session_id)]
    assert models == [f"scripted:{a}", f"scripted:{b}"]
    step2 = rt.store.receipts(sent.session_id)[-1]
    [agent] = [src for sid, src, _d in step2.sections if sid == "system.agent"]
    assert agent == "agent:plan"  # the plan agent's system prompt and tools
    await rt.aclose()


async def test_a_configuration_edited_mid_turn_applies_at_the_next_step(tmp_path: Path) -> None:
    """Issue 37 item 22, the rest: the workspace's `wakeful.toml`, edited while a turn runs (as
    another process or a person would), is read again before the next step: its instruction
    entries and its agents' caps apply there. On main a place's configuration was read once,
    for the life of the runtime."""
    (tmp_path / ".git").mkdir()  # the project root: no wakeful.toml above it is read
    config = tmp_path / "wakeful.toml"
    config.write_text('[instructions]\nstyle = "Answer plainly."\n')
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"rules": [{"match": ".", "replies": [GOAL, {"text": "done"}]}]}))
    rt = Runtime(str(tmp_path / "s.db"), model=f"scripted:{a}", workspace=tmp_path)
    sent = rt.send("go", resume=False)
    edited: list[bool] = []

    def listen(ev: LiveEvent) -> None:
        if ev.kind == "tool_start" and not edited:  # step 1's call runs: edit the file now
            config.write_text(
                '[instructions]\nstyle = "Answer in French."\n[agents.build]\nmax_steps = 9\n'
            )
            edited.append(True)

    rt.listener = listen
    [turn] = await rt.drive_input(sent.session_id, sent.input_id)
    assert edited and turn.outcome == "completed"
    one, two = rt.store.receipts(sent.session_id)
    assert (one.options or {})["max_steps"] == 50 and (two.options or {})["max_steps"] == 9
    deltas = [
        e.event.delta  # type: ignore[union-attr]
        for e in rt.store.events(sent.session_id, types=["instructions.updated"])
    ]
    assert len(deltas) == 2 and list(deltas[1]) == ["config:style"]  # a change, before step 2
    assert deltas[1]["config:style"] != deltas[0]["config:style"]
    config.write_text("[agents.build\n")  # an edit that does not parse: the last one stays
    assert rt.place(None).config.agents["build"].max_steps == 9
    await rt.aclose()
