"""The inspector fits the window, in a real headless Chromium (issue 38, item 9).

At 1400 x 1000 and at 420 x 900 no page scrolls sideways (`scrollWidth <= innerWidth`): the
list, a search, a session with tool calls, receipts, a failed turn and a reverted one, the
schedules and the usage report. On the session page the turns table fits its column (rewind
buttons inside it, one line per header, a failed turn's error on a row of its own), transcript
cards stay inside the window, receipts name their turn, a reverted turn is marked, the Log box
shows the log of an idle session, Artifacts refresh after an approval given on the page, and a
login returns to the page that was asked for. Screenshots go to `screenshots/` in tmp_path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import TOKEN, MakeServer, Served, script
from tests.server.test_inspector import browser

SIZES = {"wide": (1400, 1000), "narrow": (420, 900)}
UNBROKEN = "https://example.com/" + "a-very-long-path-segment-" * 12  # no place to wrap


@pytest.fixture
def served(make_server: MakeServer, tmp_path: Path) -> Served:
    model = script(
        tmp_path,
        [
            {
                "match": "notes",
                "replies": [
                    {
                        "tool_calls": [
                            {
                                "name": "read_file",
                                "input": {
                                    "path": "notes/" + "deeply-nested-folder/" * 6 + "notes.txt"
                                },
                            }
                        ]
                    },
                    {
                        "text": f"The notes point at {UNBROKEN} and say alpha.",
                        "usage": {"input_tokens": 123456, "output_tokens": 7890},
                    },
                ],
            },
            {"match": "fail", "replies": [{"error": {"kind": "invalid_request", "times": 9}}]},
            {"match": "hello", "replies": [{"text": "Hello."}]},
            {
                "match": "report",
                "replies": [
                    {
                        "tool_calls": [
                            {
                                "name": "write_file",
                                "input": {"path": "report.txt", "content": "all good\n"},
                            }
                        ]
                    },
                    {"text": "Wrote the report."},
                ],
            },
        ],
    )
    server = make_server(model=model, permissions={})  # the defaults: writes ask
    notes = Path(server.runtime.workspace, "notes", *["deeply-nested-folder"] * 6)
    notes.mkdir(parents=True)
    (notes / "notes.txt").write_text("alpha\n")
    return server


def _session(api: httpx.Client) -> str:
    """Four turns: a tool call, a blocked one (an error), a rewound hello, a write waiting for approval."""
    made = api.post(
        "/sessions",
        json={
            "title": "Layout " + "with a rather long title " * 4,
            "prompt": {"text": "read the notes", "wait": True},
        },
    )
    sid: str = made.json()["session"]["id"]
    failed = api.post(f"/sessions/{sid}/prompt", json={"text": "fail now", "wait": True}).json()
    assert failed["turns"][0]["outcome"] == "blocked" and failed["turns"][0]["error"], failed
    api.post(f"/sessions/{sid}/prompt", json={"text": "hello", "wait": True})
    turns = api.get(f"/sessions/{sid}/turns").json()["turns"]
    assert api.post(f"/sessions/{sid}/rewind", json={"turn_id": turns[2]["id"]}).status_code == 200
    api.post(f"/sessions/{sid}/prompt", json={"text": "write the report", "wait": True})
    assert api.get(f"/sessions/{sid}").json()["status"] == "awaiting_approval"
    return sid


def _no_sideways_scroll(page: Any, where: str) -> None:
    width, inner = page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    assert width <= inner, f"{where}: the page is {width}px wide in a {inner}px window"


def _turns_fit(page: Any, where: str) -> None:
    box = page.locator("#turns").evaluate(
        "t => { const b = t.parentElement.getBoundingClientRect();"
        " return {scroll: t.parentElement.scrollWidth, client: t.parentElement.clientWidth,"
        " right: b.right, heads: [...t.querySelectorAll('th')].filter(h => h.offsetParent && h.textContent)"
        ".map(h => { const r = document.createRange(); r.selectNodeContents(h); return r.getClientRects().length; }),"
        " buttons: [...t.querySelectorAll('button.rewind')].map(b => b.getBoundingClientRect().right),"
        " figures: [...t.querySelectorAll('td.num')].filter(c => c.offsetParent).map(c => {"
        " const r = document.createRange(); r.selectNodeContents(c); return r.getClientRects().length; }),"
        " error: (() => { const e = t.querySelector('tr.turn-error .error');"
        " const r = e.getBoundingClientRect(); return [r.width, r.height]; })() }; }"
    )
    assert box["scroll"] <= box["client"], f"{where}: the turns table overflows its box: {box}"
    assert all(right <= box["right"] + 0.5 for right in box["buttons"]), f"{where}: {box}"
    assert box["heads"] and set(box["heads"]) == {1}, f"{where}: a header wraps: {box}"
    if "wide" in where:  # figures on one line where there is room
        assert box["figures"] and set(box["figures"]) == {1}, f"{where}: figures wrap: {box}"
    width, height = box["error"]
    assert width > 150 and height < 60, f"{where}: the error is squeezed: {box['error']}"


def _cards_fit(page: Any, where: str) -> None:
    worst = page.evaluate(
        "() => Math.max(...[...document.querySelectorAll('#messages .msg, #messages details.tool')]"
        ".map(m => Math.max(m.getBoundingClientRect().right - innerWidth, m.scrollWidth - m.clientWidth)))"
    )
    assert worst <= 1, f"{where}: a transcript card is {worst}px too wide"


def test_every_page_fits_the_window_at_1400_and_420(browser: Any, served: Served, tmp_path: Path):
    from playwright.sync_api import expect

    api = served.client()
    sid = _session(api)
    api.post(
        "/schedules", json={"prompt": "summarise " + UNBROKEN, "every": "1h", "session_id": sid}
    )
    shots = tmp_path / "screenshots"
    shots.mkdir()
    errors: list[str] = []
    for name, (w, h) in SIZES.items():
        page = browser.new_page(viewport={"width": w, "height": h})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{served.url}/ui/login#token={TOKEN}")
        expect(page.locator("#sessions tbody tr")).to_have_count(1)
        _no_sideways_scroll(page, f"list at {name}")
        page.screenshot(path=str(shots / f"{name}-1-list.png"), full_page=True)

        page.goto(f"{served.url}/ui/?q=notes")
        expect(page.locator("#sessions .match")).to_have_count(1)
        _no_sideways_scroll(page, f"search at {name}")
        page.screenshot(path=str(shots / f"{name}-2-search.png"), full_page=True)

        page.goto(f"{served.url}/ui/sessions/{sid}")
        expect(page.locator("#conn")).to_have_text("following")
        expect(page.locator("#approvals .approval")).to_have_count(1)
        page.locator("#turns").scroll_into_view_if_needed()
        _no_sideways_scroll(page, f"session at {name}")
        _turns_fit(page, f"session at {name}")
        _cards_fit(page, f"session at {name}")
        page.screenshot(path=str(shots / f"{name}-3-session.png"), full_page=True)

        page.goto(f"{served.url}/ui/schedules")
        expect(page.locator("#schedules tbody tr")).to_have_count(1)
        _no_sideways_scroll(page, f"schedules at {name}")
        page.screenshot(path=str(shots / f"{name}-4-schedules.png"), full_page=True)

        page.goto(f"{served.url}/ui/usage?by=session")
        expect(page.locator("h1")).to_be_visible()
        _no_sideways_scroll(page, f"usage at {name}")
        page.screenshot(path=str(shots / f"{name}-5-usage.png"), full_page=True)
        page.close()
    assert errors == []


def test_the_session_page_marks_turns_names_them_in_receipts_and_keeps_panels_fresh(
    browser: Any, served: Served, tmp_path: Path
):
    from playwright.sync_api import expect

    api = served.client()
    sid = _session(api)
    turns = api.get(f"/sessions/{sid}/turns").json()["turns"]
    assert [t["reverted"] for t in turns] == [False, False, True, False]
    shots = tmp_path / "screenshots"
    shots.mkdir()
    errors: list[str] = []
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{served.url}/ui/login#token={TOKEN}")
    expect(page.locator("#sessions")).to_be_visible()
    page.goto(f"{served.url}/ui/sessions/{sid}")
    expect(page.locator("#conn")).to_have_text("following")

    # the log of a session nobody drives: the events up to the page's own, at once
    last_seq = page.locator("body").get_attribute("data-last-seq")
    expect(page.locator("#log li").last).to_have_text(re.compile(rf"^#{last_seq} "))
    assert page.locator("#log li").count() >= 10

    # turns by number, the failed one with its error, the rewound one marked, without a rewind
    rows = page.locator("#turns tr[data-turn]")
    expect(rows).to_have_count(4)
    expect(rows.locator("td.no")).to_have_text(["1", "2", "3", "4"])
    expect(rows.nth(0).locator("td.no")).to_have_attribute("title", turns[0]["id"])
    blocked = page.locator(f"#turns tr.turn-error[data-error-of='{turns[1]['id']}']")
    expect(blocked).to_contain_text(turns[1]["error"][:40])
    expect(blocked.locator("xpath=preceding-sibling::tr[1]")).to_have_attribute(
        "data-turn", turns[1]["id"]
    )
    expect(rows.nth(2)).to_have_class(re.compile(r"\breverted\b"))
    expect(rows.nth(2).locator(".reverted-tag")).to_have_text("reverted")
    expect(rows.nth(2).locator("button.rewind")).to_have_count(0)
    expect(page.locator("#turns .reverted-tag")).to_have_count(1)
    expect(page.locator("#turns button.rewind")).to_have_count(3)
    expect(rows.nth(0).locator("td.num").first).to_have_text(
        f"{turns[0]['tokens_in']:,} / {turns[0]['tokens_out']:,}"
    )

    # each receipt names its turn
    labels = page.locator("#receipts details.receipt .turn-no").all_inner_texts()
    assert labels[:2] == ["turn 1", "turn 1"] and labels[-1] == "turn 4", labels
    assert "turn 2" in labels and "no turn" not in labels

    # approve the write from the page: the artifact it made shows without a reload
    expect(page.locator("#artifacts tbody tr.empty")).to_have_count(1)
    page.locator("#approvals .approval button[data-decision=allow]").click()
    expect(page.locator("#messages .msg.role-assistant").last).to_contain_text(
        "Wrote the report.", timeout=20_000
    )
    expect(page.locator("#artifacts tbody tr")).to_have_count(1)
    expect(page.locator("#artifacts tbody tr")).to_contain_text("report.txt")
    # the live receipts and the rebuilt turns table keep the numbering and the marks
    expect(rows).to_have_count(5)  # the approved call ran in a turn of its own
    expect(page.locator("#receipts details.receipt .turn-no").last).to_have_text("turn 5")
    expect(page.locator("#turns .reverted-tag")).to_have_count(1)
    expect(blocked).to_contain_text(turns[1]["error"][:40])
    expect(page.locator("#log li").last).to_contain_text("turn.ended", timeout=20_000)
    page.screenshot(path=str(shots / "approved.png"), full_page=True)
    assert errors == []


def test_a_login_returns_to_the_page_asked_for(browser: Any, served: Served, tmp_path: Path):
    from playwright.sync_api import expect

    sid = served.client().post("/sessions", json={"title": "Asked for"}).json()["session"]["id"]
    page = browser.new_page(viewport={"width": 420, "height": 900})
    page.goto(f"{served.url}/ui/sessions/{sid}?sensitive=1")
    expect(page.locator("#login")).to_be_visible()
    page.fill("#token", "not-the-token")
    page.click("#login button")
    expect(page.locator("#login-error")).to_be_visible()  # a wrong token keeps the page asked for
    page.fill("#token", TOKEN)
    page.click("#login button")
    expect(page.locator("#title")).to_have_text("Asked for")
    assert page.url == f"{served.url}/ui/sessions/{sid}?sensitive=1"
    _no_sideways_scroll(page, "session at 420")
    page.screenshot(path=str(tmp_path / "login-returned.png"), full_page=True)

    # the link `wakeful serve` prints still lands on the list; nothing leads off the site
    anonymous = served.client(token=None)
    for asked in (
        "//evil.example/ui/",
        "https://evil.example/ui/",
        "/ui/login",
        "/sessions",
        "/\\evil",
    ):
        r = anonymous.post(
            "/ui/login", data={"token": TOKEN, "next": asked}, follow_redirects=False
        )
        assert r.status_code == 303 and r.headers["location"] == "/ui/", asked
    r = anonymous.post(
        "/ui/login", data={"token": TOKEN, "next": "/ui/schedules"}, follow_redirects=False
    )
    assert r.headers["location"] == "/ui/schedules"


__all__ = ["browser"]  # the inspector's Chromium fixture, used here
