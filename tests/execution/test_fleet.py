"""Issue 24: a host of a fleet dies mid-run and the other hosts finish its sessions.

Two hosts of two `wakeful worker` processes each share one PostgreSQL (in network namespaces
of their own, with host ids of their own, where the machine allows it: bench/_fleet.py) and
drive 30 sessions whose every step is a `shell` call appending to a ledger. At a third of the
steps every process of host 0 is SIGKILLed while it holds claims. The other host takes them
over and every session ends as the crash tests require (`check_session` with the ledger:
inputs delivered once, transcripts wire-valid, no call left running, fencing epochs in order,
no side effect twice), every step of every session stored once.
"""

from __future__ import annotations

import pytest
from bench._fleet import netns_usable
from bench.bench_fleet import Workload, run_fleet

from tests.pg import ADMIN_URL, require_postgres

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def test_a_killed_host_s_sessions_finish_on_the_other_host_nothing_lost_or_run_twice() -> None:
    require_postgres()
    load = Workload(sessions=30, steps=3, latency_ms=200, lease_ms=3000, ledger=True)
    run = run_fleet(
        ADMIN_URL,
        load,
        hosts=2,
        workers=2,
        concurrency=10,  # 20 a host: neither host can take all 30 sessions alone
        netns=netns_usable(),
        kill_at=1 / 3,
        timeout=180,
    )
    assert run.orphaned > 0, "host 0 held no session when it was killed"
    # every orphaned session with work left was written to by a new owner (a session whose
    # turn had ended, its claim not yet released, is only taken over and released)
    assert run.resume_s is not None
    print(f"orphaned {run.orphaned}, with work left {run.unfinished}")
    assert run.checked == 30
    assert run.steps == 30 * 3
