"""The inspector shows the signed-in user and hides what their token may not touch, in a real
headless Chromium (issue 39 acceptance): a `read` token sees its session, the call waiting for
approval and the log (who did what), but no prompt box, interrupt, rewind, budget or approval
buttons, no "new session" form and no schedules link; an operator sees them all.
Screenshots go to tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import TOKEN, MakeServer, Served, script
from tests.server.test_inspector import browser  # noqa: F401  # the fixture

RULES = [
    {"match": "first", "replies": [{"text": "hello"}]},
    {
        "match": ".",
        "replies": [
            {"tool_calls": [{"name": "shell", "input": {"command": "echo deploy"}}]},
            {"text": "done"},
        ],
    },
]
HIDDEN_FROM_READERS = [
    "#prompt",
    "#interrupt",
    "button.rewind",
    "#budget-raise",
    "#approval-list button",
]


@pytest.fixture
def served(make_server: MakeServer, tmp_path: Path) -> Served:
    return make_server(model=script(tmp_path, RULES), permissions={})  # the defaults: ask


def _signed_in(chromium: Any, url: str, token: str) -> Any:
    page = chromium.new_context(viewport={"width": 1200, "height": 900}).new_page()
    page.goto(f"{url}/ui/login")
    page.fill("#token", token)
    page.click("#login button")
    page.wait_for_url(f"{url}/ui/")
    return page


def test_a_read_token_sees_no_button_it_may_not_use(
    browser: Any,  # noqa: F811  # the fixture imported above
    served: Served,
    tmp_path: Path,
):
    from playwright.sync_api import expect

    admin = served.client()
    made = admin.post(
        "/sessions", json={"title": "Deploy", "prompt": {"text": "first", "wait": True}}
    )
    sid = made.json()["session"]["id"]
    paused = admin.post(f"/sessions/{sid}/prompt", json={"text": "go", "wait": True})
    assert paused.json()["turns"][0]["outcome"] == "paused", paused.text
    served.store.access.set_owner(sid, "rita")
    reader = admin.post("/admin/tokens", json={"user": "rita", "scopes": ["read"]}).json()
    page = _signed_in(browser, served.url, reader["secret"])
    expect(page.locator("#who")).to_have_text("rita · read")
    expect(page.locator("#create-box")).to_be_hidden()
    expect(page.locator("nav")).not_to_contain_text("schedules")
    page.goto(f"{served.url}/ui/sessions/{sid}")
    expect(page.locator("#title")).to_have_text("Deploy")
    expect(page.locator("#approval-list .approval")).to_have_count(1)  # shown, not decidable
    expect(page.locator("#log li", has_text="inbox.enqueued by operator")).to_have_count(2)
    for selector in HIDDEN_FROM_READERS:
        found = page.locator(selector)
        assert found.count() == 0 or not any(
            found.nth(i).is_visible() for i in range(found.count())
        ), selector
    page.screenshot(path=str(tmp_path / "reader.png"), full_page=True)

    operator = _signed_in(browser, served.url, TOKEN)
    expect(operator.locator("#create-box")).to_be_visible()
    operator.goto(f"{served.url}/ui/sessions/{sid}")
    expect(operator.locator("#approval-list button").first).to_be_visible()
    expect(operator.locator("button.rewind").first).to_be_visible()
    for selector in ("#prompt", "#interrupt", "#budget-raise"):
        expect(operator.locator(selector)).to_be_visible()
    operator.screenshot(path=str(tmp_path / "operator.png"), full_page=True)
