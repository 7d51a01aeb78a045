"""Issue 16, items 2-4: a busy, stalled or lost database never ends a worker.

Real `wakeful worker` processes share a store while another process holds SQLite's write lock
past the busy timeout, while a peer paused with SIGSTOP sits inside a PostgreSQL write
transaction (which, since store migration 11, holds no database-wide lock), and while the server ends every connection of the store
(`pg_terminate_backend`). Afterwards every worker is alive, exits 0 on SIGTERM without a
traceback, and every session passes the invariant checks of the crash tests.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.execution.helpers import (
    check_session,
    cli_env,
    create_session,
    finish,
    make_workspace,
    wait_for,
    wakeful,
    write_script,
)
from tests.pg import fresh_database
from wakeful.store import SqlStore, open_store

from .helpers import assert_clean, hold_lock, listening, terminate

pytestmark = pytest.mark.slow


def streaming_script(path: Path) -> str:
    """A text answer streamed over about 1.5 s (no tool calls: a busy store while saving a
    tool result is item 1 of the issue, not these): long enough that the lock taken after
    the first turn starts (a process of its own, slow to start on a loaded machine) is held
    when the turns end and write; over a few hundred milliseconds they often ended first."""
    reply = {"text": "the answer, streamed slowly " * 57}
    return write_script(path, [{"match": ".", "replies": [reply]}], chunk_delay_ms=15)


def settled(store: SqlStore, sids: list[str]) -> bool:
    """Whether every session has no pending input and no running turn."""
    return all(
        not store.pending(s) and all(t.status != "running" for t in store.turns(s)) for s in sids
    )


def test_sqlite_workers_wait_out_a_lock_held_past_the_busy_timeout(tmp_path: Path):
    work = make_workspace(tmp_path, lease_ms=1500)
    with (work / "wakeful.toml").open("a") as f:
        f.write("[store]\nbusy_timeout_ms = 200\n")
    db = str(tmp_path / "sessions.db")
    store = open_store(db)
    model = streaming_script(tmp_path / "script.json")
    env = cli_env(db, tmp_path)
    workers = [wakeful(["worker"], env, work) for _ in range(3)]
    try:
        time.sleep(0.5)  # the workers are up and idle, polling the store
        finish(hold_lock(db, 1.5))  # 7 busy timeouts while every worker is idle
        assert [w.poll() for w in workers] == [None] * 3
        sids = [f"ses_busy{i}" for i in range(6)]
        for sid in sids:
            create_session(store, sid, model, ["go on"], workspace=work)
        wait_for(lambda: any(store.turns(s) for s in sids), timeout=20)
        finish(hold_lock(db, 1.5))  # and again while they drive turns
        wait_for(lambda: settled(store, sids), timeout=60)
        assert [w.poll() for w in workers] == [None] * 3, "a worker died of a busy lock"
        for sid in sids:
            check_session(store, sid)
    finally:
        outputs = []
        for w in workers:
            w.send_signal(signal.SIGTERM)
            code, out, err = finish(w, timeout=30)
            outputs.append((code, err))
        store.close()
    for code, err in outputs:
        assert code == 0, err
        assert_clean(err)
    assert any("store fault" in err for _code, err in outputs)  # the lock was felt, and said


@pytest.mark.postgres
def test_a_paused_peer_in_a_postgres_write_transaction_stalls_others_only_briefly(
    tmp_path: Path,
):
    work = make_workspace(tmp_path)  # the default [store] timeouts: idle in transaction 5 s
    with fresh_database() as url:
        store = open_store(url)
        model = streaming_script(tmp_path / "script.json")
        store.create_session("ses_other", model=model, metadata={"workspace": str(work)})
        peer = hold_lock(url, 0, work)  # a write transaction, open until released
        peer.send_signal(signal.SIGSTOP)
        paused_at = time.monotonic()
        try:
            started = time.monotonic()
            run = wakeful(["run", "--session", "ses_other", "hello"], cli_env(url, tmp_path), work)
            code, _out, err = finish(run, timeout=60)
            elapsed = time.monotonic() - started
            assert code == 0, err
            assert elapsed < 30, f"the paused peer stalled another session's writer {elapsed:.1f}s"
            check_session(store, "ses_other")
            assert store.turns("ses_other")[0].status == "completed"
            # (no database-wide lock is held any more, so the run did not wait: stay paused
            # past the idle-in-transaction timeout, for the server to end the transaction)
            time.sleep(max(0.0, 6.0 - (time.monotonic() - paused_at)))
        finally:
            peer.send_signal(signal.SIGCONT)
            peer_out, _ = peer.communicate("", timeout=30)  # closing stdin lets it commit
            store.close()
    assert "error StoreUnavailableError" in peer_out  # the server ended the paused transaction


@pytest.mark.postgres
def test_a_postgres_worker_outlives_its_connections(tmp_path: Path):
    work = make_workspace(tmp_path, lease_ms=1500)
    with fresh_database() as url:
        model = streaming_script(tmp_path / "script.json")
        worker = wakeful(["worker"], cli_env(url, tmp_path), work)
        try:
            wait_for(lambda: listening(url), timeout=30)
            assert terminate(url) >= 2  # the pool and the LISTEN connection, while idle
            store = open_store(url)
            create_session(store, "ses_idle", model, ["after an idle loss"], workspace=work)
            wait_for(lambda: settled(store, ["ses_idle"]) and bool(store.turns("ses_idle")))
            wait_for(lambda: listening(url), timeout=30)  # LISTEN was reopened
            create_session(store, "ses_busy", model, ["during a turn"], workspace=work)
            wait_for(lambda: bool(store.turns("ses_busy")))
            store.close()
            terminate(url)  # in the middle of the turn
            store = open_store(url)
            create_session(store, "ses_late", model, ["after the loss"], workspace=work)
            wait_for(lambda: settled(store, ["ses_busy", "ses_late"]), timeout=60)
            assert worker.poll() is None, "the worker died of a lost connection"
            for sid in ("ses_idle", "ses_busy", "ses_late"):
                check_session(store, sid)
            assert store.turns("ses_late")[-1].status == "completed"
            store.close()
        finally:
            worker.send_signal(signal.SIGTERM)
            code, _out, err = finish(worker, timeout=30)
    assert code == 0, err
    assert_clean(err)
