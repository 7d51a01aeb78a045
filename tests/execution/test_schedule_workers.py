"""Schedules fired by four real `wakeful worker` processes on one store (each backend).

Two schedules fire every second for a minute: one admits its prompt to a session (missed
fires: skip), one makes a new session per fire (missed fires: fire once). Along the way one
worker is SIGKILLed and one SIGSTOPped (then continued: its stale view of a due fire must
write nothing). Then every worker stops for 10 s and four start again. Afterwards:
- every fire time before the downtime was admitted exactly once: the admitted due times are
  exactly the schedule's times up to where it stood when the workers stopped, none twice;
- after the downtime the skip schedule left out exactly the missed times (older than half its
  grace before the restart; one `skipped` fire record says how many) and the catch-up schedule
  admitted one input for them (a `caught_up` record, stamped with the first missed time), then
  both fired on time again;
- a final `worker --once` delivers every admitted input exactly once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from wakeful.store import SqlStore, open_store

from .helpers import WAKEFUL, check_session, cli_env, make_workspace, wait_for, write_script

pytestmark = pytest.mark.slow

WORKERS = 4
RUN_S = 60
DOWN_S = 10
GRACE_MS = 6_000  # longer than the SIGSTOP, so a lock the stopped worker held only delays
STOP_S = 5
TARGET = "ses_scheduletarget00000000"


def _start(args: list[str], env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([WAKEFUL, *args], cwd=cwd, env=env, stdout=out, stderr=out)


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, object]:
    done = subprocess.run(
        [WAKEFUL, *args, "--format", "json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _admitted(store: SqlStore, schedule_id: str) -> Counter[int]:
    """Due times of the schedule's admitted inputs (in any session), counted."""
    prefix = f"fire_{schedule_id}_"
    with store.backend.transaction(write=False) as tx:
        rows = tx.all("SELECT input_id FROM inbox WHERE input_id LIKE ?", (prefix + "%",))
    return Counter(int(r[0][len(prefix) :]) for r in rows)


def _next(store: SqlStore, schedule_id: str) -> int:
    found = store.schedules.get(schedule_id).next_fire_ms
    assert found is not None
    return found


def test_four_workers_fire_each_due_time_once_and_keep_the_missed_fire_policy(
    db_url: str, tmp_path: Path
):
    work = make_workspace(tmp_path, lease_ms=3_000, poll_ms=50)
    model = write_script(tmp_path / "script.json", [{"match": ".", "replies": [{"text": "noted"}]}])
    env = cli_env(db_url, tmp_path)
    store = open_store(db_url)
    store.create_session(TARGET, title="target", agent="build", model=model, location=str(work))
    logs = tmp_path / "logs"
    logs.mkdir()
    workers = [_start(["worker"], env, work, logs / f"w{i}.log") for i in range(WORKERS)]
    time.sleep(3)  # the workers are up before the first fire (else it could be late past grace)
    common = ["--every", "1s", "--grace", f"{GRACE_MS}ms"]
    skip = str(
        _cli(
            ["schedule", "add", "tick", *common, "--session", TARGET, "--missed", "skip"], env, work
        )["id"]
    )
    once = str(
        _cli(["schedule", "add", "tock", *common, "--model", model, "--missed", "once"], env, work)[
            "id"
        ]
    )
    created = {s: store.schedules.get(s).created_ms for s in (skip, once)}
    began = time.monotonic()  # the minute of fires starts now

    def at(seconds: float) -> None:
        time.sleep(max(0.0, began + seconds - time.monotonic()))

    at(12)
    workers[0].send_signal(signal.SIGKILL)
    at(20)
    workers[1].send_signal(signal.SIGSTOP)
    at(20 + STOP_S)
    workers[1].send_signal(signal.SIGCONT)
    at(RUN_S)
    stopped_ms = int(time.time() * 1000)
    _stop_all(workers)
    stood = {s: _next(store, s) for s in (skip, once)}
    first: dict[str, int] = {}
    for s in (skip, once):  # every time up to where the schedule stood: admitted, once each
        admitted = _admitted(store, s)
        assert max(admitted.values()) == 1, "a fire was admitted twice"
        first[s] = min(admitted)
        assert 900 <= first[s] - created[s] <= 1_000  # the first time: a period after adding
        assert sorted(admitted) == list(range(first[s], stood[s], 1000))
        assert stood[s] >= stopped_ms - 2_000, "the workers fell behind the schedule"
        assert len(admitted) >= RUN_S - 5

    time.sleep(DOWN_S)
    restarted_ms = int(time.time() * 1000)
    workers = [_start(["worker"], env, work, logs / f"r{i}.log") for i in range(WORKERS)]
    wait_for(lambda: min(_next(store, s) for s in (skip, once)) > restarted_ms + 5_000, timeout=60)
    _stop_all(workers)
    end = {s: _next(store, s) for s in (skip, once)}

    # skip: the times older than the grace at the restart are left out, the rest fired
    fires = {f.due_ms: f for f in store.schedules.fires(skip, 50)}
    skipped = fires[stood[skip]]
    assert skipped.outcome == "skipped" and skipped.input_id is None
    missed = skipped.missed
    assert missed >= DOWN_S - GRACE_MS // 1000 - 2
    resumed = stood[skip] + missed * 1000
    assert resumed >= restarted_ms - GRACE_MS // 2 - 1000
    admitted = _admitted(store, skip)
    assert max(admitted.values()) == 1
    assert sorted(admitted) == [
        *range(first[skip], stood[skip], 1000),
        *range(resumed, end[skip], 1000),
    ]

    # once: one input for the missed times (stamped with the first), then on time again
    fires = {f.due_ms: f for f in store.schedules.fires(once, 50)}
    caught = fires[stood[once]]
    assert caught.outcome == "caught_up" and caught.input_id is not None
    assert caught.missed >= DOWN_S - GRACE_MS // 1000 - 2
    resumed = stood[once] + caught.missed * 1000
    admitted = _admitted(store, once)
    assert max(admitted.values()) == 1
    assert sorted(admitted) == [
        *range(first[once], stood[once] + 1, 1000),
        *range(resumed, end[once], 1000),
    ]

    # a last worker delivers everything admitted, exactly once
    drain = subprocess.run(
        [WAKEFUL, "worker", "--once"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert drain.returncode == 0, drain.stderr
    check_session(store, TARGET)
    fired = [(m.metadata or {}).get("input_id") for m in store.messages(TARGET)]
    fired = [i for i in fired if str(i).startswith(f"fire_{skip}_")]  # (not a takeover's note)
    assert len(fired) == len(set(fired)) == sum(_admitted(store, skip).values())
    made = {f.session_id for f in store.schedules.fires(once, 50) if f.session_id}
    for sid in made:
        check_session(store, sid)
        ids = [(m.metadata or {}).get("input_id") for m in store.messages(sid)]
        assert len([i for i in ids if str(i).startswith(f"fire_{once}_")]) == 1
    store.close()
