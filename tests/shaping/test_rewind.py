"""Rewind and unrevert through the `Runtime`: conversation, work state, instructions, files."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from wakeful.errors import ConflictError, FileConflictError, FileRestoreError, UsageError
from wakeful.events import SessionReverted
from wakeful.execution import Runtime
from wakeful.messages import is_wire_valid
from wakeful.runner import verify_receipt

RULES = [
    {
        "match": "^first",
        "replies": [
            {
                "tool_calls": [
                    {"name": "goal_set", "input": {"goal": "goal one"}},
                    {"name": "write_file", "input": {"path": "a.txt", "content": "one\n"}},
                ]
            },
            {"text": "first done"},
        ],
    },
    {
        "match": "^second",
        "replies": [
            {
                "tool_calls": [
                    {"name": "goal_set", "input": {"goal": "goal two"}},
                    {"name": "edit_file", "input": {"path": "a.txt", "old": "one", "new": "two"}},
                    {"name": "write_file", "input": {"path": "new.txt", "content": "fresh\n"}},
                    {"name": "shell", "input": {"command": "echo side effect > shell.txt"}},
                ]
            },
            {"text": "second done"},
        ],
    },
    {"match": "^slow", "replies": [{"text": "slow " * 2000}]},
    {"match": ".", "replies": [{"text": "ok"}]},
]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").mkdir()
    (work / "wakeful.toml").write_text('[permissions]\n"*" = "allow"\n')
    return work


@pytest.fixture
async def rt(tmp_path: Path, ws: Path):  # type: ignore[no-untyped-def]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": RULES, "chunk_chars": 4, "chunk_delay_ms": 5}))
    runtime = Runtime(str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=ws)
    yield runtime
    await runtime.aclose()


async def two_turns(rt: Runtime) -> tuple[str, str, str]:
    [one] = await rt.run("first prompt")
    sid = rt.store.list_sessions().sessions[0].id
    [two] = await rt.run("second prompt", session_id=sid)
    assert one.outcome == two.outcome == "completed"
    return sid, one.turn_id, two.turn_id


async def test_rewind_hides_the_turn_and_a_new_input_never_sends_it(rt: Runtime, ws: Path):
    sid, _one, two = await two_turns(rt)
    before = rt.store.messages(sid)
    hidden_ids = {m.id for m in before[4:]}  # second prompt onwards
    assert rt.store.work_state(sid)["goal"] == "goal two"

    result = await rt.rewind(sid, turn_id=two)
    assert result.prompt == "second prompt"
    assert result.hidden == len(before) - 4
    assert result.shell_calls == ("echo side effect > shell.txt",)
    assert set(result.files_left) == {"a.txt", "new.txt"}
    assert any("not reversed" in w for w in result.warnings())
    assert [m.id for m in rt.store.messages(sid)] == [m.id for m in before[:4]]
    assert rt.store.work_state(sid)["goal"] == "goal one"
    assert (ws / "a.txt").read_text() == "two\n"  # files were not asked for
    # the log keeps everything
    assert len([e for e in rt.store.events(sid) if e.event.type == "message.added"]) >= 4

    [three] = await rt.run("third prompt", session_id=sid)
    assert three.outcome == "completed"
    receipt = rt.store.receipts(sid)[-1]
    assert hidden_ids.isdisjoint(receipt.message_ids)
    assert verify_receipt(rt.store, sid, receipt, rt.build_provider(rt.model))
    # every earlier receipt still rebuilds, also those that carried the hidden messages
    provider = rt.build_provider(rt.model)
    assert all(verify_receipt(rt.store, sid, r, provider) for r in rt.store.receipts(sid))
    assert is_wire_valid(rt.store.messages(sid))
    # a new input made the revert final
    with pytest.raises(UsageError):
        await rt.unrevert(sid)
    assert rt.store.pending_revert(sid) is None


async def test_unrevert_restores_messages_and_work_state(rt: Runtime):
    sid, _one, two = await two_turns(rt)
    before = [m.id for m in rt.store.messages(sid)]
    await rt.rewind(sid, turn_id=two)
    pending = rt.store.pending_revert(sid)
    assert pending is not None and pending.hidden == len(before) - 4
    result = await rt.unrevert(sid)
    assert result.hidden == len(before) - 4
    assert [m.id for m in rt.store.messages(sid)] == before
    assert rt.store.work_state(sid)["goal"] == "goal two"
    assert rt.store.pending_revert(sid) is None
    with pytest.raises(UsageError):
        await rt.unrevert(sid)


async def test_rewind_twice_then_unrevert_brings_everything_back(rt: Runtime):
    sid, one, two = await two_turns(rt)
    before = [m.id for m in rt.store.messages(sid)]
    await rt.rewind(sid, turn_id=two)
    await rt.rewind(sid, turn_id=one)
    assert rt.store.messages(sid) == [] and rt.store.work_state(sid) == {}
    await rt.unrevert(sid)
    assert [m.id for m in rt.store.messages(sid)] == before
    assert rt.store.work_state(sid)["goal"] == "goal two"


async def test_rewind_with_files_restores_them_and_unrevert_puts_them_back(rt: Runtime, ws: Path):
    sid, _one, two = await two_turns(rt)
    result = await rt.rewind(sid, turn_id=two, files=True)
    assert set(result.files_restored) == {"a.txt", "new.txt"} and result.files_left == ()
    assert (ws / "a.txt").read_text() == "one\n"
    assert not (ws / "new.txt").exists()  # created by the reverted turn: removed
    assert (ws / "shell.txt").exists()  # shell effects stay
    back = await rt.unrevert(sid)
    assert set(back.files_restored) == {"a.txt", "new.txt"}
    assert (ws / "a.txt").read_text() == "two\n" and (ws / "new.txt").read_text() == "fresh\n"


async def test_rewind_refuses_files_changed_by_something_else(rt: Runtime, ws: Path):
    sid, _one, two = await two_turns(rt)
    (ws / "a.txt").write_text("changed outside\n")
    revision = rt.store.get_session(sid).last_seq
    with pytest.raises(FileConflictError) as err:
        await rt.rewind(sid, turn_id=two, files=True)
    assert err.value.paths == ("a.txt",)
    # nothing was touched: no file, no event
    assert (ws / "a.txt").read_text() == "changed outside\n" and (ws / "new.txt").exists()
    assert rt.store.get_session(sid).last_seq == revision and rt.store.pending_revert(sid) is None
    forced = await rt.rewind(sid, turn_id=two, files=True, force=True)
    assert set(forced.files_restored) == {"a.txt", "new.txt"}
    assert (ws / "a.txt").read_text() == "one\n"
    # what the force overwrote was kept: the unrevert puts the outside change back
    back = await rt.unrevert(sid)
    assert set(back.files_restored) == {"a.txt", "new.txt"}
    assert (ws / "a.txt").read_text() == "changed outside\n"
    assert (ws / "new.txt").read_text() == "fresh\n"


async def test_a_rewind_cut_short_after_the_files_completes_when_run_again(rt: Runtime, ws: Path):
    sid, _one, two = await two_turns(rt)
    (ws / "a.txt").write_text("one\n")  # as if an earlier rewind restored it, then died
    result = await rt.rewind(sid, turn_id=two, files=True)
    assert set(result.files_restored) == {"a.txt", "new.txt"}


async def test_rewind_of_a_driven_session_interrupts_first(rt: Runtime):
    [first] = await rt.run("hello")
    sid = rt.store.list_sessions().sessions[0].id
    rt.send("slow prompt", session_id=sid)
    for _ in range(1000):  # wait for the drain to hold the session
        if rt.busy(sid):
            break
        await asyncio.sleep(0.01)
    result = await rt.rewind(sid)  # the newest turn: the one running
    assert result.prompt == "slow prompt"
    types = [e.event.type for e in rt.store.events(sid)]
    asked = types.index("session.interrupt_requested")
    ended = len(types) - 1 - types[::-1].index("turn.ended")
    assert asked < ended < types.index("session.reverted")
    assert [m.role for m in rt.store.messages(sid)] == ["user", "assistant"]
    assert first.outcome == "completed"


async def test_bad_targets_and_stale_revisions_write_nothing(rt: Runtime):
    sid, _one, two = await two_turns(rt)
    last = rt.store.get_session(sid).last_seq
    with pytest.raises(ConflictError):
        await rt.rewind(sid, turn_id=two, revision=last - 1)
    with pytest.raises(Exception, match="no turn"):
        await rt.rewind(sid, turn_id="turn_nope")
    with pytest.raises(UsageError):
        await rt.rewind(sid, turn_id=two, input_id="in_x")
    assert rt.store.get_session(sid).last_seq == last
    stored = await rt.rewind(sid, turn_id=two, revision=last)
    assert isinstance(rt.store.events(sid)[-1].event, SessionReverted) and stored.seq == last + 1


async def test_a_directory_where_a_file_was_refuses_the_whole_rewind(rt: Runtime, ws: Path):
    # issue 43 item 3: it raised a raw OS error after restoring some files, recording nothing
    sid, _one, two = await two_turns(rt)
    shown = [m.id for m in rt.store.messages(sid)]
    (ws / "new.txt").unlink()
    (ws / "new.txt").mkdir()
    with pytest.raises(FileRestoreError, match="new.txt: a directory is where the file was") as err:
        await rt.rewind(sid, turn_id=two, files=True)
    assert err.value.paths == ("new.txt",) and "nothing was changed" in str(err.value)
    assert (ws / "a.txt").read_text() == "two\n"  # not restored: all or nothing
    assert rt.store.pending_revert(sid) is None and [m.id for m in rt.store.messages(sid)] == shown
    (ws / "new.txt").rmdir()
    (ws / "new.txt").write_text("fresh\n")  # the cause fixed: the same rewind now completes
    result = await rt.rewind(sid, turn_id=two, files=True)
    assert set(result.files_restored) == {"a.txt", "new.txt"} and result.files_completed == ()
    assert (ws / "a.txt").read_text() == "one\n" and not (ws / "new.txt").exists()


def _immutable(path: Path, on: bool) -> None:
    done = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"chattr cannot make {path} immutable here: {done.stderr.decode().strip()}")


@pytest.mark.parametrize("stuck", ["a.txt", "new.txt"])
async def test_an_immutable_target_puts_back_the_files_already_restored(
    rt: Runtime, ws: Path, stuck: str
):
    # whichever file fails, the other (renamed before or never) ends as it was
    sid, _one, two = await two_turns(rt)
    _immutable(ws / stuck, True)
    try:
        with pytest.raises(
            FileRestoreError, match=f"cannot restore {stuck}: .*nothing was changed"
        ):
            await rt.rewind(sid, turn_id=two, files=True)
        assert (ws / "a.txt").read_text() == "two\n" and (ws / "new.txt").read_text() == "fresh\n"
        assert rt.store.pending_revert(sid) is None
        assert not [p for p in os.listdir(ws) if p.endswith(".rewind")]  # no staged leftovers
    finally:
        _immutable(ws / stuck, False)
    result = await rt.rewind(sid, turn_id=two, files=True)
    assert set(result.files_restored) == {"a.txt", "new.txt"}
    assert (ws / "a.txt").read_text() == "one\n" and not (ws / "new.txt").exists()
