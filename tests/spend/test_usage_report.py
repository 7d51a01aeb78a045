"""`wakeful usage`: on a store of 1,000 sessions (children, agents, models, users, days, some
requests unpriced) every grouping's totals equal the sum of the receipts' usage read from the
log; text, JSON and CSV agree; the API answers the same; bad input is one line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.cli.conftest import Wk
from wakeful.clock import FakeClock
from wakeful.events import ReceiptRecorded, UsageRecorded
from wakeful.store import USAGE_BY, SqlStore, open_store, usage_report

SESSIONS = 1000
DAY_MS = 86_400_000
START_MS = 1_780_000_000_000  # 2026-05-28, a fixed day boundary is not assumed
MODELS = ("anthropic:claude-sonnet-4-5", "openai:gpt-4o", "scripted:/x.json")


def fill(store: SqlStore, clock: FakeClock, sessions: int = SESSIONS) -> list[str]:
    """`sessions` sessions, every 10th with a child; each request a receipt then its usage;
    every session's id."""
    ids: list[str] = []
    for i in range(sessions):
        clock.advance(START_MS + (i % 5) * DAY_MS + i - clock.now_ms())
        meta = {"user": f"u{i % 3}"} if i % 4 else None
        root = store.create_session(
            agent=("build", "plan")[i % 2], model=MODELS[i % 3], metadata=meta
        )
        targets = [root.id]
        if i % 10 == 0:
            child = store.create_session(agent="explore", parent_id=root.id, root_id=root.id)
            targets.append(child.id)
        ids += targets
        for j, sid in enumerate(targets):
            model = MODELS[(i + j) % 3]
            events = []
            for step in range(1 + i % 3):
                rid = f"rcp_{i}_{j}_{step}"
                events += [
                    ReceiptRecorded(
                        receipt_id=rid,
                        step=step + 1,
                        attempt=1,
                        model=model,
                        request_digest="0" * 64,
                    ),
                    UsageRecorded(
                        input_tokens=100 + i,
                        output_tokens=10 + step,
                        cache_read_tokens=i % 7,
                        cache_write_tokens=i % 5,
                        cost_usd=None if model.startswith("scripted") else 0.001 * (step + 1),
                        receipt_id=rid,
                    ),
                ]
            store.append(sid, events)
    return ids


def log_totals(store: SqlStore, ids: list[str]) -> dict[str, float]:
    """The usage of every `usage.recorded` event, summed from each session's log."""
    totals = {
        "requests": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "priced_cost_usd": 0.0,
        "unpriced_requests": 0,
    }
    for sid in ids:
        for e in store.events(sid, types=["usage.recorded"]):
            u = e.event
            assert isinstance(u, UsageRecorded)
            totals["requests"] += 1
            for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
                totals[k] += getattr(u, k)
            if u.cost_usd is None:
                totals["unpriced_requests"] += 1
            else:
                totals["priced_cost_usd"] += u.cost_usd
    return totals


@pytest.fixture
def filled(db_url: str) -> tuple[str, list[str]]:
    clock = FakeClock(START_MS)
    store = open_store(db_url, clock=clock)
    try:
        return db_url, fill(store, clock)
    finally:
        store.close()


def test_every_grouping_totals_the_receipts_usage(filled: tuple[str, list[str]]) -> None:
    store = open_store(filled[0])
    try:
        expected = log_totals(store, filled[1])
        assert expected["requests"] > SESSIONS and expected["unpriced_requests"] > 0
        records = store.usage_records()
        for by in USAGE_BY:
            report = usage_report(records, by)
            total = report.total.to_json()
            for key, value in expected.items():
                assert total[key] == pytest.approx(value), (by, key)
                summed = sum(g.to_json()[key] for g in report.groups)  # type: ignore[misc]
                assert summed == pytest.approx(value), (by, key)
            assert total["cost_usd"] is None  # some requests had no known price
        by_session = usage_report(records, "session")
        assert len(by_session.groups) == SESSIONS  # children counted into their root
        assert {g.key for g in usage_report(records, "agent").groups} == {
            "build",
            "plan",
            "explore",
        }
        assert {g.key for g in usage_report(records, "model").groups} == set(MODELS)
        assert {g.key for g in usage_report(records, "user").groups} == {"u0", "u1", "u2", "-"}
        assert len(usage_report(records, "day").groups) == 5
        [scripted] = [g for g in usage_report(records, "model").groups if g.key == MODELS[2]]
        assert scripted.cost_usd is None and scripted.priced_usd == 0.0
        later = store.usage_records(START_MS + 3 * DAY_MS)
        assert 0 < len(later) < len(records)
        assert all(r.at_ms >= START_MS + 3 * DAY_MS for r in later)
    finally:
        store.close()


def test_the_command_prints_text_json_and_csv_that_agree(
    filled: tuple[str, list[str]], wk: Wk
) -> None:
    store = open_store(filled[0])
    try:
        expected = log_totals(store, filled[1])
    finally:
        store.close()
    data = json.loads(wk("usage", "--by", "model", "--format", "json").stdout)
    assert data["by"] == "model" and len(data["groups"]) == 3
    assert data["total"]["input_tokens"] == expected["input_tokens"]
    assert data["total"]["priced_cost_usd"] == pytest.approx(expected["priced_cost_usd"])
    assert data["total"]["cost_usd"] is None
    rows = list(csv.DictReader(io.StringIO(wk("usage", "--by", "day", "--format", "csv").stdout)))
    assert rows[-1]["day"] == "total" and len(rows) == 6
    assert int(rows[-1]["output_tokens"]) == expected["output_tokens"]
    assert rows[-1]["cost_usd"] == ""  # unknown, not 0
    text = wk("usage", "--by", "model").stdout
    lines = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert lines[MODELS[2]].rstrip().endswith("unknown")
    assert "$" in lines[MODELS[0]] and "+ unknown" in lines["total"]
    since = json.loads(wk("usage", "--since", "2000-01-01", "--format", "json").stdout)
    assert since["total"]["requests"] == expected["requests"]
    recent = json.loads(wk("usage", "--since", "1h", "--format", "json").stdout)
    assert recent["total"]["requests"] == 0 and recent["groups"] == []


def test_bad_use_is_one_line(wk: Wk, workdir: Path) -> None:
    wk("session", "new", check=False)
    for args, words in [
        (["usage", "--since", "yesterday"], "since 'yesterday'"),
        (["usage", "--by", "planet"], "planet"),
    ]:
        done = wk(*args, check=False)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert words in done.stderr and "Traceback" not in done.stderr
