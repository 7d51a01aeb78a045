"""The usage report over the API (`GET /usage`, the same numbers as the store's report) and
as the inspector's chart, checked in a real headless Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import TOKEN, MakeServer
from tests.server.test_inspector import ARGS, CHROMIUM, _unavailable
from tests.spend.test_usage_report import START_MS, fill, log_totals
from wakeful.clock import FakeClock
from wakeful.store import open_store

SESSIONS = 300


@pytest.fixture
def filled_db(tmp_path: Path) -> tuple[str, dict[str, float]]:
    db = str(tmp_path / "filled.db")
    clock = FakeClock(START_MS)
    store = open_store(db, clock=clock)
    try:
        ids = fill(store, clock, SESSIONS)
        return db, log_totals(store, ids)
    finally:
        store.close()


def test_the_api_reports_what_the_log_holds(
    make_server: MakeServer, filled_db: tuple[str, dict[str, float]]
) -> None:
    db, expected = filled_db
    api = make_server(db=db).client()
    for by in ("session", "agent", "model", "day", "user"):
        data = api.get("/usage", params={"by": by}).json()
        assert data["by"] == by
        assert data["total"]["requests"] == expected["requests"]
        assert data["total"]["input_tokens"] == expected["input_tokens"]
        assert data["total"]["priced_cost_usd"] == pytest.approx(expected["priced_cost_usd"])
        assert sum(g["requests"] for g in data["groups"]) == expected["requests"]
    assert len(api.get("/usage", params={"by": "session"}).json()["groups"]) == SESSIONS
    bad = api.get("/usage", params={"since": "soon"})
    assert bad.status_code == 422 and "since 'soon'" in bad.text
    assert api.get("/usage", params={"by": "planet"}).status_code == 422


def test_the_inspector_charts_usage(
    make_server: MakeServer, filled_db: tuple[str, dict[str, float]], tmp_path: Path
) -> None:
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    from playwright.sync_api import expect, sync_playwright

    served = make_server(db=filled_db[0])
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page: Any = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(f"{served.url}/ui/login#token={TOKEN}")
            expect(page.locator("#sessions, .list-head").first).to_be_visible()
            page.goto(f"{served.url}/ui/usage?by=day")
            expect(page.locator("#usage-chart g.usage-bar")).to_have_count(5)
            expect(page.locator("#usage tbody tr")).to_have_count(5)
            total = page.locator("#usage-total")
            expect(total).to_contain_text(f"{int(filled_db[1]['requests'])}")
            expect(total).to_contain_text("unknown")  # some requests had no known price
            heights = [
                float(h)
                for h in page.locator("#usage-chart rect.bar-in").evaluate_all(
                    "rs => rs.map(r => r.getBBox().height)"
                )
            ]
            assert all(h > 0 for h in heights)
            page.screenshot(path=str(tmp_path / "usage-day.png"), full_page=True)
            page.select_option("#usage-by", "model")
            page.click("#usage-filters button")
            expect(page.locator("#usage-chart g.usage-bar")).to_have_count(3)
            row = page.locator('#usage tbody tr[data-key="scripted:/x.json"]')
            expect(row).to_contain_text("unknown")
            page.goto(f"{served.url}/ui/usage?since=nonsense")
            expect(page.locator("#usage-problem")).to_contain_text("since 'nonsense'")
            page.screenshot(path=str(tmp_path / "usage-model.png"), full_page=True)
        finally:
            browser.close()
