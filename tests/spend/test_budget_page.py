"""The inspector's raise-budget button, in a real headless Chromium: a session its budget
paused is raised from its page (`POST /sessions/{id}/budget` with the CSRF header) and
continues to its end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import TOKEN, MakeServer, script, wait_for
from tests.server.test_inspector import ARGS, CHROMIUM, _unavailable

CALLS = [{"tool_calls": [{"name": "goal_set", "input": {"goal": f"g{i}"}}]} for i in range(6)]
RULES = [{"match": ".", "replies": [*CALLS, {"text": "done"}]}]


def test_the_page_raises_a_paused_sessions_budget(make_server: MakeServer, tmp_path: Path):
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    from playwright.sync_api import expect, sync_playwright

    served = make_server(model=script(tmp_path, RULES))
    place = tmp_path / "place"
    place.mkdir()
    (place / ".git").mkdir()
    (place / "wakeful.toml").write_text("[budgets]\nsession_tokens = 3000\n")
    c = served.client()
    r = c.post("/sessions", json={"location": str(place), "prompt": {"text": "go", "wait": True}})
    [turn] = r.json()["admission"]["turns"]
    assert turn["error"].startswith("budget:"), turn
    sid = r.json()["session"]["id"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page: Any = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(f"{served.url}/ui/login#token={TOKEN}")
            expect(page.locator("#sessions, .list-head").first).to_be_visible()
            page.goto(f"{served.url}/ui/sessions/{sid}")
            page.fill("#budget-amount", "+5eur")
            page.click("#budget-raise")
            expect(page.locator("#budget-status")).to_contain_text("error: budget amount")
            page.fill("#budget-amount", "1000000tokens")
            page.click("#budget-raise")
            expect(page.locator("#budget-status")).to_contain_text("raised, continuing: in_")
            page.screenshot(path=str(tmp_path / "budget-raised.png"), full_page=True)
        finally:
            browser.close()
    wait_for(
        lambda: c.get(f"/sessions/{sid}").json()["status"] == "idle",
        what="the continued turn to end",
    )
    assert c.get(f"/sessions/{sid}/turns").json()["turns"][-1]["outcome"] == "completed"
    assert served.runtime.store.events(sid, types=("budget.raised",))[0].event.set_tokens == 10**6
