"""The web inspector in a real headless Chromium (Debian's, driven by Playwright).

Open the list, search it, open a session (tool calls folded, media shown), watch a turn stream
in live, send a steer while a turn runs, interrupt one; screenshots go to the test's tmp_path.
Without Chromium or Playwright the test skips with its reason (and fails under CI=true).
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import TOKEN, MakeServer, Served, script

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
PNG = base64.b64encode(base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)).decode()  # fmt: skip
LONG = "The quick brown fox jumps over the lazy dog, again and again. " * 3


def _unavailable() -> str | None:
    if shutil.which(CHROMIUM) is None:
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    return None


@pytest.fixture
def browser(served: Served) -> Iterator[Any]:
    """Chromium, closed before the server stops (its open streams would hold the shutdown)."""
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser test cannot run under CI: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def served(make_server: MakeServer, tmp_path: Path) -> Served:
    model = script(tmp_path, [
        {"match": "notes", "replies": [
            {"tool_calls": [{"name": "read_file", "input": {"path": "notes.txt"}}]},
            {"text": "The notes say alpha."},
        ]},
        {"match": "steer", "replies": [{"text": "Steer received."}]},
        {"match": ".", "replies": [{"text": LONG}]},
    ], chunk_chars=4, chunk_delay_ms=25)  # fmt: skip
    server = make_server(model=model)
    (Path(server.runtime.workspace) / "notes.txt").write_text("alpha\n")
    return server


def test_inspector_lists_shows_streams_steers_and_interrupts(browser: Any, served: Served, tmp_path: Path):  # fmt: skip
    from playwright.sync_api import expect

    api = served.client()
    first = api.post("/sessions", json={"title": "Reading the notes", "prompt": {"text": "read the notes", "wait": True}}).json()  # fmt: skip
    sid = first["session"]["id"]
    api.post(f"/sessions/{sid}/prompt", json={"blocks": [{"type": "text", "text": "a picture"},
             {"type": "image", "media_type": "image/png", "data": PNG}], "wait": True})  # fmt: skip
    api.post("/sessions", json={"title": "Another session"})
    shots = tmp_path / "screenshots"
    shots.mkdir()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    # log in through the fragment link `wakeful serve` prints, then the list
    page.goto(f"{served.url}/ui/login#token={TOKEN}")
    expect(page.locator("#sessions")).to_be_visible()
    assert "token" not in page.url
    expect(page.locator("#sessions tbody tr")).to_have_count(2)
    page.screenshot(path=str(shots / "1-list.png"), full_page=True)
    page.fill("#search", "notes")
    page.click("#filters button")
    expect(page.locator("#sessions tbody tr")).to_have_count(1)

    # a session: transcript with the tool call folded and the image shown
    page.click(f"a[href='/ui/sessions/{sid}']")
    expect(page.locator("#conn")).to_have_text("following")
    expect(page.locator("#messages .msg")).to_have_count(6)
    call = page.locator("details.fold-tool_call").first
    expect(call).to_be_visible()
    assert call.get_attribute("open") is None
    expect(call.locator("summary")).to_have_text("→ read_file")
    assert page.locator("figure.media img").evaluate("img => img.naturalWidth") == 1
    expect(page.locator("#turns tbody tr")).to_have_count(2)
    expect(page.locator("#receipts details.receipt")).to_have_count(3)
    page.screenshot(path=str(shots / "2-session.png"), full_page=True)

    # watch a turn stream in live
    page.fill("#prompt", "tell me a story")
    page.click("#send")
    live = page.locator("#live-text")
    expect(live).not_to_be_empty(timeout=10_000)
    partial = live.inner_text()
    assert 0 < len(partial) < len(LONG.strip())
    page.screenshot(path=str(shots / "3-streaming.png"), full_page=True)

    # steer while the turn runs: it is admitted, then delivered and answered
    before = page.locator("#compose-status").inner_text()
    page.fill("#prompt", "steer: keep it short")
    page.click("#send")
    expect(page.locator("#compose-status")).not_to_have_text(before)
    expect(page.locator("#compose-status")).to_contain_text("steer admitted")
    expect(page.locator("#receipts details.receipt")).to_have_count(5, timeout=20_000)  # live
    expect(page.locator("#messages .msg.role-user").last).to_contain_text("steer: keep it short", timeout=20_000)  # fmt: skip
    expect(page.locator("#messages .msg.role-assistant").last).to_contain_text("Steer received.", timeout=20_000)  # fmt: skip
    expect(page.locator("#messages")).to_contain_text(LONG.strip()[:40])
    expect(live).to_be_hidden()
    page.screenshot(path=str(shots / "4-steered.png"), full_page=True)

    # interrupt a streaming turn from the page
    page.fill("#prompt", "another long story")
    page.click("#send")
    expect(live).not_to_be_empty(timeout=10_000)
    page.click("#interrupt")
    expect(page.locator("#turns tbody tr").last).to_contain_text("interrupted", timeout=20_000)
    page.screenshot(path=str(shots / "5-interrupted.png"), full_page=True)

    assert errors == []
    page.close()
    assert sorted(p.name for p in shots.iterdir()) == [
        "1-list.png", "2-session.png", "3-streaming.png", "4-steered.png", "5-interrupted.png",
    ]  # fmt: skip
