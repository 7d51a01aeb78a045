"""Several real processes admit into and promote from the same sessions of one database at once.

Afterwards the store must show invariants 1 and 2 of docs/design.md and the log's shape: every
admitted input delivered exactly once, steers and queued items each in enqueue order, gap-free
per-session `seq`, unique global ids; followers in other processes saw every event once, in order.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from wakeful.errors import ConflictError, StoreBusyError
from wakeful.events import SessionCreated, StoredEvent
from wakeful.store import SqlStore, open_store
from wakeful.store._sqlite import SqliteBackend

from .proc_worker import END_TITLE, retry

WORKER = Path(__file__).with_name("proc_worker.py")
ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4
PER_WORKER = 40
SESSIONS = ["ses_c0", "ses_c1", "ses_c2"]  # ses_c0 exists up front (it is followed)

Procs = list[tuple[subprocess.Popen[bytes], Path]]


@contextmanager
def processes(folder: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], Path]]]:
    """Start helper processes (stdout and stderr to files); kill and reap any left at the end."""
    started: Procs = []

    def spawn(*args: str, stdin: bool = False) -> tuple[subprocess.Popen[bytes], Path]:
        out = folder / f"p{len(started)}.out"
        with out.open("wb") as o, (folder / f"p{len(started)}.err").open("wb") as e:
            proc = subprocess.Popen(
                [sys.executable, str(WORKER), *args],
                cwd=ROOT,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=o,
                stderr=e,
            )
        started.append((proc, out))
        return proc, out

    try:
        yield spawn
    finally:
        for proc, _out in started:
            if proc.stdin is not None and not proc.stdin.closed:
                proc.stdin.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def lines(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def stderr_of(out: Path) -> str:
    return out.with_suffix(".err").read_text()


def wait_for_line(
    proc: subprocess.Popen[bytes], out: Path, key: str, timeout_s: float = 30.0
) -> dict[str, object]:
    """Wait until the process printed a JSON line holding `key` (fail early if it died)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [item for item in lines(out) if key in item] if out.exists() else []
        if found:
            return found[0]
        if proc.poll() is not None:
            pytest.fail(f"helper exited {proc.returncode} before {key!r}: {stderr_of(out)}")
        time.sleep(0.02)
    pytest.fail(f"no {key!r} line from the helper within {timeout_s} s: {stderr_of(out)}")


def finish(proc: subprocess.Popen[bytes], out: Path, timeout_s: float = 60.0) -> None:
    assert proc.wait(timeout=timeout_s) == 0, stderr_of(out)


def all_events(store: SqlStore) -> list[StoredEvent]:
    events: list[StoredEvent] = []
    while batch := store.feed.events_since(events[-1].id if events else 0):
        events += batch
    return events


def drain(store: SqlStore) -> list[str]:
    """Promote until nothing is pending (idle boundaries deliver the queued items)."""
    delivered: list[str] = []
    for sid in SESSIONS:
        while store.pending(sid):
            delivered += [d.item.input_id for d in store.promote(sid, idle=True)]
    return delivered


@pytest.mark.slow
def test_processes_admit_promote_and_follow_the_same_sessions(db_url: str, tmp_path: Path):
    store = open_store(db_url)
    try:
        store.create_session("ses_c0", title="followed")
        with processes(tmp_path) as spawn:
            followers = [spawn("follow", db_url, "ses_c0"), spawn("follow-all", db_url)]
            for proc, out in followers:
                wait_for_line(proc, out, "sync")
            busy_args = ["--busy-ms", "20"]  # SQLite: short timeout so contention surfaces as busy
            workers = [
                spawn(
                    "admit",
                    db_url,
                    str(w),
                    ",".join(SESSIONS),
                    str(PER_WORKER),
                    *busy_args,
                    stdin=True,
                )
                for w in range(WORKERS)
            ]
            for proc, out in workers:
                wait_for_line(proc, out, "ready")
            for proc, _out in workers:  # the start gun, as close together as we can
                assert proc.stdin is not None
                proc.stdin.write(b"go\n")
                proc.stdin.close()
            for proc, out in workers:
                finish(proc, out)
            summaries = [wait_for_line(proc, out, "admitted") for proc, out in workers]
            delivered = [iid for s in summaries for iid in s["delivered"]]  # type: ignore[attr-defined]
            delivered += drain(store)
            store.update_session("ses_c0", title=END_TITLE)  # the last event of the instance
            for proc, out in followers:
                finish(proc, out)
        check_store(store, summaries, delivered)
        check_followers(store, [lines(out) for _proc, out in followers])
    finally:
        store.close()


def check_store(store: SqlStore, summaries: list[dict[str, object]], delivered: list[str]) -> None:
    admitted = [tuple(a) for s in summaries for a in s["admitted"]]  # type: ignore[attr-defined]
    assert len(admitted) == WORKERS * PER_WORKER
    # Exactly once from the callers' side: every promote call together delivered each input once.
    assert sorted(delivered) == sorted(iid for _sid, iid, _d in admitted)
    # Lazy materialization under a race: each lazy session was created by exactly one admission.
    created = Counter(sid for s in summaries for sid in s["created"])  # type: ignore[attr-defined]
    assert created == Counter({"ses_c1": 1, "ses_c2": 1})
    for sid in SESSIONS:
        mine = [(iid, d) for s, iid, d in admitted if s == sid]
        events = store.events(sid)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert store.get_session(sid).last_seq == len(events)
        assert [e.type for e in events].count("session.created") == 1
        # Exactly once in the store: status, one delivery event, one transcript message each.
        assert store.pending(sid) == []
        assert all(store.input(sid, iid).status == "delivered" for iid, _d in mine)
        deliveries = Counter(e.event.input_id for e in events if e.type == "inbox.delivered")  # type: ignore[union-attr]
        assert deliveries == Counter(iid for iid, _d in mine)
        transcript = [m.text() for m in store.messages(sid)]
        assert sorted(transcript) == sorted(iid for iid, _d in mine)
        # FIFO: steers (and, separately, queued items) reach the transcript in enqueue order,
        # so also in each process's own admission order.
        enqueued = [e.event.input_id for e in events if e.type == "inbox.enqueued"]  # type: ignore[union-attr]
        for mode in ("steer", "queue"):
            kind = {iid for iid, d in mine if d == mode}
            order = [iid for iid in transcript if iid in kind]
            assert order == [iid for iid in enqueued if iid in kind]
            for w in range(WORKERS):
                own = [iid for iid in order if iid.startswith(f"w{w}-")]
                assert own == sorted(own)
    # The instance-wide log: every event once, in its order ((tx, id) on PostgreSQL, where ids
    # may commit out of order without a database-wide lock; id order on SQLite).
    events = all_events(store)
    ids = [e.id for e in events]
    assert len(ids) == len(set(ids))
    assert [e.position for e in events] == sorted(e.position for e in events)
    assert len(ids) == sum(store.get_session(sid).last_seq for sid in SESSIONS)


def check_followers(store: SqlStore, outputs: list[list[dict[str, object]]]) -> None:
    one, every = outputs
    # The session follower: replay, one sync marker at its watermark, then live events.
    marks = [i for i, item in enumerate(one) if "sync" in item]
    assert len(marks) == 1
    seqs = [item["seq"] for item in one if "seq" in item]
    assert seqs == [e.seq for e in store.events("ses_c0")]
    assert one[marks[0]]["sync"] == seqs[marks[0] - 1] >= 1
    assert len(seqs) > marks[0] + PER_WORKER // 2  # most of it arrived live, after the marker
    # The instance-wide follower: every event of every session once, in the log's order.
    assert sum("sync" in item for item in every) == 1
    assert [item["id"] for item in every if "id" in item] == [e.id for e in all_events(store)]


def test_sqlite_lock_surfaces_as_busy_and_loses_nothing(tmp_path: Path):
    """A writer held past the busy timeout is `StoreBusyError`; a retry after it goes through."""
    path = tmp_path / "sessions.db"
    store = SqlStore(SqliteBackend(path, busy_timeout_ms=50))
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        store.admit("ses_a", "i1", "user", {"text": "one"}, create=SessionCreated())
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        with pytest.raises(StoreBusyError, match="busy"):
            store.admit("ses_a", "i2", "user", {"text": "two"})
        with pytest.raises(StoreBusyError):
            store.promote("ses_a", idle=True)
        assert [i.input_id for i in store.pending("ses_a")] == ["i1"]  # reads still work
        holder.execute("COMMIT")
        store.admit("ses_a", "i2", "user", {"text": "two"})
        assert [d.item.input_id for d in store.promote("ses_a", idle=True)] == ["i1", "i2"]
        assert [m.text() for m in store.messages("ses_a")] == ["one", "two"]
    finally:
        holder.close()
        store.close()


def test_threads_admitting_the_same_input_ids_create_each_once(db_url: str):
    """Four threads, each with its own store, race to admit the same 30 input ids into one
    session: each id is created by exactly one call and found by the other three (same content),
    a different payload under a taken id is a conflict, and the log holds each input once."""
    ids = [f"in_race_{i}" for i in range(30)]
    with closing(open_store(db_url)) as setup:
        setup.create_session("ses_race")
    results: list[list[tuple[str, bool, int]]] = []
    errors: list[BaseException] = []
    gun = threading.Barrier(4)

    def admit_all(worker: int) -> None:
        out: list[tuple[str, bool, int]] = []
        try:
            with closing(open_store(db_url)) as store:
                gun.wait()
                for iid in ids[worker:] + ids[:worker]:  # each starts at a different id
                    busy = [0]
                    a = retry(lambda: store.admit("ses_race", iid, "user", {"text": iid}), busy)  # noqa: B023
                    out.append((iid, a.created, a.item.seq))
                    with pytest.raises(ConflictError):
                        store.admit("ses_race", iid, "user", {"text": "other"})
        except BaseException as err:  # reported by the main thread
            errors.append(err)
        results.append(out)

    threads = [threading.Thread(target=admit_all, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    calls = [c for out in results for c in out]
    assert Counter(iid for iid, created, _seq in calls if created) == Counter(ids)
    seqs = {iid: {seq for i, _c, seq in calls if i == iid} for iid in ids}
    assert all(len(s) == 1 for s in seqs.values())  # every call names the one stored item
    with closing(open_store(db_url)) as store:
        log = store.events("ses_race")
        enqueued = [getattr(e.event, "input_id", None) for e in log if e.type == "inbox.enqueued"]
        assert sorted(enqueued) == sorted(ids)
        assert [e.seq for e in log] == list(range(1, len(ids) + 2))


def test_a_lone_sqlite_write_commits_without_yielding_and_a_waiting_one_is_let_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The group commit yields the CPU (`time.sleep(0)`) before its COMMIT only when another
    # write waits for the lock to join it: alone, a yield costs a time slice on a busy machine.
    import wakeful.store._sqlite as sqlite_backend

    backend = SqliteBackend(tmp_path / "s.db")
    yields: list[float] = []
    monkeypatch.setattr(sqlite_backend.time, "sleep", yields.append)

    def write(title: str) -> None:
        with backend.transaction(write=True) as tx:
            tx.run("INSERT INTO blob_refs (session_id, digest) VALUES (?, ?)", (title, "d"))

    write("alone")
    assert yields == []
    with backend._lock:  # another write arrives and waits for the lock
        other = threading.Thread(target=write, args=("waiting",))
        other.start()
        deadline = time.monotonic() + 5
        while backend._arriving == 0 and time.monotonic() < deadline:
            time.sleep(0.001)  # the real sleep (the module's is the spy)
        write("holding")
        assert yields == [0]
    other.join(5)
    assert backend._arriving == 0


def test_sqlite_temporary_storage_is_in_memory(tmp_path: Path):
    # A write's savepoint journal spilled to a file in /var/tmp (open, write, unlink) once a
    # step: the temporary store is kept in memory on the writer and the reader.
    backend = SqliteBackend(tmp_path / "s.db")
    for conn in (backend._conn, backend._reader):
        assert conn.execute("PRAGMA temp_store").fetchone() == (2,)
