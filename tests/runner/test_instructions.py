"""Instruction value deltas through real turns: one delta per change, epochs, forks."""

from __future__ import annotations

import json
from pathlib import Path

from wakeful.config import CompactionConfig, Config
from wakeful.events import INSTRUCTION_ABSENT, InstructionsUpdated, ReceiptRecorded
from wakeful.execution import Runtime
from wakeful.instructions import REMOVED
from wakeful.providers import make_provider
from wakeful.runner import verify_receipt

SUMMARY_RULE = {
    "match": "^Summarize the conversation below",
    "replies": [{"text": "## Objective\n- go on"}],
}
CALL = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}


def runtime(tmp_path: Path, rules: list[dict], **top: object) -> tuple[Runtime, str]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": [SUMMARY_RULE, *rules], **top}))
    model = f"scripted:{path}"
    config = Config(compaction=CompactionConfig(reserved=500))
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return Runtime(str(tmp_path / "s.db"), model=model, workspace=workspace, config=config), model


def deltas(rt: Runtime, sid: str) -> list[InstructionsUpdated]:
    out = [e.event for e in rt.store.events(sid, types=["instructions.updated"])]
    return [e for e in out if isinstance(e, InstructionsUpdated)]


def section_text(rt: Runtime, receipt: ReceiptRecorded, section_id: str) -> str | None:
    found = [d for s, _src, d in receipt.sections if s == section_id]
    return rt.store.get_blob(found[0]).decode() if found else None


async def test_changing_agents_md_between_two_steps_gives_one_delta_and_one_system_message(
    tmp_path: Path,
):
    rt, model = runtime(tmp_path, [{"match": ".", "replies": [CALL, CALL, {"text": "done"}]}])
    agents = rt.workspace / "AGENTS.md"
    agents.write_text("Use tabs.")

    def listener(ev):
        if ev.kind == "tool_start" and agents.read_text() == "Use tabs.":
            agents.write_text("Use spaces.")  # between step 1 and step 2

    rt.listener = listener
    [turn] = await rt.run("go")
    assert turn.outcome == "completed" and turn.steps == 3
    sid = rt.store.list_sessions().sessions[0].id

    first, change = deltas(rt, sid)  # exactly one change after the complete first delta
    # `api`: the host's entries (none: recorded absent, like a missing AGENTS.md would be)
    assert first.text is None and set(first.delta) == {"builtin", "AGENTS.md", "api"}
    assert list(change.delta) == ["AGENTS.md"] and change.text and "Use spaces." in change.text
    system = [m for m in rt.store.messages(sid) if m.role == "system"]
    assert len(system) == 1 and "Use spaces." in system[0].text()

    r1, r2, r3 = rt.store.receipts(sid)
    assert system[0].id not in r1.message_ids
    assert system[0].id in r2.message_ids and system[0].id in r3.message_ids
    # The system prompt keeps the epoch's initial value; the change is chronological.
    for receipt in (r1, r2, r3):
        assert section_text(rt, receipt, "system.instructions.AGENTS.md") == "Use tabs."
    provider = make_provider(model)
    assert all(verify_receipt(rt.store, sid, r, provider) for r in (r1, r2, r3))

    # Unchanged sources: another turn adds no delta and no system message.
    await rt.run("again", session_id=sid)
    assert len(deltas(rt, sid)) == 2
    assert sum(m.role == "system" for m in rt.store.messages(sid)) == 1
    await rt.aclose()


async def test_a_vanished_source_is_recorded_as_removed(tmp_path: Path):
    rt, _ = runtime(tmp_path, [{"match": ".", "replies": [{"text": "ok"}]}])
    agents = rt.workspace / "AGENTS.md"
    agents.write_text("Be brief.")
    [turn] = await rt.run("one")
    sid = rt.store.list_sessions().sessions[0].id
    agents.unlink()
    await rt.run("two", session_id=sid)
    assert deltas(rt, sid)[-1].delta == {"AGENTS.md": REMOVED}
    assert rt.store.instruction_state(sid).values.keys() == {"builtin"}
    await rt.aclose()


async def test_a_first_delta_says_absent_for_a_source_that_never_existed(tmp_path: Path):
    rt, _ = runtime(tmp_path, [{"match": ".", "replies": [{"text": "ok"}]}])
    assert not (rt.workspace / "AGENTS.md").exists()
    await rt.run("one")
    sid = rt.store.list_sessions().sessions[0].id
    [first] = deltas(rt, sid)
    assert first.delta["AGENTS.md"] == INSTRUCTION_ABSENT  # never there: not "removed"
    assert REMOVED not in first.delta.values()
    assert "AGENTS.md" not in first.values()
    (rt.workspace / "AGENTS.md").write_text("Be brief.")
    await rt.run("two", session_id=sid)
    assert rt.store.instruction_state(sid).values.keys() == {"builtin", "AGENTS.md"}
    await rt.aclose()


async def test_a_compaction_starts_a_new_epoch_without_reading_sources(tmp_path: Path):
    rt, model = runtime(tmp_path, [{"match": ".", "replies": [{"text": "ok"}]}])
    agents = rt.workspace / "AGENTS.md"
    agents.write_text("Use tabs.")
    sid = (await rt.run("one"))[0] and rt.store.list_sessions().sessions[0].id
    agents.write_text("Use spaces.")
    for text in ("two", "three", "four"):
        await rt.run(text, session_id=sid)
    before = rt.store.receipts(sid)[-1]
    assert section_text(rt, before, "system.instructions.AGENTS.md") == "Use tabs."

    rt.send(session_id=sid, kind="compaction", payload={}, input_id="c1", resume=False)
    await rt.resume(sid)
    [ended] = [e.event for e in rt.store.events(sid, types=["compaction.ended"])]
    assert ended.instructions == rt.store.instruction_state(sid).values  # type: ignore[union-attr]
    assert len(deltas(rt, sid)) == 2  # the compaction authored no instruction event

    await rt.run("five", session_id=sid)
    after = rt.store.receipts(sid)[-1]
    assert section_text(rt, after, "system.instructions.AGENTS.md") == "Use spaces."
    assert len(deltas(rt, sid)) == 2
    assert verify_receipt(rt.store, sid, after, make_provider(model))
    await rt.aclose()


async def test_a_fork_adopts_the_parents_newest_values(tmp_path: Path):
    rt, _ = runtime(tmp_path, [{"match": ".", "replies": [{"text": "ok"}]}])
    agents = rt.workspace / "AGENTS.md"
    agents.write_text("Use tabs.")
    [turn] = await rt.run("one")
    parent = rt.store.list_sessions().sessions[0].id
    agents.write_text("Use spaces.")
    await rt.run("two", session_id=parent)
    fork = rt.store.fork(parent).id

    await rt.run("three", session_id=fork)
    [adopted] = deltas(rt, fork)  # the parent's newest values, complete, and nothing changed
    assert adopted.text is None
    assert adopted.delta == rt.store.instruction_state(parent).values
    receipt = rt.store.receipts(fork)[-1]
    assert section_text(rt, receipt, "system.instructions.AGENTS.md") == "Use spaces."
    # The only system message is the one copied from the parent's history.
    assert sum(m.role == "system" for m in rt.store.messages(fork)) == 1

    agents.write_text("Use both.")  # a later change in the fork is a chronological update
    await rt.run("four", session_id=fork)
    assert list(deltas(rt, fork)[-1].delta) == ["AGENTS.md"]
    assert sum(m.role == "system" for m in rt.store.messages(fork)) == 2
    await rt.aclose()


async def test_a_fork_compacted_before_its_first_turn_keeps_the_adopted_values(tmp_path: Path):
    rt, _ = runtime(tmp_path, [{"match": ".", "replies": [{"text": "ok"}]}])
    (rt.workspace / "AGENTS.md").write_text("Use tabs.")
    parent = (await rt.run("one"))[0] and rt.store.list_sessions().sessions[0].id
    for text in ("two", "three", "four"):
        await rt.run(text, session_id=parent)
    fork = rt.store.fork(parent).id
    rt.send(session_id=fork, kind="compaction", payload={}, input_id="c1", resume=False)
    await rt.resume(fork)
    [ended] = [e.event for e in rt.store.events(fork, types=["compaction.ended"])]
    # The summary asks with the request a step would send, so the instructions were read as
    # a step reads them: the fork's first delta (its parent's values) came first.
    assert ended.instructions == rt.store.instruction_state(parent).values  # type: ignore[union-attr]
    await rt.run("five", session_id=fork)
    receipt = rt.store.receipts(fork)[-1]
    assert receipt.message_ids[0] == ended.summary_message_id  # type: ignore[union-attr]
    assert section_text(rt, receipt, "system.instructions.AGENTS.md") == "Use tabs."
    await rt.aclose()


async def test_a_drain_plans_unchanged_instructions_once_per_turn_not_again_before_idling(
    tmp_path: Path, monkeypatch
):
    # The drain's idle promotion after a turn shares its port's instruction sync: with the
    # sources reading as the turn's last sync read them, no delta is planned from the store
    # again. A source changed between the turns of one drain is still admitted before the
    # delivery that follows (the next test of the plan: the change's delta and message).
    from wakeful.instructions import _sync

    planned: list[str] = []
    plan = _sync._plan

    def counting(store, session_id, *args):  # type: ignore[no-untyped-def]
        planned.append(session_id)
        return plan(store, session_id, *args)

    monkeypatch.setattr(_sync, "_plan", counting)
    rt, _ = runtime(tmp_path, [{"match": ".", "replies": [{"text": "ok"}]}])
    (rt.workspace / "AGENTS.md").write_text("Be brief.")
    [turn] = await rt.run("go")
    assert turn.outcome == "completed"
    # The drain's first delivery (its prelude, the session's first delta); not the turn's
    # sync, which renders what that prelude wrote (issue 36), nor the idle promotion.
    assert len(planned) == 1
    sid = planned[0]
    (rt.workspace / "AGENTS.md").write_text("Be verbose.")
    await rt.run("again", session_id=sid)
    first, change = deltas(rt, sid)
    assert change.text is not None and "Be verbose." in change.text
    assert len(planned) == 3  # a later delta's baseline is the epoch's: the turn's sync reads it
    await rt.aclose()


async def test_a_compaction_between_turns_of_one_drain_starts_the_next_turns_epoch(
    tmp_path: Path,
):
    # One drain runs "two" (its sync finds the change: a delta, the epoch's old baseline),
    # the compaction (a new epoch from the values it snapshots) and "five". The turn after the
    # compaction must render the new epoch's values, not the baseline its port's sync kept.
    rt, model = runtime(tmp_path, [{"match": ".", "replies": [{"text": "ok"}]}])
    agents = rt.workspace / "AGENTS.md"
    agents.write_text("Use tabs.")
    sid = (await rt.run("one"))[0] and rt.store.list_sessions().sessions[0].id
    for text in ("x", "y"):  # (enough history for the summary to replace some)
        await rt.run(text, session_id=sid)
    agents.write_text("Use spaces.")
    rt.send("two", session_id=sid, resume=False)
    rt.send(session_id=sid, kind="compaction", payload={}, input_id="c1", resume=False)
    rt.send("five", session_id=sid, resume=False)
    results = await rt.resume(sid)
    assert [t.outcome for t in results] == ["completed", "completed"]
    assert rt.store.events(sid, types=["compaction.ended"])
    two, five = rt.store.receipts(sid)[-2:]
    assert section_text(rt, two, "system.instructions.AGENTS.md") == "Use tabs."
    assert section_text(rt, five, "system.instructions.AGENTS.md") == "Use spaces."
    assert verify_receipt(rt.store, sid, five, make_provider(model))
    await rt.aclose()


def test_a_drivers_first_delta_gives_its_baseline_without_reading_it_back(tmp_path: Path):
    """Issue 24 (recovery CPU): the sync that writes a session's first delta under a claim
    knows the epoch's values (the sources it just read); reading the compactions, the first
    delta and its blobs back cost three statements on every session's first turn."""
    from wakeful.events import SessionCreated
    from wakeful.instructions import InstructionSync, baseline, workspace_sources
    from wakeful.store import fence, open_store

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Use tabs.")
    store = open_store(str(tmp_path / "s.db"))
    store.admit("ses_a", None, "user", {"text": "hi"}, create=SessionCreated(agent="build"))
    claim = store.claims.acquire("ses_a", "host/1/x", lease_ms=60_000)
    assert claim is not None
    sources = workspace_sources(workspace, {"style": "Be brief."})
    reads: list[str] = []
    for name in ("live_compactions", "events", "get_blobs", "instruction_state"):
        method = getattr(store, name)

        def counted(*args, _name=name, _method=method, **kwargs):
            reads.append(_name)
            return _method(*args, **kwargs)

        setattr(store, name, counted)
    sync = InstructionSync(store, "ses_a", sources)
    base = sync(fence(claim), 0)
    assert reads == ["instruction_state"]  # the old code also read the three back
    [first] = [e.event for e in store.events("ses_a", types=["instructions.updated"])]
    assert isinstance(first, InstructionsUpdated) and first.text is None
    assert base == baseline(store, "ses_a")  # the same values, in the same order
    assert [k for k, _ in base.values] == ["builtin", "AGENTS.md", "config:style"]
    # A later change is read back as before (the epoch's values stay the first delta's).
    (workspace / "AGENTS.md").write_text("Use spaces.")
    reads.clear()
    later = InstructionSync(store, "ses_a", sources)(fence(claim), 0)
    assert "live_compactions" in reads and later == base
    store.close()
