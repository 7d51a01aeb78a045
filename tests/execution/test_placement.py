"""Placement without collisions: several `wakeful worker` processes take disjoint sessions.

Each worker reserves ready sessions for its free slots in one transaction (PostgreSQL: `FOR
UPDATE SKIP LOCKED` over their rows; SQLite: one writer at a time), so no session is claimed
twice and no worker starts a drain that finds another's claim. Counted, not timed: every
session's claim was taken exactly once (its epoch is 1), and the workers' own counts show no
start that found a session busy and no reservation released unused.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from wakeful.store import open_store

from .helpers import (
    check_session,
    cli_env,
    create_session,
    finish,
    make_workspace,
    wait_for,
    wakeful,
    write_script,
)

pytestmark = pytest.mark.slow

SESSIONS = 60
WORKERS = 3


def test_workers_take_disjoint_sessions(db_url: str, tmp_path: Path):
    work = make_workspace(tmp_path)
    store = open_store(db_url)
    model = write_script(
        tmp_path / "script.json",
        [{"match": ".", "replies": [{"text": "done, briefly and at once"}]}],
        chunk_delay_ms=20,
    )
    sids = [f"ses_p{i:03d}" for i in range(SESSIONS)]
    for sid in sids:
        create_session(store, sid, model, [f"job {sid}"], workspace=work)
    env = cli_env(db_url, tmp_path)
    # 8 slots each: the first look of every worker finds more ready sessions than it can
    # take, the case where workers used to race for the same ones.
    args = ["worker", "--format", "json", "--concurrency", "8"]
    workers = [wakeful(args, env, work) for _ in range(WORKERS)]
    try:

        def settled() -> bool:
            return all(not store.pending(s) for s in sids) and not store.claims.held()

        wait_for(settled, timeout=180, every=0.2)
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        outputs = [finish(proc, timeout=60) for proc in workers]
    assert [code for code, _o, _e in outputs] == [0] * WORKERS, outputs
    stats = [json.loads(out) for _c, out, _e in outputs]
    assert sum(s["turns"] for s in stats) == SESSIONS
    assert sum(s["busy"] for s in stats) == 0, stats  # no start found another's claim
    assert sum(s["unused"] for s in stats) == 0, stats  # no reservation was in vain
    assert sum(s["reserved"] for s in stats) == SESSIONS, stats  # each one reserved once
    assert sum(1 for s in stats if s["turns"]) >= 2, stats  # the work was shared
    with store.backend.transaction(write=False) as tx:
        epochs = dict(tx.all("SELECT session_id, epoch FROM claims"))
    assert {sid: int(epochs[sid]) for sid in sids} == dict.fromkeys(sids, 1)  # claimed once
    for sid in sids:
        check_session(store, sid)
    store.close()
