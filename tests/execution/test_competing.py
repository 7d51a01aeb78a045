"""Competing drivers: several `wakeful worker` processes on one store.

Inputs are admitted concurrently by other processes into many sessions. Afterwards every input
was delivered once and in enqueue order, every session's fenced writes carry non-decreasing
claim epochs (one owner at a time; nothing written under a lost claim), and every invariant of
`check_session` holds. A driver paused with SIGSTOP past its lease loses the session to another
and, resumed, writes nothing; SIGTERM shuts a worker down cleanly and keeps its claim.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tests.pg import fresh_database
from wakeful.events import InputDelivered, InputEnqueued
from wakeful.execution._writes import start_drain
from wakeful.store import SqlStore, open_store

from .helpers import (
    SCRIPTS,
    check_session,
    cli_env,
    create_session,
    epochs,
    finish,
    make_workspace,
    wait_for,
    wakeful,
    write_script,
)

pytestmark = pytest.mark.slow

SESSIONS = 50
WORKERS = 4


@pytest.fixture
def db(db_url: str) -> str:
    """A fresh database of each backend (the suite's `db_url`)."""
    return db_url


def chatty_script(path: Path) -> str:
    """Every input gets a tool step and a short streamed answer (a few tens of ms per turn)."""
    return write_script(
        path,
        [
            {
                "match": ".",
                "replies": [
                    {"tool_calls": [{"name": "shell", "input": {"command": "true"}}]},
                    {"text": "noted, thank you for the update"},
                ],
            }
        ],
        chunk_delay_ms=2,
    )


def delivered_in_enqueue_order(store: SqlStore, sid: str) -> None:
    events = store.events(sid)
    enqueued = [e.event.input_id for e in events if isinstance(e.event, InputEnqueued)]
    delivered = [e.event.input_id for e in events if isinstance(e.event, InputDelivered)]
    steers = [i for i in enqueued if i in set(delivered)]
    queued = {  # a queued item may be overtaken by steers admitted after it (by design)
        e.event.input_id
        for e in events
        if isinstance(e.event, InputEnqueued) and e.event.delivery == "queue"
    }
    assert [i for i in delivered if i not in queued] == [i for i in steers if i not in queued]
    assert [i for i in delivered if i in queued] == [i for i in steers if i in queued]


def test_four_workers_share_one_store(db: str, tmp_path: Path):
    work = make_workspace(tmp_path, lease_ms=3_000)
    store = open_store(db)
    model = chatty_script(tmp_path / "script.json")
    sids = [f"ses_c{i:03d}" for i in range(SESSIONS)]
    for sid in sids:
        create_session(store, sid, model, [f"start {sid}"], delivery="steer", workspace=work)
    env = cli_env(db, tmp_path)
    workers = [wakeful(["worker", "--format", "json"], env, work) for _ in range(WORKERS)]
    admitters = [
        subprocess.Popen(
            [sys.executable, str(SCRIPTS / "admit.py"), db, f"a{n}", "60", str(n), *sids],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    try:
        for proc in admitters:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err

        def settled() -> bool:
            return all(not store.pending(s) for s in sids) and all(
                t.status != "running" for s in sids for t in store.turns(s)
            )

        wait_for(settled, timeout=180, every=0.2)
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        outputs = [finish(proc, timeout=60) for proc in workers]
    assert [code for code, _o, _e in outputs] == [0] * WORKERS, outputs
    stats = [json.loads(out) for _c, out, _e in outputs]
    assert sum(s["turns"] for s in stats) >= SESSIONS
    assert sum(1 for s in stats if s["turns"]) >= 2, stats  # the work was actually shared
    for sid in sids:
        check_session(store, sid)
        delivered_in_enqueue_order(store, sid)
        assert store.current_claim(sid) is None  # every drain ended cleanly and released
    store.close()


def slow_script(path: Path) -> str:
    """One long streamed answer (about 3 s), so a driver can be paused in the middle of it."""
    return write_script(
        path,
        [
            {
                "match": ".",
                "replies": [
                    {"text": "a slow and careful answer " * 12},
                ],
            }
        ],
        chunk_delay_ms=80,
        chunk_chars=4,
    )


def test_a_paused_driver_loses_its_claim_and_writes_nothing(db: str, tmp_path: Path):
    work = make_workspace(tmp_path, lease_ms=600)
    store = open_store(db)
    create_session(store, "ses_p", slow_script(tmp_path / "s.json"), ["go"], workspace=work)
    env = cli_env(db, tmp_path)
    first = wakeful(["worker", "--format", "json"], env, work)
    try:
        wait_for(lambda: bool(store.receipts("ses_p")), timeout=30)  # streaming now
        paused = store.current_claim("ses_p")
        assert paused is not None and f"/{first.pid}/" in paused.owner
        first.send_signal(signal.SIGSTOP)
        time.sleep(1.0)  # past the lease
        # The successor holds its own claim on the default lease: with the paused driver's 600 ms
        # its renewals came late on a loaded machine, its claim lapsed mid-drive and it left the
        # turn running.
        steady = tmp_path / "steady.toml"
        steady.write_text(
            (work / "wakeful.toml").read_text().replace("lease_ms = 600", "lease_ms = 30000")
        )
        successor = wakeful(["worker", "--once"], {**env, "WAKEFUL_CONFIG": str(steady)}, work)
        code, _out, err = finish(successor, timeout=60)
        assert code == 0, err
        [turn] = store.turns("ses_p")
        assert turn.status == "completed"
        taken = store.events("ses_p")[-1].seq
        first.send_signal(signal.SIGCONT)
        time.sleep(3.5)  # the paused driver's stream ends and it tries to write
        assert store.events("ses_p")[-1].seq == taken  # it wrote nothing
    finally:
        first.send_signal(signal.SIGCONT)
        first.send_signal(signal.SIGTERM)
        code, out, err = finish(first, timeout=30)
    assert code == 0, err
    assert json.loads(out)["claims_lost"] == 1  # it tried, and the fence stopped it
    check_session(store, "ses_p")
    seen = [e for _s, e in epochs(store, "ses_p") if e is not None]
    assert seen[0] == paused.epoch and seen[-1] > paused.epoch
    store.close()


def test_sigterm_keeps_the_claim_and_another_worker_takes_over(tmp_path: Path):
    db = str(tmp_path / "sessions.db")
    work = make_workspace(tmp_path, lease_ms=30_000)
    store = open_store(db)
    model = write_script(
        tmp_path / "s.json",
        [
            {
                "match": ".",
                "replies": [
                    {"tool_calls": [{"name": "shell", "input": {"command": "sleep 20"}}]},
                    {"text": "resumed and done"},
                ],
            }
        ],
    )
    create_session(store, "ses_t", model, ["go"], workspace=work)
    env = cli_env(db, tmp_path)
    worker = wakeful(["worker"], env, work)
    wait_for(lambda: bool(store.tool_calls("ses_t")), timeout=30)
    started = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    code, _out, err = finish(worker, timeout=30)
    assert code == 0, err
    assert time.monotonic() - started < 10  # the 20 s tool was cut short
    claim = store.current_claim("ses_t")
    assert claim is not None and f"/{worker.pid}/" in claim.owner  # kept for a successor
    [turn] = store.turns("ses_t")
    assert turn.status == "running"  # a shutdown is not an interruption by the user
    assert [c.status for c in store.tool_calls("ses_t")] == ["failed"]
    code, _out, err = finish(wakeful(["worker", "--once"], env, work), timeout=60)
    assert code == 0, err
    [turn] = store.turns("ses_t")
    assert turn.status == "completed"
    assert store.messages("ses_t")[-1].text() == "resumed and done"
    check_session(store, "ses_t")
    assert store.current_claim("ses_t") is None
    store.close()


def test_wakeful_interrupt_reaches_a_driver_in_another_process(db: str, tmp_path: Path):
    work = make_workspace(tmp_path)
    store = open_store(db)
    create_session(store, "ses_i", slow_script(tmp_path / "s.json"), ["go"], workspace=work)
    env = cli_env(db, tmp_path)
    driver = wakeful(["run", "--session", "ses_i"], env, work)
    wait_for(lambda: bool(store.receipts("ses_i")), timeout=30)
    code, out, err = finish(wakeful(["interrupt", "--session", "ses_i"], env, work))
    assert code == 0 and "interrupt requested" in out, err
    code, _out, err = finish(driver, timeout=30)
    assert code == 130, err  # the driver's turn ended `interrupted`
    [turn] = store.turns("ses_i")
    assert turn.status == "interrupted" and store.current_claim("ses_i") is None
    check_session(store, "ses_i")
    store.close()


@pytest.mark.postgres
def test_worker_once_waits_for_an_orphan_a_paused_writer_still_locks(tmp_path: Path):
    """A driver paused inside a transaction keeps its claim row locked after its lease ran out;
    takeovers pass over locked rows, so `worker --once` waits for the row rather than leaving
    with the orphan undone."""
    with fresh_database() as url:
        # The orphan's claim has a 300 ms lease; the worker keeps its default one (with 300 ms
        # its own claim lapsed mid-drive on a loaded machine, and the turn was left running).
        work = make_workspace(tmp_path)
        store = open_store(url)
        create_session(store, "ses_l", slow_script(tmp_path / "s.json"), ["go"], workspace=work)
        start = start_drain(store, "ses_l", "elsewhere/1/x", 300, start_turn="turn_paused")
        assert start.claim is not None
        with psycopg.connect(url) as paused:  # the paused driver, mid-transaction
            paused.execute("SELECT 1 FROM claims WHERE session_id = 'ses_l' FOR UPDATE")
            time.sleep(0.5)  # past the lease
            worker = wakeful(["worker", "--once"], cli_env(url, tmp_path), work)
            time.sleep(3.0)
            assert worker.poll() is None, "the worker left while the orphan was locked"
            paused.rollback()  # (the database ends a paused writer's transaction like this)
            code, _out, err = finish(worker, timeout=60)
        assert code == 0, err
        assert [t.status for t in store.turns("ses_l")][-1] == "completed"
        check_session(store, "ses_l")
        store.close()
