"""History edits and rewinds around instruction changes (issue 37's defect): deleting or
rewinding a turn never leaves the session's instruction state ahead of what its requests show.

A change of `AGENTS.md` is admitted as an `instructions.updated` delta plus a chronological
system note, before the input it precedes (or between two steps of a turn). The requests after
an edit must show the newest instructions the store holds, whichever side of the edited turn a
change happened on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wakeful.execution import Runtime
from wakeful.messages import Message
from wakeful.providers import make_provider
from wakeful.runner import rebuild_request, verify_receipt

CALL = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}
RULES = [
    {"match": "^turn A", "replies": [CALL, {"text": "A done"}]},
    {"match": ".", "replies": [{"text": "ok"}]},
]


@pytest.fixture
async def rt(tmp_path: Path):  # type: ignore[no-untyped-def]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": RULES}))
    work = tmp_path / "ws"
    work.mkdir()
    runtime = Runtime(str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=work)
    yield runtime
    await runtime.aclose()


def agents(rt: Runtime, text: str) -> None:
    (rt.workspace / "AGENTS.md").write_text(text)


def notes(messages: list[Message]) -> list[str]:
    """The instruction notes among `messages`: what each says AGENTS.md now is."""
    out = []
    for m in messages:
        if m.role == "system" and "Standing instructions changed" in m.text():
            out.append(m.text().rsplit("\n", 1)[-1])
    return out


async def four_versions(rt: Runtime) -> tuple[str, str, str]:
    """v0, turn 0; v1, turn A (changed to v2 between its two steps); v3, turn B. Returns the
    session and turns A and B."""
    agents(rt, "v0")
    await rt.run("turn zero")
    sid = rt.store.list_sessions().sessions[0].id
    agents(rt, "v1")  # before A: its note precedes A's input

    def mid_turn(ev):  # type: ignore[no-untyped-def]
        if ev.kind == "tool_start":
            agents(rt, "v2")  # inside A, between its steps

    rt.listener = mid_turn
    [a] = await rt.run("turn A", session_id=sid)
    rt.listener = None
    agents(rt, "v3")  # before B: its note is admitted just before B's input
    [b] = await rt.run("turn B", session_id=sid)
    assert notes(rt.store.messages(sid)) == ["v1", "v2", "v3"]
    return sid, a.turn_id, b.turn_id


def last_request_notes(rt: Runtime, sid: str) -> list[str]:
    """The instruction notes the newest request carried, rebuilt from its receipt (which must
    verify against its recorded digest)."""
    receipt = rt.store.receipts(sid)[-1]
    provider = make_provider(receipt.model)
    assert verify_receipt(rt.store, sid, receipt, provider)
    return notes(list(rebuild_request(rt.store, sid, receipt, provider.name).messages))


async def test_deleting_a_turn_keeps_the_instruction_changes_on_both_sides(rt: Runtime):
    sid, a, _b = await four_versions(rt)
    revision = rt.store.get_session(sid).last_seq
    rt.edit_history(sid, revision=revision, delete_turn=a)
    texts = [m.text() for m in rt.store.messages(sid)]
    assert "turn A" not in texts and "A done" not in texts and "turn B" in texts
    # The notes of the changes before, inside and after A stay: they record state, not A.
    assert notes(rt.store.messages(sid)) == ["v1", "v2", "v3"]
    [c] = await rt.run("turn C", session_id=sid)
    assert c.outcome == "completed"
    assert last_request_notes(rt, sid) == ["v1", "v2", "v3"]  # the newest is what the file says
    digests = rt.store.instruction_state(sid).values
    assert rt.store.get_blob(digests["AGENTS.md"]).decode() == "v3"


async def test_deleting_the_last_turn_keeps_its_instruction_note(rt: Runtime):
    sid, _a, b = await four_versions(rt)
    rt.edit_history(sid, revision=rt.store.get_session(sid).last_seq, delete_turn=b)
    assert notes(rt.store.messages(sid)) == ["v1", "v2", "v3"]
    await rt.run("turn C", session_id=sid)
    assert last_request_notes(rt, sid) == ["v1", "v2", "v3"]


def last_request_system(rt: Runtime, sid: str) -> str:
    """The system prompt of the newest request, rebuilt from its receipt."""
    receipt = rt.store.receipts(sid)[-1]
    return rebuild_request(rt.store, sid, receipt, make_provider(receipt.model).name).system


async def test_rewinding_a_turn_clears_instruction_state_to_a_fresh_baseline(rt: Runtime):
    """Issue 37 item 26 (003: "committed revert clears state so the next boundary establishes
    a fresh baseline"): on main a rewind restored the folded values (v1) and the next turn
    noted the file's v3 as a change; now the next turn renders v3 as its baseline, no note."""
    sid, a, _b = await four_versions(rt)
    await rt.rewind(sid, turn_id=a)
    assert notes(rt.store.messages(sid)) == ["v1"]  # the v1 note precedes A: it stays
    assert rt.store.instruction_state(sid).values == {}
    await rt.run("turn C", session_id=sid)  # the file says v3: the fresh baseline
    assert last_request_notes(rt, sid) == ["v1"]
    assert "v3" in last_request_system(rt, sid)
    digest = rt.store.instruction_state(sid).values["AGENTS.md"]
    assert rt.store.get_blob(digest).decode() == "v3"
    [*_, fresh] = [e.event for e in rt.store.events(sid, types=["instructions.updated"])]
    assert fresh.text is None  # type: ignore[union-attr]  # a baseline, not a change
    agents(rt, "v4")  # a change after the fresh baseline is a change again
    await rt.run("turn D", session_id=sid)
    assert last_request_notes(rt, sid) == ["v1", "v4"] and "v3" in last_request_system(rt, sid)


async def test_rewinding_to_an_instruction_note_clears_state_too(rt: Runtime):
    sid, _a, _b = await four_versions(rt)
    [note] = [m for m in rt.store.messages(sid) if m.role == "system" and m.text().endswith("v3")]
    await rt.rewind(sid, message_id=note.id)
    assert notes(rt.store.messages(sid)) == ["v1", "v2"]
    assert rt.store.instruction_state(sid).values == {}
    await rt.run("turn C", session_id=sid)
    assert last_request_notes(rt, sid) == ["v1", "v2"] and "v3" in last_request_system(rt, sid)


async def test_an_unrevert_restores_the_values_a_rewind_cleared(rt: Runtime):
    sid, a, _b = await four_versions(rt)
    before = rt.store.instruction_state(sid).values
    await rt.rewind(sid, turn_id=a)
    await rt.unrevert(sid)
    assert rt.store.instruction_state(sid).values == before
    await rt.run("turn C", session_id=sid)  # nothing changed: no new delta, v0 the baseline
    assert last_request_notes(rt, sid) == ["v1", "v2", "v3"]
    assert "v0" in last_request_system(rt, sid)


async def test_deleting_the_first_turn_hides_its_input(rt: Runtime):
    # The session's first delta (no note) is written just before the first input's delivery:
    # that input is no note, and goes with its turn.
    agents(rt, "v0")
    [zero] = await rt.run("turn zero")
    sid = rt.store.list_sessions().sessions[0].id
    await rt.run("turn one", session_id=sid)
    rt.edit_history(sid, revision=rt.store.get_session(sid).last_seq, delete_turn=zero.turn_id)
    assert [m.text() for m in rt.store.messages(sid)] == ["turn one", "ok"]
