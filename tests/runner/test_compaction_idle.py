"""Compaction of an idle long session before its provider cache expires (001,
`[compaction] before_cache_expiry`): found by the schedule loop, admitted once as a control
item, run by whichever driver claims the session, its summary asked with the step's request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.pg import fresh_database
from wakeful.clock import FakeClock
from wakeful.config import CompactionConfig, Config, RetryConfig
from wakeful.events import CompactionEnded, CompactionSkipped
from wakeful.execution import Runtime, run_worker
from wakeful.execution._idle import admit_idle_compactions, idle_input_id
from wakeful.providers import make_provider
from wakeful.runner import verify_receipt
from wakeful.store import open_store

BIG = {"input_tokens": 150_000}  # what the provider says each request carried
CACHED = {"match": "^Stop the work here", "replies": [{"text": "## Objective\n- idle summary"}]}
TTL, MARGIN = 300_000, 60_000


def runtime(tmp_path: Path, url: str, clock: FakeClock, window: int, **compaction: object):
    path = tmp_path / "script.json"
    rules = [CACHED, {"match": ".", "replies": [{"text": "reply", "usage": BIG}]}]
    path.write_text(
        json.dumps({"rules": rules, "context_window": window, "max_output_tokens": 8000})
    )
    config = Config(
        compaction=CompactionConfig(**{"before_cache_expiry": True, "reserved": 500, **compaction}),
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    )
    store = open_store(url, clock=clock)
    return Runtime(
        url, model=f"scripted:{path}", workspace=tmp_path, config=config, store=store
    ), config.compaction


async def idle_session(rt: Runtime) -> tuple[str, int]:
    sid = None
    for text in ["one", "two", "three"]:
        [turn] = await rt.run(text, session_id=sid)
        assert turn.outcome == "completed"
        sid = sid or rt.store.list_sessions().sessions[0].id
    assert sid is not None
    ended = rt.store.events(sid, types=["turn.ended"])[-1]
    return sid, ended.at_ms


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_an_idle_long_session_is_compacted_once_just_before_its_cache_expires(
    tmp_path: Path, backend: str
):
    with fresh_database() if backend == "postgres" else _sqlite(tmp_path) as url:
        clock = FakeClock()
        rt, config = runtime(tmp_path, url, clock, 200_000)
        sid, ended_at = await idle_session(rt)

        assert admit_idle_compactions(rt.store, config, ended_at + TTL - MARGIN - 1) == []
        assert admit_idle_compactions(rt.store, config, ended_at + TTL) == []  # expired
        assert admit_idle_compactions(rt.store, config, ended_at + TTL - MARGIN) == [sid]
        assert admit_idle_compactions(rt.store, config, ended_at + TTL - 1) == []  # once
        [item] = rt.store.pending(sid)
        assert (item.kind, item.payload) == ("compaction", {"reason": "idle"})

        await rt.resume(sid)  # the driver that claims it runs it
        [ended] = [e.event for e in rt.store.events(sid, types=["compaction.ended"])]
        assert isinstance(ended, CompactionEnded) and ended.reason == "idle"
        # The summary asked with the request the next step would send: the last step's
        # sections and history (the provider's cache), then the instruction.
        receipts = rt.store.receipts(sid)
        summary = next(r for r in receipts if r.receipt_id == ended.receipt_id)
        last_step = [r for r in receipts if r.purpose == "step"][-1]
        assert summary.purpose == "compaction"
        assert summary.message_ids[: len(last_step.message_ids)] == last_step.message_ids
        step_sections = {s for s in last_step.sections if s[0] != "params"}
        assert step_sections <= set(summary.sections)
        assert any(s[0].startswith("input.") for s in summary.sections)
        provider = make_provider(rt.model)
        assert all(verify_receipt(rt.store, sid, r, provider) for r in receipts)
        assert admit_idle_compactions(rt.store, config, ended_at + TTL - 1) == []  # settled
        await rt.aclose()


async def test_a_session_that_is_not_long_for_its_model_is_left_alone(tmp_path: Path):
    clock = FakeClock()
    # 150,000 input tokens is under half the trigger of a 400,000-token window.
    rt, config = runtime(tmp_path, str(tmp_path / "s.db"), clock, 400_000)
    sid, ended_at = await idle_session(rt)
    assert admit_idle_compactions(rt.store, config, ended_at + TTL - 30_000) == [sid]
    before = len(rt.store.receipts(sid))
    await rt.resume(sid)
    [skipped] = [e.event for e in rt.store.events(sid, types=["compaction.skipped"])]
    assert isinstance(skipped, CompactionSkipped) and skipped.why == "not-needed"
    assert len(rt.store.receipts(sid)) == before  # no model call
    assert admit_idle_compactions(rt.store, config, ended_at + TTL - 1) == []  # settled
    await rt.aclose()


async def test_off_by_default_and_under_long_request_size_nothing_is_admitted(tmp_path: Path):
    clock = FakeClock()
    rt, config = runtime(tmp_path, str(tmp_path / "s.db"), clock, 200_000)
    sid, ended_at = await idle_session(rt)
    now = ended_at + TTL - 30_000
    assert admit_idle_compactions(rt.store, CompactionConfig(), now) == []
    assert (
        admit_idle_compactions(
            rt.store, config.model_copy(update={"long_request_size": 150_001}), now
        )
        == []
    )
    assert rt.store.pending(sid) == []
    await rt.aclose()


async def test_a_worker_finds_and_drives_it(tmp_path: Path):
    clock = FakeClock()
    rt, _config = runtime(tmp_path, str(tmp_path / "s.db"), clock, 200_000)
    sid, ended_at = await idle_session(rt)
    clock.advance(ended_at + TTL - 30_000 - clock.now_ms())
    stop = asyncio.Event()
    worker = asyncio.ensure_future(run_worker(rt, stop=stop))
    try:
        for _ in range(200):
            if rt.store.events(sid, types=["compaction.ended"]):
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await worker
    [ended] = [e.event for e in rt.store.events(sid, types=["compaction.ended"])]
    assert isinstance(ended, CompactionEnded) and ended.reason == "idle"
    await rt.aclose()


class _sqlite:
    def __init__(self, tmp_path: Path) -> None:
        self.url = str(tmp_path / "s.db")

    def __enter__(self) -> str:
        return self.url

    def __exit__(self, *_exc: object) -> None:
        return None


async def test_a_turn_that_starts_first_cancels_it(tmp_path: Path):
    clock = FakeClock()
    rt, _config = runtime(tmp_path, str(tmp_path / "s.db"), clock, 200_000)
    sid, _ended_at = await idle_session(rt)
    # The race the scan cannot see: a user input admitted just before the idle compaction. The
    # compaction reaches the runner inside the turn that input started: skipped, no summary.
    rt.send("four", session_id=sid, resume=False)
    ended_seq = rt.store.events(sid, types=["turn.ended"])[-1].seq
    rt.store.admit(sid, idle_input_id(ended_seq), "compaction", {"reason": "idle"}, "queue")
    await rt.resume(sid)
    [skipped] = [e.event for e in rt.store.events(sid, types=["compaction.skipped"])]
    assert isinstance(skipped, CompactionSkipped) and skipped.why == "not-needed"
    assert not rt.store.events(sid, types=["compaction.ended"])
    await rt.aclose()


async def test_each_session_is_scanned_under_its_own_locations_settings(tmp_path: Path):
    """The scanning process's own `[compaction]` has it off; each location's configuration
    (as a drain there reads it) decides for its sessions, with its own cache lifetime."""
    clock = FakeClock()
    rt, own = runtime(tmp_path, str(tmp_path / "s.db"), clock, 200_000, before_cache_expiry=False)
    assert not own.before_cache_expiry
    tomls = {
        "on": "[compaction]\nbefore_cache_expiry = true\nreserved = 500\n",
        "hour": "[compaction]\nbefore_cache_expiry = true\nreserved = 500\ncache_ttl_s = 3600\n",
        "off": "[compaction]\nreserved = 500\n",
        "gone": "[compaction]\nbefore_cache_expiry = true\nreserved = 500\n",
    }
    sids: dict[str, str] = {}
    for name, toml in tomls.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "wakeful.toml").write_text(toml)
        sids[name] = rt.create_session(model=rt.model, location=str(tmp_path / name)).id
        for text in ["one", "two", "three"]:
            [turn] = await rt.run(text, session_id=sids[name])
            assert turn.outcome == "completed"
    (tmp_path / "gone" / "wakeful.toml").unlink()
    (tmp_path / "gone").rmdir()  # not a directory here any more: left alone, no error
    ended_at = max(rt.store.events(s, types=["turn.ended"])[-1].at_ms for s in sids.values())

    def scan(at_ms: int) -> list[str]:
        return admit_idle_compactions(rt.store, rt.compaction_at, at_ms)

    assert admit_idle_compactions(rt.store, own, ended_at + TTL - 30_000) == []  # the old way
    assert scan(ended_at + TTL - 30_000) == [sids["on"]]
    assert scan(ended_at + 3_600_000 - 30_000) == [sids["hour"]]  # its own cache lifetime
    assert rt.store.pending(sids["off"]) == [] and rt.store.pending(sids["gone"]) == []
    await rt.aclose()


async def test_the_schedule_loop_scans_with_each_locations_settings(tmp_path: Path):
    clock = FakeClock()
    rt, own = runtime(tmp_path, str(tmp_path / "s.db"), clock, 200_000, before_cache_expiry=False)
    (tmp_path / "on").mkdir()
    (tmp_path / "on" / "wakeful.toml").write_text(
        "[compaction]\nbefore_cache_expiry = true\nreserved = 500\n"
    )
    sid = rt.create_session(model=rt.model, location=str(tmp_path / "on")).id
    for text in ["one", "two", "three"]:
        [turn] = await rt.run(text, session_id=sid)
    clock.advance(
        rt.store.events(sid, types=["turn.ended"])[-1].at_ms + TTL - 30_000 - clock.now_ms()
    )
    heard: list[str] = []
    stop = asyncio.Event()
    firing = asyncio.ensure_future(rt.run_schedules(stop, on_idle=heard.append))
    try:
        for _ in range(200):  # the first scan runs at once
            if heard:
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await firing
    assert heard == [sid]
    await rt.aclose()
