"""The outcome rules of 000, each with a test: store contention inside a turn is retried with
durable backoff; a spent step allowance fails (and `steps` counts every step); an invalid
protocol, corrupt durable state and a permanent configuration error block; exhausted retries
fail; a retry wait is cut short by a steer. (Corrupt state: `test_media_refs.py`.)"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from tests.execution.helpers import check_session, write_script
from wakeful.config import Config, RetryConfig, StoreConfig
from wakeful.events import RetryScheduled
from wakeful.execution import Runtime
from wakeful.runner import LiveEvent

FAST = RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5, max_retries=2)


def runtime(db: str, tmp_path: Path, rules: list[dict[str, object]], **config: object) -> Runtime:
    model = write_script(tmp_path / "script.json", rules)
    settings = {"retry": FAST} | config
    return Runtime(db, model=model, workspace=tmp_path, config=Config(**settings))  # type: ignore[arg-type]


def retries(rt: Runtime, sid: str) -> list[RetryScheduled]:
    out = [e.event for e in rt.store.events(sid, types=["retry.scheduled"])]
    assert all(isinstance(e, RetryScheduled) for e in out)
    return out  # type: ignore[return-value]


async def test_store_contention_inside_a_turn_is_a_durable_retry(tmp_path: Path) -> None:
    """Another writer holds SQLite's lock while the reply is committed: the commit fails after
    the busy timeout (200 ms), the retry's deadline is written once the lock is gone, and the
    step is asked again. On main the turn ended `failed`."""
    db = str(tmp_path / "s.db")
    rt = runtime(
        db,
        tmp_path,
        [{"match": ".", "replies": [{"text": "an answer"}]}],
        store=StoreConfig(busy_timeout_ms=200),
    )
    peer = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    held: list[threading.Timer] = []

    def lock_once(ev: LiveEvent) -> None:
        if ev.kind == "text" and not held:  # streaming: the reply commits after it
            peer.execute("BEGIN IMMEDIATE")
            held.append(threading.Timer(0.3, lambda: peer.execute("COMMIT")))
            held[0].start()

    rt.listener = lock_once
    [turn] = await rt.run("hello")
    held[0].join()
    peer.close()
    assert turn.outcome == "completed" and turn.final_text == "an answer"
    sid = rt.store.list_sessions().sessions[0].id
    [retry] = retries(rt, sid)
    assert retry.error_kind == "StoreBusyError" and retry.attempt == 2
    assert [m.role for m in rt.store.messages(sid)] == ["user", "assistant"]  # one reply
    check_session(rt.store, sid)
    await rt.aclose()


async def test_a_spent_step_allowance_fails_and_counts_its_steps(
    db_url: str, tmp_path: Path
) -> None:
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}
    rt = runtime(
        db_url, tmp_path, [{"match": ".", "replies": [call]}], agents={"build": {"max_steps": 3}}
    )
    [turn] = await rt.run("never stops")
    assert turn.outcome == "failed" and turn.error_kind == "StepLimitError"  # main: blocked
    assert turn.steps == 3  # main: 0
    assert "3 steps" in (turn.error or "")
    sid = rt.store.list_sessions().sessions[0].id
    check_session(rt.store, sid)
    await rt.aclose()


async def test_an_invalid_protocol_blocks_without_retrying(db_url: str, tmp_path: Path) -> None:
    error = {"kind": "invalid_request", "times": 9}
    rt = runtime(db_url, tmp_path, [{"match": ".", "replies": [{"text": "x", "error": error}]}])
    [turn] = await rt.run("hi")
    assert (turn.outcome, turn.error_kind, turn.steps) == ("blocked", "invalid_request", 1)
    sid = rt.store.list_sessions().sessions[0].id
    assert retries(rt, sid) == []
    await rt.aclose()


async def test_a_permanent_configuration_error_blocks(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").mkdir()  # an instruction source that cannot be read
    rt = runtime(db_url, tmp_path, [{"match": ".", "replies": [{"text": "x"}]}])
    [turn] = await rt.run("hi")
    assert turn.outcome == "blocked" and turn.error_kind == "InstructionSourceError"
    sid = rt.store.list_sessions().sessions[0].id
    assert rt.store.receipts(sid) == []  # nothing was asked
    await rt.aclose()


async def test_exhausted_retries_fail_with_the_last_error(db_url: str, tmp_path: Path) -> None:
    error = {"kind": "rate_limit", "times": 9}
    rt = runtime(db_url, tmp_path, [{"match": ".", "replies": [{"text": "x", "error": error}]}])
    [turn] = await rt.run("hi")
    assert (turn.outcome, turn.error_kind, turn.steps) == ("failed", "rate_limit", 1)
    sid = rt.store.list_sessions().sessions[0].id
    assert [r.attempt for r in retries(rt, sid)] == [2, 3]  # max_retries = 2
    assert [r.attempt for r in rt.store.receipts(sid)] == [1, 2, 3]
    assert rt.store.retry_state(sid) is None  # the ended turn leaves no retry waiting
    check_session(rt.store, sid)
    await rt.aclose()


async def test_a_steer_cuts_a_retry_wait_short(db_url: str, tmp_path: Path) -> None:
    """The provider asks for a minute (`retry-after`); a steer admitted during the wait ends it
    at once and the step is asked again, with the steer delivered."""
    error = {"kind": "overloaded", "times": 1, "retry_after_ms": 60_000}
    rt = runtime(
        db_url,
        tmp_path,
        [
            {"match": "change of plan", "replies": [{"text": "steered"}]},
            {"match": ".", "replies": [{"text": "x", "error": error}]},
        ],
        retry=RetryConfig(initial_delay_ms=60_000, max_delay_ms=120_000, poll_interval_ms=5),
    )
    sent: list[str] = []

    def steer(ev: LiveEvent) -> None:
        if ev.kind == "retry" and not sent:
            sent.append(rt.send("change of plan", session_id=ev.session_id, resume=False).input_id)

    rt.listener = steer
    start = time.monotonic()
    [turn] = await rt.run("slow start")
    assert time.monotonic() - start < 20  # not the minute the provider asked for
    assert turn.outcome == "completed" and turn.final_text == "steered"
    sid = rt.store.list_sessions().sessions[0].id
    [retry] = retries(rt, sid)
    assert retry.deadline_ms - rt.store.clock.now_ms() > 30_000  # the deadline was a minute
    assert rt.store.pending(sid) == []
    texts = [m.text() for m in rt.store.messages(sid) if m.role == "user"]
    assert texts == ["slow start", "change of plan"]
    check_session(rt.store, sid)
    await rt.aclose()
