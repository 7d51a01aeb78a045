"""A session whose driver died reads `interrupted`, not `running`, until it is recovered
(spec 002 `demoteStaleRunningStatus`): a real driver process, killed with a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.cli.conftest import write_script
from wakeful.store import open_store

SLOW = [{"match": "slow", "replies": [{"text": "x" * 150}]}]


def wait_for(predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def listed(wk) -> dict[str, dict]:
    return {r["id"]: r for r in json.loads(wk("session", "list", "--format", "json").stdout)}


def test_a_killed_driver_leaves_the_session_interrupted_until_recovered(
    wk, spawn, workdir: Path, db_url: str
):
    model = write_script(workdir, SLOW, chunk_chars=1, chunk_delay_ms=40)
    # the store exists before `session list` polls it (read commands create none)
    open_store(db_url).close()
    proc = spawn("run", "--model", model, "a slow one")
    sid = wait_for(
        lambda: next((s for s, r in listed(wk).items() if r["status"] == "running"), None)
    )
    store = open_store(db_url)
    try:  # the driver is alive: it reads running
        assert store.get_session(sid).status == "running"
        assert store.current_claim(sid) is not None
    finally:
        store.close()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert listed(wk)[sid]["status"] == "interrupted"
    shown = json.loads(wk("session", "show", sid, "--format", "json").stdout)
    assert shown["status"] == "interrupted"
    assert shown["runs"][-1]["status"] == "aborted"
    store = open_store(db_url)
    try:  # nothing was written to say so: the claim is still the dead driver's
        assert store.current_claim(sid) is not None
        [hit] = store.search("slow").hits
        assert hit.session.status == "interrupted"
    finally:
        store.close()
    wk("worker", "--once", timeout=120)
    row = listed(wk)[sid]
    assert row["status"] == "idle"
    shown = json.loads(wk("session", "show", sid, "--format", "json").stdout)
    assert shown["runs"][-1]["outcome"] == "completed"
