"""PostgreSQL's NOTIFY sent after commit, from a connection of its own (docs/store.md, "LISTEN").

A transaction with pending notifies takes one cluster-wide lock at commit (PostgreSQL's
`PreCommit_Notify`: AccessExclusiveLock on object 0 of pg_database) and holds it until its commit
record is flushed. Sent inside the data-writing transactions, every append of every process would
commit one at a time. So a writer only hands its session ids to the `Notifier`, after its commit;
the notifier's thread sends them in batches (`SELECT pg_notify(...) FROM unnest(...)`), each batch
its own tiny transaction with `synchronous_commit` off: it writes no data and waits for no WAL
flush, so it holds the lock for a moment only. A notification is a hint, never the only path:
every follower also polls, so one lost with a connection only delays a wake-up.

Batches go out at most once per `GAP_S`: the first id after a quiet moment is sent at once, and
ids recorded while a batch was just sent wait for the rest of the gap and go together. A busy
worker committed ~300 times a second, and sent ~3.5 notify transactions per recovered session
(each a statement, a commit and a turn of the notify lock); now at most 1/`GAP_S` a second,
whatever the write rate, for a wake-up at most `GAP_S` later under load.

Only while someone follows (issue 36): on PostgreSQL 15 every LISTENing backend of the database
runs a transaction for every NOTIFY, on any channel, so each batch of events nobody reads cost a
commit in every worker's work listener as well as its own: the commits of a fleet grew with its
hosts. A follower's listening connection holds `FOLLOW_LOCK` (a shared advisory lock, released
with the connection) while it listens; the batch's statement announces on the events channel
only when some connection holds it, and says so. Told nobody follows, the notifier drops events
ids (admissions still go out on the work channel) and looks again with the next batch after
`RECHECK_S`, so a new follower gets its hints at most that much later; it polls meanwhile.

Interrupt requests go out whoever follows, on a channel of their own (`interrupt_channel`), each
with its request's global event id in the payload (`"<id> <session id>"`): a coordinator's
watcher LISTENs there and applies the request from the payload, with no read of the store
(`execution/_coordinator.py`); it polls only every few seconds, for a notification lost with a
process or a connection. Requests are few, so the channel costs a listening backend next to
nothing; the batch that carries one is a batch that went anyway or one of its own.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import psycopg

log = logging.getLogger("wakeful.store")

# Interrupt requests, announced whoever follows (see the module docstring).
INTERRUPT_CHANNEL = "wakeful_interrupts"
# The advisory lock (two-key form) a follower holds, shared, on its listening connection.
FOLLOW_LOCK = (0x57414B46, 1)
FOLLOW_SQL = "SELECT pg_advisory_lock_shared(%s, %s)"
# One statement per batch, its channels' notifications together (two transactions when some
# ids were given new input, before): the channel and the payload of each, in order, those on
# the events channel only when some connection holds `FOLLOW_LOCK`; its row says whether one
# did.
NOTIFY_BATCH_SQL = (
    "SELECT f.followed, (SELECT count(pg_notify(c, s))"
    " FROM unnest(%s::text[], %s::text[]) AS n(c, s) WHERE f.followed OR c <> %s)"
    " FROM (SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = %s AND objid = %s AND objsubid = 2) AS followed) AS f"
)
_RETRY_S = 0.5  # after a failed send, before reconnecting
_BATCH = 1000  # session ids per statement
# The least time between two batches' starts (see the module docstring): at most 20 notify
# transactions a second per process, whatever its sessions' write rate (issue 36 item 1: 10 ms
# made ~1.8 of a fleet worker's ~11 commits per step at 20 steps/s), for a wake-up at most 50 ms
# later. A driver's own sessions need none (their live events are in process).
GAP_S = 0.05
# How long "nobody follows" is believed: events ids are dropped meanwhile (see the module
# docstring). A follower polls every 0.5 s (`wait_for_change`), so it waits no longer for that.
RECHECK_S = 0.5


class Notifier:
    """Announces session ids on `channel` (and those given new input also on `work_channel`),
    and interrupt requests on `interrupt_channel`, from a daemon thread, started by the first
    `send`.

    `send` never blocks on the database: it records the ids (duplicates coalesce until the next
    batch goes out) and returns; while the last batch found nobody following (`FOLLOW_LOCK`),
    for `RECHECK_S`, it records only the `work` ids. `connect` opens the notifier's connection
    (autocommit, with the store's timeouts); a failed send drops it, waits `_RETRY_S` and
    reconnects, keeping the ids.
    """

    def __init__(
        self,
        channel: str,
        work_channel: str,
        connect: Callable[[], psycopg.Connection[Any]],
        *,
        interrupt_channel: str = INTERRUPT_CHANNEL,
    ) -> None:
        self._channels = (channel, work_channel, interrupt_channel)
        self._connect = connect
        self._pending: dict[str, bool] = {}  # session id -> also on the work channel (in order)
        self._interrupts: list[str] = []  # payloads for the interrupt channel (in order)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._unfollowed_until = 0.0  # (monotonic) nobody followed at the last batch: until then
        self.sent = 0  # batches sent (for tests and benchmarks)

    def send(
        self,
        session_ids: Iterable[str],
        work: Iterable[str] = (),
        interrupts: Iterable[tuple[int, str]] = (),
    ) -> None:
        """Queue `session_ids` to be announced soon, `work` (some of them) also on the work
        channel, and `interrupts` (request event id, session id) on the interrupt channel,
        whoever follows; a no-op once closed or when empty."""
        with self._cond:
            if self._closed:
                return
            admitted = set(work)
            if time.monotonic() < self._unfollowed_until:
                session_ids = [sid for sid in session_ids if sid in admitted]
            for sid in session_ids:
                self._pending[sid] = self._pending.get(sid, False) or sid in admitted
            self._interrupts += [f"{request_id} {sid}" for request_id, sid in interrupts]
            if not self._pending and not self._interrupts:
                return
            if self._thread is None or not self._thread.is_alive():  # (also after a fork)
                self._thread = threading.Thread(
                    target=self._run, name="wakeful-notify", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def close(self, timeout_s: float) -> None:
        """Send what is queued (waiting up to `timeout_s`), then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        failing = False
        last = time.monotonic() - GAP_S  # when the previous batch started
        try:
            while True:
                with self._cond:
                    while not self._pending and not self._interrupts and not self._closed:
                        self._cond.wait()
                    if not self._pending and not self._interrupts:
                        return  # closed, everything sent
                    # (closing sends at once; `send` notifies, `wait_for` keeps the deadline)
                    self._cond.wait_for(lambda: self._closed, last + GAP_S - time.monotonic())
                    last = time.monotonic()
                    batch = {sid: self._pending.pop(sid) for sid in list(self._pending)[:_BATCH]}
                    asked, self._interrupts = self._interrupts, []
                try:
                    if conn is None:
                        conn = self._connect()
                    events, work, interrupt = self._channels
                    admitted = [sid for sid, also in batch.items() if also]
                    channels = [events] * len(batch) + [work] * len(admitted)
                    channels += [interrupt] * len(asked)
                    payloads = [*batch, *admitted, *asked]
                    row = conn.execute(
                        NOTIFY_BATCH_SQL, (channels, payloads, events, *FOLLOW_LOCK)
                    ).fetchone()
                    self.sent += 1
                    failing = False
                    with self._cond:
                        followed = row is None or bool(row[0])
                        self._unfollowed_until = 0.0 if followed else last + RECHECK_S
                        if not followed:  # (those recorded meanwhile go the same way)
                            self._pending = {s: True for s, also in self._pending.items() if also}
                except psycopg.Error as err:
                    if not failing:  # (once per outage)
                        log.warning("NOTIFY failed (%s); followers poll meanwhile", err)
                    failing = True
                    _dropped(conn)
                    conn = None
                    with self._cond:
                        if self._closed:
                            return  # (a closing store does not wait for the server to return)
                        for sid, also in self._pending.items():  # (sent again, in order)
                            batch[sid] = batch.get(sid, False) or also
                        self._pending = batch
                        self._interrupts = asked + self._interrupts
                        self._cond.wait_for(lambda: self._closed, _RETRY_S)  # (sends don't end it)
        finally:
            _dropped(conn)


def _dropped(conn: psycopg.Connection[Any] | None) -> None:
    if conn is not None:
        with contextlib.suppress(psycopg.Error):
            conn.close()
