"""The store contract: one suite, run unchanged against SQLite (a file, the in-memory store
`memory_store`, and the file-map store `file_map_store`) and PostgreSQL."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator

import pytest

from tests.pg import fresh_database
from tests.store.helpers import add_message, recent_events
from wakeful.clock import FakeClock
from wakeful.errors import ClaimLostError, ConflictError, NotFoundError, UsageError
from wakeful.events import (
    ApprovalDecided,
    ApprovalRequested,
    CompactionEnded,
    CompactionTail,
    ExtensionStateSet,
    InstructionsUpdated,
    MessageAdded,
    RetryScheduled,
    SessionCreated,
    SessionUpdated,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    UsageRecorded,
    WorkStateUpdated,
)
from wakeful.execution._writes import promote_idle, promote_step, turn_opening
from wakeful.messages import assistant
from wakeful.store import (
    Prelude,
    SessionSummary,
    SqlStore,
    SyncMarker,
    current_owner,
    fence,
    file_map_store,
    memory_store,
    open_store,
)
from wakeful.store._listing import LIST_SLACK_MS
from wakeful.store._records import updated_ms_sql

NEW = SessionCreated(title="t")


@pytest.fixture(
    params=["sqlite", "memory", "file-map", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def store(request: pytest.FixtureRequest, tmp_path, clock: FakeClock) -> Iterator[SqlStore]:
    """Each backend, the in-memory store among them."""
    if request.param == "memory":
        s = memory_store(clock=clock)
        yield s
        s.close()
    elif request.param == "file-map":
        s = file_map_store(tmp_path / "map", clock=clock)
        yield s
        s.close()
    elif request.param == "sqlite":
        s = open_store(str(tmp_path / "sessions.db"), clock=clock)
        yield s
        s.close()
    else:
        with fresh_database() as url:
            s = open_store(url, clock=clock)
            yield s
            s.close()


def texts(store: SqlStore, sid: str) -> list[str]:
    return [m.text() for m in store.messages(sid)]


def test_admission_materializes_session_lazily(store: SqlStore):
    assert store.find_session("ses_a") is None
    with pytest.raises(NotFoundError):
        store.admit("ses_a", "i1", "user", {"text": "hi"})
    assert store.find_session("ses_a") is None
    adm = store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    assert adm.created and adm.session_created
    row = store.get_session("ses_a")
    assert row.title == "t" and row.last_seq == 2
    assert [e.type for e in store.events("ses_a")] == ["session.created", "inbox.enqueued"]
    store.admit("ses_a", "i2", "user", {"text": "again"})  # an existing session's admission
    typed = store.events("ses_a", types=["inbox.enqueued"])  # by the stored type column
    assert [e.event.input_id for e in typed] == ["i1", "i2"]  # type: ignore[union-attr]


def test_input_id_reuse_is_idempotent_or_conflict(store: SqlStore):
    first = store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    again = store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    assert not again.created and again.item == first.item
    with pytest.raises(ConflictError, match="i1"):
        store.admit("ses_a", "i1", "user", {"text": "other"})
    with pytest.raises(ConflictError):
        store.admit("ses_a", "i1", "user", {"text": "hi"}, delivery="queue")
    store.promote("ses_a", idle=True)
    after = store.admit("ses_a", "i1", "user", {"text": "hi"})
    assert not after.created and after.item.status == "delivered"
    other_mode = store.admit("ses_a", "i1", "user", {"text": "hi"}, delivery="queue")
    assert not other_mode.created and other_mode.item == after.item  # 003: same input
    with pytest.raises(ConflictError):  # delivered, but other content
        store.admit("ses_a", "i1", "user", {"text": "other"}, delivery="queue")
    assert texts(store, "ses_a") == ["hi"]


def test_steers_deliver_fifo_and_stop_at_control(store: SqlStore):
    for i, kind in enumerate(["user", "user", "compaction", "user"]):
        payload = {"text": f"m{i}"} if kind == "user" else {}
        store.admit("ses_a", f"i{i}", kind, payload, create=NEW)
    first = store.promote("ses_a", idle=False)
    assert [d.item.input_id for d in first] == ["i0", "i1"]
    control = store.promote("ses_a", idle=False)
    assert [(d.item.input_id, d.message) for d in control] == [("i2", None)]
    assert [d.item.input_id for d in store.promote("ses_a", idle=False)] == ["i3"]
    assert store.promote("ses_a", idle=True) == []
    assert texts(store, "ses_a") == ["m0", "m1", "m3"]


def test_queue_delivers_one_at_idle_and_steers_pass_it(store: SqlStore):
    store.admit("ses_a", "q1", "user", {"text": "q1"}, "queue", create=NEW)
    store.admit("ses_a", "q2", "user", {"text": "q2"}, "queue")
    store.admit("ses_a", "s1", "user", {"text": "s1"})
    assert [d.item.input_id for d in store.promote("ses_a", idle=False)] == ["s1"]
    assert store.promote("ses_a", idle=False) == []
    assert [d.item.input_id for d in store.promote("ses_a", idle=True)] == ["q1"]
    assert [d.item.input_id for d in store.promote("ses_a", idle=True)] == ["q2"]
    assert [i.input_id for i in store.pending("ses_a")] == []


def test_targeted_promotion(store: SqlStore):
    store.admit("ses_a", "a", "user", {"text": "a"}, "queue", create=NEW)
    store.admit("ses_a", "b", "user", {"text": "b"}, "queue")
    assert [d.item.input_id for d in store.promote("ses_a", idle=False, input_id="b")] == ["b"]
    assert [i.input_id for i in store.pending("ses_a")] == ["a"]


def test_malformed_input_is_settled_and_does_not_strand(store: SqlStore):
    store.admit("ses_a", "bad", "user", {"nope": 1}, create=NEW)
    store.admit("ses_a", "good", "user", {"text": "fine"})
    delivered = store.promote("ses_a", idle=True)
    assert [d.item.input_id for d in delivered] == ["good"]
    assert store.input("ses_a", "bad").status == "rejected"
    errors = store.events("ses_a", types=["session.error"])
    assert len(errors) == 1 and "bad" in errors[0].event.error  # type: ignore[union-attr]
    assert store.pending("ses_a") == []


def test_a_promotions_tail_is_written_last_only_when_nothing_is_delivered(store: SqlStore):
    # `then` (a runner's next receipt, built ahead of the step boundary) with its blobs
    store.create_session("ses_a")
    first, then = (
        [MessageAdded(message=assistant("held"))],
        [MessageAdded(message=assistant("then"))],
    )
    step = promote_step(store, "ses_a", None, first=first, then=then, then_blobs=[b"s"])
    assert (step.delivered, step.wrote) == ([], True)
    assert [m.text() for m in store.messages("ses_a")] == ["held", "then"]
    assert store.get_blob(hashlib.sha256(b"s").hexdigest()) == b"s"
    store.admit("ses_a", "bad", "user", {"nope": 1})  # rejected: no history changes
    step = promote_step(store, "ses_a", None, then=then)
    assert (step.delivered, step.wrote) == ([], True)
    assert [m.text() for m in store.messages("ses_a")][-1] == "then"
    assert [e.type for e in store.events("ses_a")][-3:] == [
        "inbox.rejected",
        "session.error",
        "message.added",
    ]
    store.admit("ses_a", "steer", "user", {"text": "steer"})
    again, unwritten = (
        MessageAdded(message=assistant("again")),
        MessageAdded(message=assistant("x")),
    )
    step = promote_step(store, "ses_a", None, first=[again], then=[unwritten])
    assert [d.item.input_id for d in step.delivered] == ["steer"] and not step.wrote
    assert [m.text() for m in store.messages("ses_a")][-2:] == ["again", "steer"]


def test_seq_is_gap_free_and_global_ids_grow(store: SqlStore):
    store.create_session("ses_a")
    store.create_session("ses_b")
    for i in range(5):
        add_message(store, "ses_a" if i % 2 else "ses_b", assistant(f"x{i}"))
    for sid in ("ses_a", "ses_b"):
        seqs = [e.seq for e in store.events(sid)]
        assert seqs == list(range(1, len(seqs) + 1))
    ids = [e.id for e in store.feed.events_since(0)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) == 7


def test_unknown_session_is_typed(store: SqlStore):
    with pytest.raises(NotFoundError):
        store.get_session("ses_nope")
    with pytest.raises(NotFoundError):
        add_message(store, "ses_nope", assistant("x"))
    with pytest.raises(NotFoundError):
        store.messages("ses_nope")
    with pytest.raises(NotFoundError):
        store.delete("ses_nope")


def test_claims_fence_every_write(store: SqlStore, clock):
    store.create_session("ses_a")
    first = store.claims.acquire("ses_a", "host:1", lease_ms=1000)
    assert first is not None and first.epoch == 1
    assert store.claims.acquire("ses_a", "host:2", lease_ms=1000) is None
    add_message(store, "ses_a", assistant("ok"), claim=fence(first))
    clock.advance(1001)
    second = store.claims.acquire("ses_a", "host:2", lease_ms=1000)
    assert second is not None and second.taken_over and second.epoch == 2 and second.attempts == 1
    with pytest.raises(ClaimLostError):
        add_message(store, "ses_a", assistant("stale"), claim=fence(first))
    with pytest.raises(ClaimLostError):
        store.claims.renew_one(first, 1000)
    assert texts(store, "ses_a") == ["ok"]
    assert store.claims.release(second)
    assert store.current_claim("ses_a") is None
    third = store.claims.acquire("ses_a", "host:3", lease_ms=1000)
    assert third is not None and not third.taken_over and third.epoch == 3


def test_dead_owner_is_taken_over_before_lease_ends(store: SqlStore):
    store.create_session("ses_a")
    store.claims.acquire("ses_a", "dead", lease_ms=60_000)
    taken = store.claims.acquire("ses_a", "me", lease_ms=1000, is_dead=lambda o: o == "dead")
    assert taken is not None and taken.taken_over


def test_log_replays_after_exclusive_seq(store: SqlStore):
    store.create_session("ses_a")
    add_message(store, "ses_a", assistant("one"))
    add_message(store, "ses_a", assistant("two"))
    assert [e.seq for e in store.log("ses_a", after=1)] == [2, 3]


def test_log_follow_emits_sync_marker_then_live_events(store: SqlStore):
    store.create_session("ses_a")
    add_message(store, "ses_a", assistant("one"))
    seen: list[object] = []
    it = store.log("ses_a", follow=True, idle_timeout_s=0.05)
    for item in it:
        seen.append(item)
        if isinstance(item, SyncMarker):
            add_message(store, "ses_a", assistant("two"))
    kinds = [("sync", s.watermark) if isinstance(s, SyncMarker) else s.seq for s in seen]
    assert kinds == [1, 2, ("sync", 2), 3]


def test_blobs_are_content_addressed_once(store: SqlStore):
    store.create_session("ses_a")
    d1 = store.put_blob(b"hello", "ses_a")
    d2 = store.put_blob(b"hello", "ses_a")
    assert d1 == d2 and store.get_blob(d1) == b"hello"
    with pytest.raises(NotFoundError):
        store.get_blob("0" * 64)


def test_fork_copies_messages_and_leaves_parent(store: SqlStore):
    store.create_session("ses_a", title="parent")
    add_message(store, "ses_a", assistant("one"))
    cut = add_message(store, "ses_a", assistant("two")).seq
    add_message(store, "ses_a", assistant("three"))
    child = store.fork("ses_a", through_seq=cut)
    assert child.forked_from == "ses_a" and child.fork_seq == cut and child.title == "parent"
    assert texts(store, child.id) == ["one", "two"]
    assert texts(store, "ses_a") == ["one", "two", "three"]
    with pytest.raises(UsageError):
        store.fork("ses_a", through_seq=999)


def test_fork_carries_the_tail_hide_point_at_its_place(store: SqlStore):
    store.create_session("ses_a")
    first = add_message(store, "ses_a", assistant("one"))
    kept = assistant("two")
    add_message(store, "ses_a", kept)
    [tail] = store.append(
        "ses_a",
        [CompactionTail(hide_before_id=kept.id, through_seq=first.seq, hidden=1, input_id="c1")],
    )
    add_message(store, "ses_a", assistant("three"))
    child = store.fork("ses_a")
    assert texts(store, child.id) == ["one", "two", "three"]
    kinds = [(e.event.type, e.seq) for e in store.events(child.id)][1:]  # after the creation
    [(_, one), (_, two), (tail_type, carried_at), (_, three)] = kinds
    assert tail_type == "compaction.tail" and one < two < carried_at < three
    [carried] = [e.event for e in store.events(child.id, types=["compaction.tail"])]
    assert isinstance(carried, CompactionTail)
    assert (carried.hide_before_id, carried.through_seq, carried.hidden) == (kept.id, one, 1)
    assert carried.input_id is None  # the parent's request, not the fork's
    before = store.fork("ses_a", through_seq=tail.seq - 1)  # forked before it: none
    assert not store.events(before.id, types=["compaction.tail"])


def test_list_newest_first_roots_only_paged(store: SqlStore, clock):
    for i in range(5):
        clock.advance(10)
        store.create_session(f"ses_{i}")
    store.create_session("ses_child", parent_id="ses_0")
    page = store.list_sessions(limit=2)
    assert [s.id for s in page.sessions] == ["ses_4", "ses_3"]
    rest = store.list_sessions(limit=10, cursor=page.next_cursor)
    assert [s.id for s in rest.sessions] == ["ses_2", "ses_1", "ses_0"] and rest.next_cursor is None
    every = store.list_sessions(roots_only=False, limit=10)
    assert "ses_child" in [s.id for s in every.sessions]
    assert store.get_session("ses_child").root_id == "ses_0"
    store.set_archived("ses_4")
    assert "ses_4" not in [s.id for s in store.list_sessions(limit=10).sessions]
    assert [s.id for s in store.list_sessions(archived=True).sessions] == ["ses_4"]
    store.set_archived("ses_4", False)
    assert store.list_sessions(limit=1).sessions[0].id == "ses_4"


def test_listing_is_exact_while_the_index_lags(store: SqlStore, clock):
    """Sessions updated in bursts, faster than the listing index follows (its `listed_ms` moves at
    most once per LIST_SLACK_MS), still list and page in exact (updated_ms, id) order, for every
    filter and page size; `latest_session` is the exact newest root. A clock going back included."""
    rng = random.Random(7)
    roots = [f"ses_r{i:02d}" for i in range(12)]
    for sid in roots:
        clock.advance(rng.randrange(0, 300))
        store.create_session(sid)
    kids = [f"ses_k{i:02d}" for i in range(6)]
    for sid in kids:
        store.create_session(sid, parent_id=rng.choice(roots))
    everyone = roots + kids
    for step in range(150):
        clock.advance(-700 if step == 75 else rng.randrange(0, 120))
        sid = rng.choice(everyone)
        action = rng.randrange(4)
        if action == 0:
            store.admit(sid, f"in_{step}", "user", {"text": str(step)})
        elif action == 1:
            add_message(store, sid, assistant(str(step)))
        elif action == 2:
            store.set_archived(sid, rng.random() < 0.5)
        else:
            store.update_session(sid, title=f"t{step}")
    with store.backend.transaction(write=False) as tx:
        marks = tx.all(f"SELECT listed_ms, {updated_ms_sql(tx.kind)} FROM sessions")
    assert all(lst <= upd < lst + LIST_SLACK_MS for lst, upd in marks)
    assert sum(lst < upd for lst, upd in marks) >= 5  # the index does lag

    rows = {sid: store.get_session(sid) for sid in everyone}
    for roots_only in (True, False):
        for archived in (None, True, False):
            want = sorted(
                (
                    r
                    for r in rows.values()
                    if (not roots_only or r.parent_id is None)
                    and (archived is None or r.archived == archived)
                ),
                key=lambda r: (r.updated_ms, r.id),
                reverse=True,
            )
            for limit in (1, 2, 3, 7, 50):
                got: list[str] = []
                cursor = None
                while True:
                    page = store.list_sessions(
                        roots_only=roots_only, archived=archived, limit=limit, cursor=cursor
                    )
                    assert len(page.sessions) <= limit
                    got += [r.id for r in page.sessions]
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                assert got == [r.id for r in want], (roots_only, archived, limit)
    live_roots = [r for r in rows.values() if r.parent_id is None and not r.archived]
    newest = max(live_roots, key=lambda r: (r.updated_ms, r.id))
    latest = store.latest_session()
    assert latest is not None and latest.id == newest.id


def test_an_update_inside_the_slack_still_moves_a_session_first(store: SqlStore, clock):
    """A is older in the listing index (its `listed_ms` has not moved) but newer by `updated_ms`:
    both the list and `latest_session` put it first."""
    store.create_session("ses_a")
    clock.advance(100)
    store.create_session("ses_b")
    clock.advance(400)
    add_message(store, "ses_a", assistant("later"))
    assert [s.id for s in store.list_sessions().sessions] == ["ses_a", "ses_b"]
    assert [s.id for s in store.list_sessions(limit=1).sessions] == ["ses_a"]
    latest = store.latest_session()
    assert latest is not None and latest.id == "ses_a"


def test_prune_preview_matches_delete(store: SqlStore, clock):
    store.create_session("ses_old")
    store.create_session("ses_kid", parent_id="ses_old")
    add_message(store, "ses_kid", assistant("x"))
    store.put_blob(b"only-old", "ses_old")
    shared = store.put_blob(b"shared", "ses_old")
    clock.advance(100_000)
    store.create_session("ses_new")
    store.put_blob(b"shared", "ses_new")
    cutoff = clock.now_ms() - 50_000
    preview = store.prune(cutoff)
    assert preview.sessions == 2 and preview.roots == 1 and preview.children == 1
    assert preview.messages == 1
    assert store.find_session("ses_old") is not None
    gone = store.prune(cutoff, "delete")
    assert gone.to_json() == preview.to_json()
    assert store.find_session("ses_old") is None and store.find_session("ses_kid") is None
    assert store.get_blob(shared) == b"shared"
    assert store.feed.events_since(0)[0].session_id == "ses_new"


def test_prune_archive_is_reversible(store: SqlStore, clock):
    store.create_session("ses_old")
    clock.advance(10_000)
    counts = store.prune(clock.now_ms() - 5_000, "archive")
    assert counts.sessions == 1 and store.get_session("ses_old").archived
    store.set_archived("ses_old", False)
    assert not store.get_session("ses_old").archived


def test_turn_and_session_update_projections(store: SqlStore, clock: FakeClock):
    store.create_session("ses_a")
    claim = store.claims.acquire("ses_a", current_owner(), 1_000)
    assert claim is not None
    store.append("ses_a", [TurnStarted(turn_id="t1"), SessionUpdated(title="new")], fence(claim))
    row = store.get_session("ses_a")
    assert row.status == "running" and row.title == "new"
    # The driver's lease lapses (a crash): the ghost `running` reads `interrupted` (spec 002),
    # in every read, and nothing is written to say so.
    clock.advance(1_001)
    seq = store.high_water("ses_a")
    assert store.get_session("ses_a").status == "interrupted"
    assert [r.status for r in store.list_sessions().sessions] == ["interrupted"]
    assert store.claims.is_live("ses_a") is False and store.high_water("ses_a") == seq
    store.claims.release(claim)
    assert store.get_session("ses_a").status == "interrupted"  # no claim at all: no driver


def test_message_events_read_back_typed(store: SqlStore):
    store.create_session("ses_a")
    add_message(store, "ses_a", assistant("typed"), turn_id="t1")
    [ev] = store.events("ses_a", types=["message.added"])
    assert isinstance(ev.event, MessageAdded) and ev.event.turn_id == "t1"


def test_fork_takes_a_chosen_id_and_unknown_sessions_have_no_events(store: SqlStore):
    store.create_session("ses_a")
    add_message(store, "ses_a", assistant("one"))
    child = store.fork("ses_a", new_id="ses_chosen")
    assert child.id == "ses_chosen" and texts(store, "ses_chosen") == ["one"]
    with pytest.raises(NotFoundError):
        store.events("ses_nope", after=5)


def test_a_prelude_is_written_just_before_a_delivery_of_messages_or_dropped(store: SqlStore):
    store.admit("ses_a", "c1", "compaction", {}, create=NEW)
    delta = InstructionsUpdated(delta={"builtin": "0" * 64})
    at = store.high_water("ses_a")
    prelude = Prelude((delta,), (b"value",), at)
    promote_idle(store, "ses_a", None, prelude=prelude)  # a control item alone: not written
    assert not store.events("ses_a", types=["instructions.updated"])
    store.admit("ses_a", "i1", "user", {"text": "hi"})
    stale = Prelude((delta,), (b"value",), at)  # planned before the session moved on
    assert promote_idle(store, "ses_a", None, prelude=stale)
    assert not store.events("ses_a", types=["instructions.updated"])
    store.admit("ses_a", "i2", "user", {"text": "again"})
    fresh = Prelude((delta,), (b"value",), store.high_water("ses_a"))
    promote_idle(store, "ses_a", None, prelude=fresh, start_turn="turn_x")
    types = [e.type for e in store.events("ses_a", after=store.high_water("ses_a") - 3)]
    assert types == ["instructions.updated", "inbox.delivered", "turn.started"]
    assert store.get_blob(hashlib.sha256(b"value").hexdigest()) == b"value"


def test_instruction_state_and_recent_events_read_together_what_separate_reads_say(
    store: SqlStore,
):
    store.create_session("ses_a")
    state = store.instruction_state("ses_a")
    assert (state.values, state.started, state.forked_from) == ({}, False, None)
    assert state.last_seq == store.high_water("ses_a")
    digest = hashlib.sha256(b"value").hexdigest()
    delta = {"AGENTS.md": digest, "builtin": digest}
    store.append("ses_a", [InstructionsUpdated(delta=delta)], blobs=[b"value"])
    usage = [UsageRecorded(input_tokens=n) for n in range(1, 4)]
    store.append("ses_a", [usage[0], SessionUpdated(title="t"), usage[1], usage[2]])
    state = store.instruction_state("ses_a")
    assert state.values == store.instruction_state("ses_a").values == delta
    assert state.started and state.last_seq == store.high_water("ses_a")
    fork = store.fork("ses_a", new_id="ses_f")
    assert store.instruction_state(fork.id).forked_from == "ses_a"
    # The usage events among the newest `window` events: the high-water read and the events
    # after it, as one statement.
    for window in (0, 1, 2, 3, 100):
        after = max(0, store.high_water("ses_a") - window)
        expected = store.events("ses_a", after=after, types=["usage.recorded"])
        assert recent_events(store, "ses_a", window, ["usage.recorded"]) == expected
    assert [e.event for e in recent_events(store, "ses_a", 3, ["usage.recorded"])] == usage[1:]
    assert recent_events(store, "ses_a", 2, ["compaction.tail"]) == []
    for read in (store.instruction_state, lambda s: recent_events(store, s, 5, ["x"])):
        with pytest.raises(NotFoundError):
            read("ses_nope")


def test_turn_opening_reads_at_once_what_the_separate_reads_say(store: SqlStore):
    """Issue 24 (recovery CPU): a turn's opening reads are one store call (one round trip on
    PostgreSQL), each part equal to the read it replaces."""
    approvals = ["approval.requested", "approval.decided"]

    def check(sid: str) -> None:
        opening = turn_opening(store, sid, approvals, 3)
        assert opening.approvals == store.events(sid, types=approvals)
        assert opening.retry == store.retry_state(sid)
        assert opening.work == store.work_state(sid)
        assert opening.tails == store.events(sid, types=["compaction.tail"])
        assert opening.compactions == store.live_compactions(sid)
        assert opening.usage == recent_events(store, sid, 3, ["usage.recorded"])

    store.create_session("ses_a")
    check("ses_a")  # nothing of any part
    summary = assistant("the summary")
    store.append(
        "ses_a",
        [
            ApprovalRequested(call_id="c1", message_id="m1", name="bash"),
            UsageRecorded(input_tokens=1),
            MessageAdded(message=summary),
            CompactionEnded(summary_message_id=summary.id, through_seq=2),
            CompactionEnded(summary_message_id="msg_not_stored", through_seq=3),  # not live
            ApprovalDecided(call_id="c1", decision="always", name="bash"),
            CompactionTail(hide_before_id=summary.id, through_seq=4),
            WorkStateUpdated(kind="goal", value="g"),
            RetryScheduled(
                turn_id="t1", step=1, attempt=2, deadline_ms=5, error_kind="x", error="e"
            ),
            UsageRecorded(input_tokens=2),
            SessionUpdated(title="t"),
        ],
    )
    check("ses_a")
    store.create_session("ses_b")
    batch = store.openings(["ses_a", "ses_nope", "ses_b"], approvals, 3)  # issue 36 item 4
    assert list(batch) == ["ses_a", "ses_b"]  # unknown ones left out
    for sid, (opening, messages) in batch.items():
        assert opening == turn_opening(store, sid, approvals, 3)
        assert messages == store.messages_with_seq(sid)
    assert len(turn_opening(store, "ses_a", approvals, 3).compactions) == 1
    assert [e.event.input_tokens for e in turn_opening(store, "ses_a", approvals, 3).usage] == [2]  # type: ignore[union-attr]
    with pytest.raises(NotFoundError):
        turn_opening(store, "ses_nope", approvals, 3)


def test_recovery_views_read_a_batch_as_the_per_session_reads_say(store: SqlStore):
    store.create_session("ses_b")
    store.create_session("ses_a")
    store.create_session("ses_c", parent_id="ses_a")
    store.append("ses_a", [InstructionsUpdated(delta={"AGENTS.md": "d" * 64})])
    mcp = ExtensionStateSet(namespace="mcp", key="srv", value=False)
    store.append("ses_c", [ExtensionStateSet(namespace="instructions", key="k", value="v"), mcp])
    for n, sid in enumerate(("ses_a", "ses_c")):
        store.append(sid, [TurnStarted(turn_id=f"t{n}"), MessageAdded(message=assistant("hi"))])
        store.append(sid, [ToolCallStarted(call_id="c1", message_id="m1", name="read")])
        store.append(sid, [SessionUpdated(title=f"s{n}"), TurnStarted(turn_id=f"u{n}")])
    types = ["session.updated", "tool.started"]
    views = store.recovery_views(["ses_c", "ses_nope", "ses_b", "ses_a"], types)
    assert list(views) == ["ses_c", "ses_b", "ses_a"]  # asked order; unknown ones left out
    for sid, view in views.items():
        assert view.messages == store.messages_with_seq(sid)
        assert view.calls == store.tool_calls(sid) and view.turns == store.turns(sid)
        assert view.events == store.events(sid, types=types)
        assert view.parent_id == store.get_session(sid).parent_id
        assert view.created == store.events(sid, limit=1)[0]
        with store.read(sid) as r:  # what the session's drive reads first (issue 36 item 4)
            # (the log's newest event id included: read once, with the batch's views)
            assert view.drive == r.drive()
        assert view.drive.newest_event == store.feed.last_event_id()
        assert view.instructions == store.instruction_state(sid)
    assert views["ses_c"].parent_id == "ses_a" and len(views["ses_a"].turns) == 2
    facts = views["ses_c"].drive.facts
    assert (facts.instructions, facts.switches) == ({"k": "v"}, {"srv": False})
    assert views["ses_a"].instructions.values == {"AGENTS.md": "d" * 64}
    assert store.recovery_views(["ses_b"])["ses_b"].events == []


def test_get_blobs_reads_several_blobs_at_once_and_refuses_a_missing_one(store: SqlStore):
    store.create_session("ses_a")
    one, two = store.put_blob(b"one", "ses_a"), store.put_blob(b"two", "ses_a")
    assert store.get_blobs([two, one, two]) == {one: b"one", two: b"two"}
    assert store.get_blobs([]) == {}
    with pytest.raises(NotFoundError):
        store.get_blobs([one, "0" * 64])


def test_summaries_count_what_a_listing_shows(store: SqlStore):
    store.create_session("ses_s", title=None)
    blocks = [{"type": "text", "text": "first\n  question"}, {"type": "text", "text": "in blocks"}]
    store.admit("ses_s", "i1", "user", {"blocks": blocks})  # type: ignore[dict-item]
    promote_idle(store, "ses_s", None, start_turn="turn_1")
    store.append("ses_s", [TurnEnded(turn_id="turn_1", outcome="completed")])
    store.append(
        "ses_s",
        [
            TurnStarted(turn_id="turn_x"),  # (a turn without an input)
            TurnEnded(turn_id="turn_x", outcome="completed"),
        ],
    )
    store.admit("ses_s", "i2", "user", {"text": "second " + "x" * 300})
    promote_idle(store, "ses_s", None, start_turn="turn_2")
    store.append("ses_s", [TurnEnded(turn_id="turn_2", outcome="completed")])
    store.admit("ses_s", "c1", "compaction", {"reason": "manual"})  # not a user message
    store.shaping.add_artifact("ses_s", "link", "https://example.com/a", "a")
    store.create_session("ses_child", parent_id="ses_s")
    store.create_session("ses_other")
    got = store.session_summaries(["ses_s", "ses_other", "ses_none"])
    s = got["ses_s"]
    assert (s.turns, s.child_sessions, s.user_messages, s.artifacts) == (3, 1, 2, 1)
    assert s.first_prompt == "first question in blocks"
    assert got["ses_other"] == got["ses_none"] == SessionSummary()
    store.shaping.revert("ses_s", input_id="i1")  # hides both inputs: nothing the user sent shows
    hidden = store.session_summaries(["ses_s"])["ses_s"]
    assert (hidden.user_messages, hidden.first_prompt) == (0, None)
    store.shaping.unrevert("ses_s")
    store.shaping.revert("ses_s", input_id="i2")
    assert store.session_summaries(["ses_s"])["ses_s"].user_messages == 1
