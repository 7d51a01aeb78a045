"""PostgreSQL's NOTIFY is sent outside the data-writing transactions (issue 24).

A transaction that queues a NOTIFY takes the cluster-wide notify lock at its commit and holds it
until its commit record is flushed, so notifying inside every append would serialize all of
them. The store's writes here all run on its one pooled connection; a LISTENer must still be
woken after an append and after each kind of admission (one statement; inside a transaction),
and every notification must come from another backend (the notifier's connection), never the
one that wrote the data. Before the change the notifications came from the writing connection.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from tests.pg import fresh_database
from wakeful.events import SessionCreated, SessionUpdated
from wakeful.store import SqlStore
from wakeful.store._inbox import server_admission
from wakeful.store._pgnotify import FOLLOW_LOCK, FOLLOW_SQL
from wakeful.store._postgres import CHANNEL, WORK_CHANNEL, PostgresBackend

pytestmark = pytest.mark.postgres


def _follower(url: str, *channels: str) -> psycopg.Connection[Any]:
    """A connection LISTENing on `channels` (default: the events channel) as a follower does:
    holding `FOLLOW_LOCK`, without which the notifiers announce no events."""
    conn = psycopg.connect(url, autocommit=True)
    for channel in channels or (CHANNEL,):
        conn.execute(f"LISTEN {channel}")
    conn.execute(FOLLOW_SQL, FOLLOW_LOCK)
    return conn


def _announced(listener: psycopg.Connection[Any], session_id: str) -> list[int]:
    """The pids of the notifications for `session_id` that arrive within 5 s (until the first)."""
    pids = []
    for note in listener.notifies(timeout=5.0):
        if note.payload == session_id:
            pids.append(note.pid)
            break
    return pids


def test_writes_are_announced_after_commit_from_another_connection():
    with fresh_database() as url:
        store = SqlStore(PostgresBackend(url, max_size=1))  # every write on one connection
        listener = _follower(url)
        try:
            with store.backend.transaction(write=False) as tx:
                row = tx.one("SELECT pg_backend_pid()")
            assert row is not None
            writer = int(row[0])
            # A missing session: the admission runs in a transaction that creates it.
            store.admit("ses_a", "i1", "user", {"text": "one"}, create=SessionCreated())
            after_admit_in_tx = _announced(listener, "ses_a")
            store.append("ses_a", [SessionUpdated(title="appended")])
            after_append = _announced(listener, "ses_a")
            store.admit("ses_a", "i2", "user", {"text": "two"})  # one statement
            after_admit_alone = _announced(listener, "ses_a")
        finally:
            listener.close()
            store.close()
    assert after_admit_in_tx and after_append and after_admit_alone  # each woke the listener
    assert writer not in after_admit_in_tx + after_append + after_admit_alone


def test_a_process_from_before_the_change_still_notifies_from_the_admission():
    """Mixed versions: a process started before migration 17 passes the channel to the
    admission function, which then still notifies (inside, as it did)."""
    with fresh_database() as url:
        store = SqlStore(PostgresBackend(url))
        listener = _follower(url)
        try:
            store.create_session("ses_a")
            assert _announced(listener, "ses_a")  # (by the notifier, after the commit)
            with psycopg.connect(url, autocommit=True) as old:
                args = server_admission("ses_a", "i1", "user", {"text": "x"}, "steer", 1)
                row = old.execute(
                    "SELECT o_outcome FROM wakeful_admit(0, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (CHANNEL, *args),
                ).fetchone()
                pid = old.info.backend_pid
            announced = _announced(listener, "ses_a")
        finally:
            listener.close()
            store.close()
    assert row == ("created",)
    assert announced == [pid]


def test_the_notifier_reconnects_after_losing_its_connection():
    with fresh_database() as url:
        store = SqlStore(PostgresBackend(url))
        listener = _follower(url)
        try:
            store.create_session("ses_a")
            [first] = _announced(listener, "ses_a")
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (first,))
            store.append("ses_a", [SessionUpdated(title="after the loss")])
            after_loss = _announced(listener, "ses_a")  # a new connection, half a second later
        finally:
            listener.close()
            store.close()
    assert after_loss and after_loss != [first]


def test_only_admissions_are_announced_on_the_work_channel():
    """Workers wait on the work channel: an append to another session must not wake them (it
    woke every worker of a fleet for every append), an admission must, in either form."""
    with fresh_database() as url:
        store = SqlStore(PostgresBackend(url))
        listener = psycopg.connect(url, autocommit=True)
        seen: list[str] = []
        try:
            listener.execute(f"LISTEN {WORK_CHANNEL}")
            store.create_session("ses_old")
            store.create_session("ses_busy")
            store.append("ses_busy", [SessionUpdated(title="appended")])
            store.admit("ses_new", "i1", "user", {"text": "one"}, create=SessionCreated())
            store.admit("ses_old", "i1", "user", {"text": "two"})  # one statement
            for note in listener.notifies(timeout=5.0):
                seen.append(note.payload)
                if "ses_old" in seen:
                    break
            store.feed.wait_for_work(0)  # (the store's own wait listens there too)
        finally:
            listener.close()
            store.close()
    assert seen == ["ses_new", "ses_old"]  # (in order: ses_busy's append was announced first)


def test_a_stream_of_commits_is_announced_in_a_few_batches_and_nothing_is_lost():
    """Sessions written one after another, a millisecond apart, for ~0.1 s: each is announced,
    in at most one batch per `GAP_S` (one per write before: ~100 notify transactions), and the
    first of a quiet moment at once."""
    from wakeful.store._pgnotify import GAP_S, Notifier

    with fresh_database() as url:
        listener = _follower(url)
        notifier = Notifier(CHANNEL, WORK_CHANNEL, lambda: psycopg.connect(url, autocommit=True))
        try:
            sids = [f"ses_{n:03d}" for n in range(100)]
            start = time.monotonic()
            for sid in sids:
                notifier.send([sid])
                time.sleep(0.001)
            spent = time.monotonic() - start
            seen: set[str] = set()
            for note in listener.notifies(timeout=5.0):
                seen.add(note.payload)
                if seen >= set(sids):
                    break
            batches = notifier.sent
            time.sleep(2 * GAP_S)  # quiet: the next one goes out at once
            start = time.monotonic()
            notifier.send(["ses_quiet"])
            for note in listener.notifies(timeout=5.0):
                if note.payload == "ses_quiet":
                    break
            alone = time.monotonic() - start
        finally:
            notifier.close(5.0)
            listener.close()
    assert seen >= set(sids)
    assert batches <= spent / GAP_S + 2, (batches, spent)
    assert alone < GAP_S / 2 + 0.05  # (a round trip to the server and back, no gap waited)


def test_a_batch_with_admissions_is_one_statement_on_both_channels():
    """A batch's notifications on the events channel and, for the ids given new input, on the
    work channel go in one statement (its own transaction; two before), in order."""
    from wakeful.store._pgnotify import Notifier

    statements: list[object] = []

    class Counting(psycopg.Connection[Any]):
        def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
            statements.append(query)
            return super().execute(query, params, **kw)

    with fresh_database() as url:
        listener = _follower(url)
        listener.execute(f"LISTEN {WORK_CHANNEL}")
        notifier = Notifier(CHANNEL, WORK_CHANNEL, lambda: Counting.connect(url, autocommit=True))
        seen: list[tuple[str, str]] = []
        try:
            notifier.send(["ses_a", "ses_b"], work=["ses_b"])
            for note in listener.notifies(timeout=5.0):
                seen.append((note.channel, note.payload))
                if len(seen) == 3:
                    break
        finally:
            notifier.close(5.0)
            listener.close()
    assert seen == [(CHANNEL, "ses_a"), (CHANNEL, "ses_b"), (WORK_CHANNEL, "ses_b")]
    assert len(statements) == 1


def test_events_are_announced_only_while_someone_follows():
    """On PostgreSQL 15 every LISTENing backend of the database runs a transaction for each
    NOTIFY, on any channel: batches of events nobody followed cost a commit in every worker's
    work listener (the fleet's commits grew with its hosts). Without a follower the notifier
    sends a batch at most once per `RECHECK_S` (to look again), and nothing but admissions;
    once a follower holds the lock (as the store's own listening connection does), events are
    announced again within `RECHECK_S`. Before, a batch went out every `GAP_S`, on both."""
    from wakeful.store._pgnotify import GAP_S, RECHECK_S, Notifier

    def held(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND objid = %s AND objsubid = 2 AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())",
            FOLLOW_LOCK,
        ).fetchone()
        return 0 if row is None else int(row[0])

    with fresh_database() as url:
        bystander = psycopg.connect(url, autocommit=True)  # listens, follows nothing
        bystander.execute(f"LISTEN {CHANNEL}")
        bystander.execute(f"LISTEN {WORK_CHANNEL}")
        notifier = Notifier(CHANNEL, WORK_CHANNEL, lambda: psycopg.connect(url, autocommit=True))
        store = SqlStore(PostgresBackend(url))
        try:
            start = time.monotonic()
            while time.monotonic() - start < 3 * RECHECK_S:
                notifier.send(["ses_unfollowed"])
                time.sleep(0.002)
            spent, batches = time.monotonic() - start, notifier.sent
            notifier.send(["ses_work"], work=["ses_work"])
            unfollowed = [(n.channel, n.payload) for n in bystander.notifies(timeout=1.0)]
            before = held(bystander)
            store.backend.wait_for_change(0)  # the store's follower registers
            registered = held(bystander)
            follower = _follower(url)
            start = time.monotonic()
            while time.monotonic() - start < 5.0:
                notifier.send(["ses_followed"])
                if any(n.payload == "ses_followed" for n in follower.notifies(timeout=0.01)):
                    break
            late = time.monotonic() - start
            follower.close()
        finally:
            notifier.close(5.0)
            store.close()
        deadline = time.monotonic() + 5.0  # (the server ends a closed connection's backend soon)
        while (released := held(bystander)) and time.monotonic() < deadline:
            time.sleep(0.01)
        bystander.close()
    assert batches <= spent / RECHECK_S + 2, (batches, spent)  # (~spent / GAP_S before)
    assert unfollowed == [(WORK_CHANNEL, "ses_work")]
    assert (before, registered, released) == (0, 1, 0)
    assert late < RECHECK_S + GAP_S + 0.3, late


def test_interrupt_requests_are_announced_whoever_follows():
    """A coordinator's watcher hears interrupt requests (`Feed.wait_for_interrupts`) instead of
    polling for them, so a request is announced on its own channel, with its event id, whether
    or not anyone follows events; a listener's first wait says it began listening (what was
    announced before it is read from the store). Before, nothing announced a request."""
    with fresh_database() as url:
        writer = SqlStore(PostgresBackend(url))
        watcher = SqlStore(PostgresBackend(url))
        try:
            writer.create_session("ses_a")
            first = watcher.feed.wait_for_interrupts(0)
            writer.feed.announce_interrupt("ses_a", 7)
            heard = watcher.feed.wait_for_interrupts(5.0)
            writer.feed.announce_interrupt("ses_a", 9)
            writer.feed.announce_interrupt("ses_b", 8)
            later: list[tuple[int, str]] = []
            deadline = time.monotonic() + 5.0
            while len(later) < 2 and time.monotonic() < deadline:
                fresh, requests = watcher.feed.wait_for_interrupts(1.0) or (True, [])
                assert not fresh
                later += requests
        finally:
            writer.close()
            watcher.close()
    assert first == (True, [])
    assert heard == (False, [(7, "ses_a")])
    assert later == [(9, "ses_a"), (8, "ses_b")]


def test_closing_the_store_ends_a_wait_for_interrupts_at_once():
    """A coordinator's watcher waits on its listening connection a poll interval at a time,
    in a thread: closing the store wakes that wait instead of waiting it out (`Runtime.aclose`
    took 130-210 ms longer on PostgreSQL before)."""
    import threading

    with fresh_database() as url:
        store = SqlStore(PostgresBackend(url))
        store.feed.wait_for_interrupts(0)  # (listening)
        waiter = threading.Thread(target=store.feed.wait_for_interrupts, args=(30.0,))
        waiter.start()
        time.sleep(0.2)  # (waiting)
        start = time.monotonic()
        store.close()
        closed = time.monotonic() - start
        waiter.join(5.0)
        ended = not waiter.is_alive()
    assert ended and closed < 5.0, closed
