"""The unit-of-work contract: `SqlStore.write` (a `SessionWrite`) and `SqlStore.read` (a
`SessionRead`), run unchanged on SQLite (a file, the in-memory store, the file-map store) and
PostgreSQL."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from tests.pg import fresh_database
from wakeful.clock import FakeClock
from wakeful.errors import ClaimLostError, NotFoundError
from wakeful.events import (
    ApprovalRequested,
    InstructionsUpdated,
    InterruptRequested,
    MessageAdded,
    MessagesHidden,
    SessionCreated,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    UsageRecorded,
)
from wakeful.messages import assistant
from wakeful.store import (
    Prelude,
    SessionRead,
    SessionWrite,
    SqlStore,
    fence,
    file_map_store,
    memory_store,
    open_store,
)

NEW = SessionCreated(title="t")


@pytest.fixture(
    params=["sqlite", "memory", "file-map", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def store(request: pytest.FixtureRequest, tmp_path, clock: FakeClock) -> Iterator[SqlStore]:
    """Each backend, the in-memory store among them."""
    if request.param == "memory":
        s = memory_store(clock=clock)
    elif request.param == "file-map":
        s = file_map_store(tmp_path / "map", clock=clock)
    elif request.param == "sqlite":
        s = open_store(str(tmp_path / "sessions.db"), clock=clock)
    else:
        with fresh_database() as url:
            s = open_store(url, clock=clock)
            yield s
            s.close()
        return
    yield s
    s.close()


def said(text: str) -> MessageAdded:
    return MessageAdded(message=assistant(text))


def texts(store: SqlStore, sid: str) -> list[str]:
    return [m.text() for m in store.messages(sid)]


def test_a_units_writes_commit_together_in_the_order_written(store: SqlStore):
    store.create_session("ses_a")
    store.admit("ses_a", "i1", "user", {"text": "hi"})
    with store.write("ses_a") as w:
        unit: SessionWrite = w  # the protocol, checked by mypy
        unit.append([said("held")], [b"blob"])
        delivered = unit.promote(idle=True, start_turn="turn_1")
        unit.append([said("after")])
        assert texts(store, "ses_a") == []  # nothing is visible before the unit ends
    assert [d.item.input_id for d in delivered] == ["i1"]
    assert texts(store, "ses_a") == ["held", "hi", "after"]
    assert store.turns("ses_a")[0].turn_id == "turn_1"
    assert store.get_blob(hashlib.sha256(b"blob").hexdigest()) == b"blob"
    assert [e.seq for e in w.stored] == list(range(w.stored[0].seq, w.stored[0].seq + 4))


def test_an_error_in_the_unit_writes_none_of_it(store: SqlStore):
    store.create_session("ses_a")
    store.create_session("ses_p")
    store.admit("ses_a", "i1", "user", {"text": "hi"})
    before = store.high_water("ses_a"), store.high_water("ses_p")
    with pytest.raises(RuntimeError), store.write("ses_a") as w:
        w.append([said("x")], [b"gone"])
        w.promote(idle=True, start_turn="turn_1")
        w.admit("rep", "user", {"text": "report"}, into="ses_p")
        w.flush()  # even written to the transaction, it rolls back
        raise RuntimeError("boom")
    assert (store.high_water("ses_a"), store.high_water("ses_p")) == before
    assert [i.input_id for i in store.pending("ses_a")] == ["i1"]
    assert store.pending("ses_p") == []
    with pytest.raises(NotFoundError):
        store.get_blob(hashlib.sha256(b"gone").hexdigest())


@pytest.mark.parametrize("read_first", [False, True])
def test_a_unit_under_a_lost_claim_writes_nothing(store: SqlStore, read_first: bool):
    """Also when the unit reads under its lock first (`read_first`): the claim is then checked
    with that lock (on PostgreSQL in its round trip, with the ids its events take)."""
    store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    old = store.claims.acquire("ses_a", "me", 1000)
    assert old is not None
    store.claims.release(old)
    new = store.claims.acquire("ses_a", "other", 1000)
    assert new is not None
    before = store.high_water("ses_a")
    with pytest.raises(ClaimLostError), store.write("ses_a", fence(old)) as w:
        if read_first:
            w.facts()
        w.append([said("stale")])
        w.promote(idle=True, start_turn="t1")
    assert store.high_water("ses_a") == before
    assert [i.input_id for i in store.pending("ses_a")] == ["i1"]
    with store.write("ses_a", fence(new)) as w:
        assert w.claim == fence(new)
        if read_first:
            w.facts()
        w.append([said("fresh")])
    assert texts(store, "ses_a") == ["fresh"]


def test_a_units_event_ids_grow_with_its_seqs(store: SqlStore):
    """However many events a unit writes after its lock (more than the ids it reserved with
    it), and with an admission to its own session between them, ids grow with seqs."""
    store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    claim = store.claims.acquire("ses_a", "me", 60_000)
    assert claim is not None
    with store.write("ses_a", fence(claim)) as w:
        w.facts()
        w.append([said(f"a{n}") for n in range(3)])
        w.promote(idle=True, start_turn="t1")
        w.append([said(f"b{n}") for n in range(20)])
        w.flush()
        w.admit("i2", "user", {"text": "again"})
        w.append([said("c")])
    events = store.events("ses_a")
    assert [e.id for e in events] == sorted(e.id for e in events)
    assert len({e.id for e in events}) == len(events)
    assert texts(store, "ses_a")[-1] == "c"


def test_a_unit_takes_the_claim_and_starts_the_turn_or_finds_it_busy(store: SqlStore):
    store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    with store.write("ses_a") as w:
        state = w.claim_state()
        assert (state.held, state.running_call, state.deliverable) == (False, False, True)
        claim = w.take_claim("me", 60_000)
        assert claim is not None and not claim.taken_over
        assert [d.item.input_id for d in w.promote(idle=True, start_turn="t1")] == ["i1"]
    assert store.current_claim("ses_a") == claim
    with store.write("ses_a") as w:
        assert w.claim_state().held
        assert w.take_claim("other", 60_000) is None  # a live driver holds it
    with store.write("ses_a", fence(claim)) as w:
        w.append([TurnEnded(turn_id="t1", outcome="completed")])
        look = w.release_and_look()
    assert look() == (True, False)
    assert store.current_claim("ses_a") is None
    taken = store.claims.acquire("ses_a", "next", 60_000)
    assert taken is not None
    with store.write("ses_a", fence(claim)) as w:
        look = w.release_and_look()
    assert look() == (False, False)  # no longer this claim's session
    assert store.current_claim("ses_a") == taken


def test_a_childs_end_and_its_report_to_the_parent_commit_together(store: SqlStore):
    store.create_session("ses_p")
    store.create_session("ses_c", parent_id="ses_p")
    claim = store.claims.acquire("ses_c", "me", 60_000)
    assert claim is not None
    with store.write("ses_c", fence(claim)) as w:
        w.append([TurnEnded(turn_id="t1", outcome="completed")])
        admitted = w.admit("rep_1", "subagent_report", {"text": "done"}, into="ses_p")
    assert admitted.created
    assert [e.type for e in store.events("ses_c")][-1] == "turn.ended"
    assert [i.input_id for i in store.pending("ses_p")] == ["rep_1"]


def test_an_admission_to_the_units_own_session_sees_what_it_wrote(store: SqlStore):
    store.create_session("ses_a")
    with store.write("ses_a") as w:
        w.append([said("one")])
        w.admit("i1", "user", {"text": "two"})
        w.append([said("three")])
        assert [d.item.input_id for d in w.promote(idle=True)] == ["i1"]
    assert texts(store, "ses_a") == ["one", "three", "two"]


def test_a_prelude_goes_before_the_delivery_only_when_planned_at_the_units_seq(store: SqlStore):
    store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    delta = InstructionsUpdated(delta={"builtin": "0" * 64})
    stale = Prelude((delta,), (), store.high_water("ses_a") - 1)
    with store.write("ses_a") as w:
        w.promote(idle=True, prelude=stale)
    assert not store.events("ses_a", types=["instructions.updated"])
    store.admit("ses_a", "i2", "user", {"text": "again"})
    fresh = Prelude((delta,), (b"v",), store.high_water("ses_a"))
    with store.write("ses_a") as w:
        w.append([said("held")])  # the prelude was planned before the unit's own writes
        w.promote(idle=True, prelude=fresh)
    types = [e.type for e in store.events("ses_a")][-3:]
    assert types == ["message.added", "instructions.updated", "inbox.delivered"]


def test_a_unit_on_an_unknown_session_raises_and_an_empty_one_writes_nothing(store: SqlStore):
    with pytest.raises(NotFoundError), store.write("ses_nope") as w:
        w.append([said("x")])
    with pytest.raises(NotFoundError), store.write("ses_nope") as w:
        w.promote(idle=True)
    store.create_session("ses_a")
    before = store.high_water("ses_a")
    with store.write("ses_a") as w:
        assert w.promote(idle=True) == []
    assert store.high_water("ses_a") == before and w.stored == []


def test_a_read_unit_reads_one_snapshot_of_what_a_driver_needs(store: SqlStore):
    store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    store.append(
        "ses_a",
        [
            said("a"),
            ApprovalRequested(call_id="c1", message_id="m1", name="bash"),
            UsageRecorded(input_tokens=1),
        ],
    )
    with store.read("ses_a") as r:
        read: SessionRead = r
        assert read.any_pending()
        assert [i.input_id for i in read.pending()] == ["i1"]
        seqs = [s for s, _ in read.messages_after(0)]
        opening = read.opening(["approval.requested"], 10)
        recent = read.recent_events(2, ["usage.recorded", "message.added"])
    assert [m.text() for _, m in store.messages_with_seq("ses_a")] == ["a"]
    assert seqs == [s for s, _ in store.messages_with_seq("ses_a")]
    assert [e.event.type for e in opening.approvals] == ["approval.requested"]
    assert [e.event.type for e in opening.usage] == ["usage.recorded"]
    assert opening.retry is None and opening.work == {}
    assert [e.event.type for e in recent] == ["usage.recorded"]  # the newest two events only
    with pytest.raises(NotFoundError), store.read("ses_nope") as r:
        r.any_pending()
    with pytest.raises(NotFoundError), store.read("ses_nope") as r:
        r.opening([], 10)


@pytest.fixture
def pg_store() -> Iterator[SqlStore]:
    with fresh_database() as url:
        store = open_store(url)
        try:
            yield store
        finally:
            store.close()


def _count_round_trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the PostgreSQL wire's Syncs (each one round trip) from now on: `len(...)`."""
    from wakeful.store._pgwire import Wire

    syncs: list[int] = []
    sync = Wire.sync

    def counted(wire: Wire) -> None:
        syncs.append(1)
        sync(wire)

    monkeypatch.setattr(Wire, "sync", counted)
    return syncs


@pytest.mark.postgres
def test_a_drains_start_reads_its_claim_state_and_facts_in_one_round_trip(
    pg_store: SqlStore, monkeypatch: pytest.MonkeyPatch
):
    """The lock, the facts, the pending items, the claim and a running call are sent together
    (four round trips before); the take of a first claim waits for no answer."""
    pg_store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    syncs = _count_round_trips(monkeypatch)
    with pg_store.write("ses_a") as w:
        state = w.claim_state()
        facts = w.facts()
        assert len(syncs) == 1
        assert (state.held, state.running_call, state.deliverable) == (False, False, True)
        claim = w.take_claim("me", 60_000)
        assert claim is not None
        assert len(syncs) == 1
    with pg_store.read("ses_a") as r:
        assert r.facts() == facts
    assert pg_store.current_claim("ses_a") == claim


@pytest.mark.postgres
def test_a_units_last_reads_are_answered_with_its_commit(
    pg_store: SqlStore, monkeypatch: pytest.MonkeyPatch
):
    """A release with its look at the inbox, a transcript read and an opening read last in a
    unit cost no round trip of their own: the append's and the commit's are the unit's two."""
    pg_store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    claim = pg_store.claims.acquire("ses_a", "me", 60_000)
    assert claim is not None
    syncs = _count_round_trips(monkeypatch)
    with pg_store.write("ses_a", fence(claim)) as w:
        w.append([said("one")])
        history = w.messages_after(0)
        opening = w.opening(["approval.requested"], 10)
        look = w.release_and_look()
    assert len(syncs) == 2
    assert look() == (True, True)
    assert [m.text() for _, m in history()] == ["one"]
    opened = opening()
    assert opened is not None and opened.history is not None
    assert [m.text() for _, m in opened.history] == ["one"]
    assert len(syncs) == 2
    assert pg_store.current_claim("ses_a") is None


def test_a_units_last_reads_are_read_once_it_ended(store: SqlStore):
    """The same reads on every backend: what the unit left, its own writes included; a
    session with a compaction has its opening read after the unit (None here)."""
    store.create_session("ses_a")
    start = store.high_water("ses_a")
    with store.write("ses_a") as w:
        w.append([said("one"), said("two")])
        history = w.messages_after(start + 1)  # (after "one")
        opening = w.opening(["approval.requested"], 10)
    assert [m.text() for _, m in history()] == ["two"]
    opened = opening()
    assert opened is not None and [m.text() for _, m in opened.history or []] == ["one", "two"]


def _sent_statements(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements sent to PostgreSQL from now on (empty on SQLite: nothing is counted)."""
    sent: list[str] = []
    if store.backend.kind == "postgres":
        from wakeful.store._pgwire import Wire

        send = Wire.send

        def counted(wire: Wire, sql: str, params: object = ()) -> object:
            sent.append(sql)
            return send(wire, sql, params)  # type: ignore[arg-type]

        monkeypatch.setattr(Wire, "send", counted)
    return sent


def test_a_units_transcript_read_derives_a_delivered_input_from_one_statement(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
):
    """A unit's last transcript read finds a delivered input's message (derived from its
    enqueued event) with the rows that name it: on PostgreSQL the read is one statement (the
    rows and the enqueued events were two)."""
    store.admit("ses_a", "i1", "user", {"text": "hi"}, create=NEW)
    start = store.high_water("ses_a")
    sent = _sent_statements(store, monkeypatch)
    with store.write("ses_a") as w:
        w.promote(idle=True)
        w.append([said("one")])
        w.flush()
        before = len(sent)
        history = w.messages_after(start)
        assert len(sent) - before == (1 if store.backend.kind == "postgres" else 0)
    assert [(m.role, m.text()) for _, m in history()] == [("user", "hi"), ("assistant", "one")]


def test_an_appends_changes_to_its_sessions_row_are_one_update(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
):
    """A turn's start, its usage and its end change the session's status and counters with
    the append's own update of the row (on PostgreSQL one `UPDATE sessions`, four before); the
    status is the last event's, the counters the sum."""
    store.create_session("ses_a")
    sent = _sent_statements(store, monkeypatch)
    store.append(
        "ses_a",
        [
            TurnStarted(turn_id="t1"),
            UsageRecorded(input_tokens=10, output_tokens=2, cost_usd=0.5),
            UsageRecorded(input_tokens=5, output_tokens=1, cache_read_tokens=3),
            TurnEnded(turn_id="t1", outcome="completed"),
        ],
    )
    if store.backend.kind == "postgres":
        assert sum(sql.startswith("UPDATE sessions") for sql in sent) == 1, sent
    row = store.get_session("ses_a")
    assert (row.status, row.input_tokens, row.output_tokens) == ("idle", 15, 3)
    assert (row.cost_usd, row.cache_read_tokens) == (0.5, 3)
    store.append("ses_a", [TurnStarted(turn_id="t2"), TurnEnded(turn_id="t2", outcome="failed")])
    assert store.get_session("ses_a").status == "failed"


def test_an_appends_transcript_and_tool_rows_are_a_statement_per_table(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
):
    """A step's reply, its tool call started and ended, and its result add their transcript
    rows, index entries and tool call row with one statement per table on PostgreSQL (a
    statement per row before, and an update for the call's end); an event that changes those
    rows (a hide) goes after the rows the append gathered before it; a call that ended in a
    later append is updated."""
    store.create_session("ses_a")
    reply, result, gone = assistant("calling"), assistant("result"), assistant("gone")
    sent = _sent_statements(store, monkeypatch)
    store.append(
        "ses_a",
        [
            MessageAdded(message=reply),
            ToolCallStarted(call_id="c1", message_id=reply.id, name="goal_set"),
            ToolCallEnded(call_id="c1", message_id=reply.id, status="completed"),
            ToolCallStarted(call_id="c2", message_id=reply.id, name="goal_set"),
            MessageAdded(message=result),
            MessageAdded(message=gone),
            MessagesHidden(message_ids=(gone.id,)),
        ],
    )
    if store.backend.kind == "postgres":
        for table in ("message_log", "search_docs", "tool_calls"):
            assert sum(f"INSERT INTO {table}" in sql for sql in sent) == 1, (table, sent)
        assert not any(sql.startswith("UPDATE tool_calls") for sql in sent), sent
    assert texts(store, "ses_a") == ["calling", "result"]
    calls = {c.call_id: c.status for c in store.tool_calls("ses_a")}
    assert calls == {"c1": "completed", "c2": "running"}
    store.append("ses_a", [ToolCallEnded(call_id="c2", message_id=reply.id, status="failed")])
    assert {c.call_id: c.status for c in store.tool_calls("ses_a")}["c2"] == "failed"
    if store.search_enabled:
        assert [h.seq for h in store.search("result").hits] == [6]
        assert store.search("gone").hits == []


def test_interrupts_after_reads_the_requests_and_the_newest_id_together(store: SqlStore):
    """One statement: the requests after a poll's id, up to the log's newest, and that id."""
    store.create_session("ses_a")
    store.create_session("ses_b")
    start = store.feed.last_event_id()
    assert store.feed.interrupts_after(start) == (start, [])
    store.append("ses_b", [InterruptRequested()])
    store.append("ses_a", [said("after")])
    top = store.feed.last_event_id()
    found = store.feed.interrupts_after(start)
    assert found[0] == top and [sid for _, sid in found[1]] == ["ses_b"]
    assert found[1][0][0] > start
    assert store.feed.interrupts_after(top) == (top, [])
