"""Instruction sources beyond the workspace's (issue 37 item 25; 003: "the runner explicitly
combines built-ins, ambient discovery, selected-agent skill guidance, references, MCP guidance,
and API-managed instruction entries"): an agent's skills, references (`[instructions]` entries
`"@path"`) and the entries a host keeps through the API (extension state `instructions`), each
an instruction source read fresh, in the system prompt and, when one changes, noted once. On
main none of the three existed."""

from __future__ import annotations

import json
from pathlib import Path

from wakeful.config import Config
from wakeful.execution import Runtime


def request_texts(rt: Runtime, sid: str) -> dict[str, str]:
    receipt = rt.store.receipts(sid)[-1]
    return {s: rt.store.get_blob(d).decode() for s, _src, d in receipt.sections}


async def test_skills_references_and_host_entries_are_instruction_sources(tmp_path: Path):
    work = tmp_path / "ws"
    (work / ".wakeful/skills/review").mkdir(parents=True)
    (work / ".wakeful/skills/review/SKILL.md").write_text("Review every diff twice.")
    (work / "docs").mkdir()
    (work / "docs/STYLE.md").write_text("Use tabs.")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "ok"}]}]}))
    config = Config.model_validate(
        {"agents": {"build": {"skills": ["review"]}}, "instructions": {"style": "@docs/STYLE.md"}}
    )
    rt = Runtime(str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=work, config=config)
    sent = rt.send("one", resume=False)
    sid = sent.session_id
    rt.set_extension_state(sid, "instructions", "tone", "Be brief.")
    await rt.drive_input(sid, sent.input_id)
    texts = request_texts(rt, sid)
    assert texts["system.instructions.skill:review"] == "Review every diff twice."
    assert texts["system.instructions.ref:docs/STYLE.md"] == "Use tabs."
    assert texts["system.instructions.api"] == "tone: Be brief."
    (work / "docs/STYLE.md").write_text("Use spaces.")  # a reference changed: noted once
    rt.set_extension_state(sid, "instructions", "tone", "Be thorough.")
    await rt.run("two", session_id=sid)
    notes = [m.text() for m in rt.store.messages(sid) if m.role == "system"]
    assert len(notes) == 1
    assert "ref:docs/STYLE.md is now:\nUse spaces." in notes[0]
    assert "api is now:\ntone: Be thorough." in notes[0]
    await rt.aclose()
