"""The store's shaping operations on every backend: rewind, history edits, artifacts, metadata
and extension state (one contract suite, parametrised over SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from wakeful.clock import FakeClock
from wakeful.errors import ConflictError, NotFoundError, UsageError
from wakeful.events import (
    InstructionsUpdated,
    MessageAdded,
    TurnEnded,
    TurnStarted,
    WorkStateUpdated,
)
from wakeful.execution._writes import promote_idle
from wakeful.messages import Message, TextBlock, ToolCallBlock, ToolResultBlock, is_wire_valid
from wakeful.store import ARTIFACTS_PER_SESSION_CAP, SqlStore


def turn(store: SqlStore, sid: str, n: int, *, tool: bool = True, goal: str | None = None) -> str:
    """One completed turn: a delivered prompt, a tool call and its result, an answer."""
    store.admit(sid, f"in_{n}", "user", {"text": f"prompt {n}"})
    tid = f"turn_{n}"
    promote_idle(store, sid, None, start_turn=tid)
    events: list = []
    if tool:
        call = Message(role="assistant", blocks=(ToolCallBlock(id=f"c{n}", name="read_file"),))
        result = Message(role="user", blocks=(ToolResultBlock(call_id=f"c{n}", output="x"),))
        events += [
            MessageAdded(message=call, turn_id=tid),
            MessageAdded(message=result, turn_id=tid),
        ]
    if goal is not None:
        events.append(WorkStateUpdated(kind="goal", value=goal))
    events.append(
        MessageAdded(
            message=Message(role="assistant", blocks=(TextBlock(text=f"answer {n}"),)), turn_id=tid
        )
    )
    events.append(TurnEnded(turn_id=tid, outcome="completed"))
    store.append(sid, events)
    return tid


@pytest.fixture
def sid(store: SqlStore) -> str:
    return store.create_session(title="shaping").id


def texts(store: SqlStore, sid: str) -> list[str]:
    return [b.text for m in store.messages(sid) for b in m.blocks if isinstance(b, TextBlock)]


# -- rewind -------------------------------------------------------------------------------------


def test_revert_hides_and_restores_state_and_a_delivery_makes_it_final(store: SqlStore, sid: str):
    turn(store, sid, 1, goal="one")
    two = turn(store, sid, 2, goal="two")
    plan = store.shaping.plan_revert(sid, turn_id=two)
    assert plan.hidden == 4 and plan.first is not None
    store.shaping.revert(sid, turn_id=two, revision=plan.revision)
    assert texts(store, sid) == ["prompt 1", "answer 1"]
    assert store.work_state(sid) == {"goal": "one"}
    store.shaping.unrevert(sid)
    assert texts(store, sid)[-1] == "answer 2" and store.work_state(sid) == {"goal": "two"}
    store.shaping.revert(sid, input_id="in_2")
    turn(store, sid, 3)
    assert texts(store, sid) == ["prompt 1", "answer 1", "prompt 3", "answer 3"]
    assert store.pending_revert(sid) is None
    if store.backend.kind == "postgres":  # the final revert's messages left the index too
        with store.backend.transaction(write=False) as tx:
            indexed = tx.all("SELECT seq FROM search_docs WHERE session_id = ? AND seq > 0", (sid,))
            shown = tx.all("SELECT seq FROM messages WHERE session_id = ?", (sid,))
        assert indexed and {r[0] for r in indexed} <= {r[0] for r in shown}
    with pytest.raises(UsageError):
        store.shaping.unrevert(sid)
    assert is_wire_valid(store.messages(sid))
    # every message is still in the log
    logged = [e for e in store.events(sid) if e.event.type in ("message.added", "inbox.delivered")]
    assert len(logged) == 12


def test_revert_refused_while_a_turn_is_unfinished(store: SqlStore, sid: str):
    turn(store, sid, 1)
    store.append(sid, [TurnStarted(turn_id="turn_open")])
    before = store.get_session(sid).last_seq
    with pytest.raises(ConflictError, match="unfinished turn"):
        store.shaping.revert(sid, turn_id="turn_1")
    assert store.get_session(sid).last_seq == before


def test_revert_to_unknown_targets(store: SqlStore, sid: str):
    with pytest.raises(UsageError, match="no turn"):
        store.shaping.revert(sid)
    turn(store, sid, 1)
    with pytest.raises(NotFoundError):
        store.shaping.revert(sid, input_id="in_nope")
    with pytest.raises(NotFoundError):
        store.shaping.revert("ses_nope")


# -- history edits ------------------------------------------------------------------------------


def test_a_stale_revision_edit_is_refused_and_writes_nothing(store: SqlStore, sid: str):
    turn(store, sid, 1)
    revision = store.get_session(sid).last_seq
    turn(store, sid, 2)
    last = store.get_session(sid).last_seq
    with pytest.raises(ConflictError, match="changed"):
        store.shaping.edit_history(sid, revision=revision, delete_turn="turn_1")
    assert store.get_session(sid).last_seq == last and len(store.messages(sid)) == 8


def test_deleting_a_turn_keeps_the_pairing_valid(store: SqlStore, sid: str):
    for n in range(1, 4):
        turn(store, sid, n)
    store.shaping.edit_history(sid, revision=store.get_session(sid).last_seq, delete_turn="turn_2")
    messages = store.messages(sid)
    assert texts(store, sid) == ["prompt 1", "answer 1", "prompt 3", "answer 3"]
    assert is_wire_valid(messages)
    calls = {b.id for m in messages for b in m.blocks if isinstance(b, ToolCallBlock)}
    results = {b.call_id for m in messages for b in m.blocks if isinstance(b, ToolResultBlock)}
    assert calls == results == {"c1", "c3"}


def note(store: SqlStore, sid: str, version: str) -> None:
    """An instruction change as a driver admits it: the delta, then its system note."""
    text = f"Standing instructions changed:\n- AGENTS.md is now:\n{version}"
    store.append(
        sid,
        [
            InstructionsUpdated(delta={"AGENTS.md": version * 32}, text=text),
            MessageAdded(message=Message(role="system", blocks=(TextBlock(text=text),))),
        ],
    )


def test_deleting_a_turn_keeps_instruction_notes_on_both_sides(store: SqlStore, sid: str):
    turn(store, sid, 1)
    note(store, sid, "a")  # before turn 2
    turn(store, sid, 2)
    note(store, sid, "b")  # after turn 2, before turn 3's input
    turn(store, sid, 3)
    store.shaping.edit_history(sid, revision=store.get_session(sid).last_seq, delete_turn="turn_2")
    assert [t.rsplit("\n", 1)[-1] for t in texts(store, sid)] == [
        "prompt 1",
        "answer 1",
        "a",
        "b",
        "prompt 3",
        "answer 3",
    ]
    assert is_wire_valid(store.messages(sid))


def test_rewinding_to_an_instruction_note_starts_at_its_delta(store: SqlStore, sid: str):
    note(store, sid, "a")
    turn(store, sid, 1)
    note(store, sid, "b")
    [_note_a, *_, note_b] = [m for m in store.messages(sid) if m.role == "system"]
    plan = store.shaping.plan_revert(sid, message_id=note_b.id)
    assert plan.hidden == 1 and plan.first is not None and plan.first.id == note_b.id
    store.shaping.revert(sid, message_id=note_b.id)
    # A rewind clears instruction state (issue 37 item 26): the next sync starts afresh.
    assert store.instruction_state(sid).values == {}
    assert texts(store, sid)[-1] == "answer 1"
    store.shaping.unrevert(sid)  # an unrevert brings back the values it cleared
    assert store.instruction_state(sid).values == {"AGENTS.md": "b" * 32}


def test_replacing_a_message_text(store: SqlStore, sid: str):
    turn(store, sid, 1)
    answer = store.messages(sid)[-1]
    store.shaping.edit_history(
        sid, revision=store.get_session(sid).last_seq, message_id=answer.id, text="better"
    )
    assert texts(store, sid)[-1] == "better" and store.messages(sid)[-1].id == answer.id
    assert [h.session.id for h in store.search("better").hits] == [sid]
    tool_call = store.messages(sid)[1]
    with pytest.raises(UsageError, match="not editable"):
        store.shaping.edit_history(
            sid, revision=store.get_session(sid).last_seq, message_id=tool_call.id, text="x"
        )


# -- artifacts ----------------------------------------------------------------------------------


def test_artifact_upsert_keeps_identity_and_refreshes_label(
    store: SqlStore, sid: str, clock: FakeClock
):
    first = store.shaping.add_artifact(
        sid, "pull_request", "https://example.com/pr/1", "PR 1", {"n": 1}
    )
    clock.advance(1000)
    again = store.shaping.add_artifact(sid, "pull_request", "https://example.com/pr/1", "PR #1")
    assert again.id == first.id and again.created_ms == first.created_ms
    assert again.label == "PR #1" and again.meta == {"n": 1} and again.updated_ms > first.updated_ms
    assert len(store.artifacts(sid)) == 1


def test_artifact_cap_evicts_files_first_oldest_first(store: SqlStore, sid: str, clock: FakeClock):
    store.shaping.add_artifact(sid, "branch", "git:repo#main", "main")
    for i in range(ARTIFACTS_PER_SESSION_CAP - 1):
        clock.advance(1)
        store.shaping.add_artifact(sid, "file", f"file:///f{i:03d}", f"f{i:03d}")
    clock.advance(1)
    store.shaping.add_artifact(sid, "commit", "git:repo@abc", "abc")  # 201st: the oldest file goes
    clock.advance(1)
    store.shaping.add_artifact(
        sid, "pull_request", "https://x/pr/9", "PR 9"
    )  # 202nd: the next file
    kept = store.artifacts(sid, limit=500)
    assert len(kept) == ARTIFACTS_PER_SESSION_CAP
    uris = {a.uri for a in kept}
    assert {"git:repo#main", "git:repo@abc", "https://x/pr/9"} <= uris
    assert "file:///f000" not in uris and "file:///f001" not in uris and "file:///f002" in uris


def test_artifact_filters_and_reverse_lookup(store: SqlStore, clock: FakeClock):
    a = store.create_session().id
    b = store.create_session().id
    store.shaping.add_artifact(a, "pull_request", "https://x/pr/1", "PR 1")
    clock.advance(5000)
    since = clock.now_ms()
    store.shaping.add_artifact(a, "file", "file:///a.txt", "a.txt")
    store.shaping.add_artifact(b, "pull_request", "https://x/pr/1", "PR 1 again")
    assert [x.kind for x in store.artifacts(a)] == ["file", "pull_request"]
    assert [x.uri for x in store.artifacts(a, kind="pull_request")] == ["https://x/pr/1"]
    assert [x.uri for x in store.artifacts(a, since_ms=since)] == ["file:///a.txt"]
    found = store.find_artifacts("https://x/pr/1", kind="pull_request")
    assert [x.session_id for x in found] == [b, a]
    assert store.find_artifacts("https://x/pr/2") == []
    with pytest.raises(UsageError):
        store.shaping.add_artifact(a, "Bad Kind", "u", "l")
    with pytest.raises(NotFoundError):
        store.artifacts("ses_nope")
    store.delete(a)
    assert [x.session_id for x in store.find_artifacts("https://x/pr/1")] == [b]


def test_reverse_lookup_by_location_and_since(store: SqlStore, clock: FakeClock):
    here = store.create_session(location="/work/here").id
    child = store.create_session(parent_id=here).id  # a child lives where its parent does
    away = store.create_session(location="/work/away").id
    store.shaping.add_artifact(here, "pull_request", "https://x/pr/1", "PR 1")
    clock.advance(5000)
    since = clock.now_ms()
    store.shaping.add_artifact(child, "branch", "git:repo#feature", "feature")
    store.shaping.add_artifact(away, "pull_request", "https://x/pr/1", "PR 1 again")
    at_here = store.find_artifacts(location="/work/here")
    assert [(a.session_id, a.uri) for a in at_here] == [
        (child, "git:repo#feature"),
        (here, "https://x/pr/1"),
    ]
    assert [a.session_id for a in store.find_artifacts("https://x/pr/1", since_ms=since)] == [away]
    assert [
        a.session_id for a in store.find_artifacts("https://x/pr/1", location="/work/away")
    ] == [away]
    assert [a.uri for a in store.find_artifacts(location="/work/here", since_ms=since)] == [
        "git:repo#feature"
    ]
    assert store.find_artifacts(location="/work/nowhere") == []
    with pytest.raises(UsageError, match="uri or a location"):
        store.find_artifacts(kind="branch")


# -- metadata and extension state ---------------------------------------------------------------


def test_metadata_merges_by_key_within_its_bound(store: SqlStore, sid: str):
    assert store.shaping.update_metadata(sid, {"a": 1, "b": {"c": 2}}) == {"a": 1, "b": {"c": 2}}
    assert store.shaping.update_metadata(sid, {"a": None, "d": "x"}) == {"b": {"c": 2}, "d": "x"}
    assert store.metadata(sid) == {"b": {"c": 2}, "d": "x"}
    with pytest.raises(UsageError, match="exceed"):
        store.shaping.update_metadata(sid, {"big": "x" * 70_000})
    assert store.metadata(sid) == {"b": {"c": 2}, "d": "x"}
    assert [e.event.type for e in store.events(sid)][-2:] == ["metadata.updated"] * 2


def test_extension_state_get_set_delete_and_bounds(store: SqlStore, sid: str):
    store.shaping.set_extension_state(sid, "todo-sync", "cursor", {"page": 3})
    store.shaping.set_extension_state(sid, "todo-sync", "seen", [1, 2])
    assert store.extension_state(sid, "todo-sync") == {"cursor": {"page": 3}, "seen": [1, 2]}
    assert store.extension_state(sid, "other") == {}
    assert store.shaping.delete_extension_state(sid, "todo-sync", "seen") is True
    assert store.shaping.delete_extension_state(sid, "todo-sync", "seen") is False
    assert store.extension_state(sid, "todo-sync") == {"cursor": {"page": 3}}
    with pytest.raises(UsageError, match="unsafe"):
        store.shaping.set_extension_state(sid, "../x", "k", 1)
    with pytest.raises(UsageError, match="larger"):
        store.shaping.set_extension_state(sid, "x", "k", "y" * 17_000)
    for i in range(4):
        store.shaping.set_extension_state(sid, "x", f"k{i}", "y" * 16_000)
    with pytest.raises(UsageError, match="exceed"):
        store.shaping.set_extension_state(sid, "x", "k9", "y" * 16_000)
    types = [e.event.type for e in store.events(sid)]
    assert types.count("extension_state.set") == 7


def test_healing_the_pairing_writes_the_drop_only_heal_back(store: SqlStore, sid: str):
    """Issue 37 item 28: the pairing heal applied to the stored history through the
    history-edit API (on main only `to_wire` repaired it, for each request, never the store):
    a duplicate result and a result without its call go; a message left empty goes whole; an
    unanswered call stays (authentic output; the wire gives it a placeholder)."""
    turn(store, sid, 1)
    call = Message(
        role="assistant",
        blocks=(ToolCallBlock(id="c2", name="read_file"), ToolCallBlock(id="c3", name="read_file")),
    )
    twice = Message(
        role="user",
        blocks=(
            ToolResultBlock(call_id="c2", output="a"),
            ToolResultBlock(call_id="c2", output="again"),
        ),
    )
    orphan = Message(role="user", blocks=(ToolResultBlock(call_id="c9", output="lost"),))
    store.append(sid, [MessageAdded(message=m) for m in (call, twice, orphan)])
    assert not is_wire_valid(store.messages(sid))
    before = len(store.events(sid))
    revision = store.get_session(sid).last_seq
    store.shaping.edit_history(sid, revision=revision, heal_pairing=True)
    messages = store.messages(sid)
    assert orphan.id not in {m.id for m in messages}
    [healed] = [m for m in messages if m.id == twice.id]
    assert [b.output for b in healed.blocks if isinstance(b, ToolResultBlock)] == ["a"]
    assert [c.id for m in messages for c in m.tool_calls()] == ["c1", "c2", "c3"]  # c3 kept
    assert len(store.events(sid)) == before + 2  # one edit per healed message, one hiding
    with pytest.raises(UsageError, match="already pair"):
        store.shaping.edit_history(sid, revision=store.get_session(sid).last_seq, heal_pairing=True)
    with pytest.raises(ConflictError):
        store.shaping.edit_history(sid, revision=revision, heal_pairing=True)  # stale
    with pytest.raises(UsageError):
        store.shaping.edit_history(
            sid, revision=store.get_session(sid).last_seq, heal_pairing=True, delete_turn="turn_1"
        )
