"""A share link in a real headless Chromium, with no token and no cookie: the page's script
posts the fragment's secret, the view shows the session read-only with its styles, follows its
log, and says so when the link is revoked; the session's images show (issue 39 item 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import Served
from tests.server.test_inspector import ARGS, CHROMIUM, _unavailable
from tests.server.test_shares import REPLY, _png, _session, image_session


def test_a_link_opens_in_a_browser_and_its_revocation_shows(server: Served, tmp_path: Path):
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    from playwright.sync_api import expect, sync_playwright

    c, sid = _session(server)
    made = c.post(f"/sessions/{sid}/shares", json={"expires": "1h"}).json()
    assert server.client(token=None).get("/ui/static/app.css").status_code == 200
    assert server.client(token=None).get("/ui/static/nope.css").status_code == 401
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page: Any = browser.new_page(viewport={"width": 1100, "height": 700})
            page.goto(f"{server.url}{made['path']}")
            expect(page.get_by_text(REPLY)).to_be_visible()
            assert page.url == f"{server.url}/ui/shared" and made["secret"] not in page.url
            expect(page.locator("#conn")).to_have_text("following")
            styled = page.evaluate("getComputedStyle(document.querySelector('header.top')).display")
            assert styled == "flex"  # app.css loaded (unstyled, a header is a block)
            assert page.locator("#compose").count() == 0  # read-only: nothing to send
            page.screenshot(path=str(tmp_path / "shared.png"), full_page=True)
            assert c.delete(f"/shares/{made['share']['id']}").status_code == 200
            expect(page.locator("#conn")).to_have_text("this link was revoked or has expired")
        finally:
            browser.close()


def test_a_links_view_shows_the_sessions_images(server: Served, tmp_path: Path):
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    from playwright.sync_api import expect, sync_playwright

    c, sid, digest = image_session(server, _png(96))
    made = c.post(f"/sessions/{sid}/shares", json={"expires": "1h"}).json()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page: Any = browser.new_page(viewport={"width": 1100, "height": 700})
            page.goto(f"{server.url}{made['path']}")
            image = page.locator("figure.media img")
            expect(image).to_be_visible()
            assert image.get_attribute("src") == f"/ui/shared/media/{digest}"
            image.evaluate("i => i.decode()")  # loaded and decoded, not a broken image
            assert image.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [96, 96]
            page.screenshot(path=str(tmp_path / "shared-media.png"), full_page=True)
        finally:
            browser.close()
