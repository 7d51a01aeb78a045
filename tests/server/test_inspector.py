"""The web inspector in a real headless Chromium (Debian's, driven by Playwright).

Open the list, search it, open a session (tool calls folded, media shown), watch a turn stream
in live, send a steer while a turn runs, interrupt one; screenshots go to the test's tmp_path.
Without Chromium or Playwright the test skips with its reason (and fails under CI=true).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import TOKEN, MakeServer, Served, script

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PNG = base64.b64encode(
    base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
).decode()
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
    model = script(
        tmp_path,
        [
            {
                "match": "notes",
                "replies": [
                    {"tool_calls": [{"name": "read_file", "input": {"path": "notes.txt"}}]},
                    {"text": "The notes say alpha."},
                ],
            },
            {"match": "steer", "replies": [{"text": "Steer received."}]},
            {"match": ".", "replies": [{"text": LONG}]},
        ],
        chunk_chars=4,
        chunk_delay_ms=25,
    )
    server = make_server(model=model)
    (Path(server.runtime.workspace) / "notes.txt").write_text("alpha\n")
    return server


def test_inspector_lists_shows_streams_steers_and_interrupts(
    browser: Any, served: Served, tmp_path: Path
):
    from playwright.sync_api import expect

    api = served.client()
    first = api.post(
        "/sessions",
        json={"title": "Reading the notes", "prompt": {"text": "read the notes", "wait": True}},
    ).json()
    sid = first["session"]["id"]
    api.post(
        f"/sessions/{sid}/prompt",
        json={
            "blocks": [
                {"type": "text", "text": "a picture"},
                {"type": "image", "media_type": "image/png", "data": PNG},
            ],
            "wait": True,
        },
    )
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

    # a session: the tool call folded with its result (whose own message is left out), the image
    page.click(f"a[href='/ui/sessions/{sid}']")
    expect(page.locator("#conn")).to_have_text("following")
    expect(page.locator("#messages .msg")).to_have_count(5)
    call = page.locator("details.tool").first
    expect(call).to_be_visible()
    assert call.get_attribute("open") is None
    expect(call.locator("summary")).to_have_text("→ read_file notes.txt ✓ alpha")
    assert page.locator("figure.media img").evaluate("img => img.naturalWidth") == 1
    expect(page.locator("#turns tbody tr[data-turn]")).to_have_count(2)
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
    expect(page.locator("#messages .msg.role-user").last).to_contain_text(
        "steer: keep it short", timeout=20_000
    )
    expect(page.locator("#messages .msg.role-assistant").last).to_contain_text(
        "Steer received.", timeout=20_000
    )
    expect(page.locator("#messages")).to_contain_text(LONG.strip()[:40])
    expect(live).to_be_hidden()
    page.screenshot(path=str(shots / "4-steered.png"), full_page=True)

    # interrupt a streaming turn from the page
    page.fill("#prompt", "another long story")
    page.click("#send")
    expect(live).not_to_be_empty(timeout=10_000)
    page.click("#interrupt")
    expect(page.locator("#turns tbody tr[data-turn]").last).to_contain_text(
        "interrupted", timeout=20_000
    )
    page.screenshot(path=str(shots / "5-interrupted.png"), full_page=True)

    assert errors == []
    page.close()
    assert sorted(p.name for p in shots.iterdir()) == [
        "1-list.png",
        "2-session.png",
        "3-streaming.png",
        "4-steered.png",
        "5-interrupted.png",
    ]


def _page(browser: Any, served_url: str, shots: Path, errors: list[str]) -> Any:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{served_url}/ui/login#token={TOKEN}")
    shots.mkdir(exist_ok=True)
    return page


WEATHER = "Sunny with a light breeze over the harbour."


@pytest.fixture
def weather(make_server: MakeServer, tmp_path: Path) -> Served:
    model = script(
        tmp_path,
        [
            {"match": "weather", "replies": [{"text": WEATHER}]},
            {"match": ".", "replies": [{"text": "Noted."}]},
        ],
        chunk_chars=4,
        chunk_delay_ms=10,
    )
    return make_server(model=model)


def test_the_list_is_title_first_searches_content_and_creates_sessions(
    browser: Any, weather: Served, tmp_path: Path
):
    from playwright.sync_api import expect

    api = weather.client()
    asked = api.post(
        "/sessions",
        json={"title": "Weather check", "prompt": {"text": "how is the weather?", "wait": True}},
    ).json()
    api.post(
        "/sessions",
        json={"title": "Shopping list", "prompt": {"text": "eggs and milk", "wait": True}},
    )
    shots = tmp_path / "screenshots"
    errors: list[str] = []
    page = _page(browser, weather.url, shots, errors)
    rows = page.locator("#sessions tbody tr")
    expect(rows).to_have_count(2)
    first = rows.first
    expect(first.locator("td").first.locator("a.title")).to_have_text("Shopping list")
    expect(first.locator("td.model")).to_have_text(weather.runtime.model)
    stamp = first.locator("time[data-ms]")
    expect(stamp).not_to_contain_text("UTC")  # the browser's local time, not the server's
    local = page.evaluate(
        "ms => new Date(Number(ms)).toLocaleString(undefined, {year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit'})",
        stamp.get_attribute("data-ms"),
    )
    expect(stamp).to_have_text(local)
    page.screenshot(path=str(shots / "6-list.png"), full_page=True)

    # search what was said, not only titles
    page.fill("#search", "breeze")
    page.click("#filters button")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("a.title")).to_have_text("Weather check")
    expect(rows.first.locator(".match")).to_have_text(WEATHER)
    page.screenshot(path=str(shots / "7-search.png"), full_page=True)
    page.fill("#search", "!!")
    page.click("#filters button")
    expect(page.locator("#search-problem")).to_contain_text("at least one word")
    page.fill("#search", asked["session"]["id"])
    page.click("#filters button")
    expect(rows).to_have_count(1)

    # create a session from the page, with its first prompt
    page.goto(f"{weather.url}/ui/")
    page.click("#create-box summary")
    page.fill("#create-title", "Made in the browser")
    page.fill("#create-prompt", "and the weather tomorrow?")
    page.screenshot(path=str(shots / "8-create.png"), full_page=True)
    page.click("#create-submit")
    expect(page.locator("#title")).to_have_text("Made in the browser")
    expect(page.locator("#messages .msg.role-assistant").last).to_have_text(
        re.compile(re.escape(WEATHER)), timeout=20_000
    )
    expect(page.locator("#turns tbody tr[data-turn]")).to_have_count(1, timeout=20_000)
    expect(page.locator("#turn-chart g.turn-bar")).to_have_count(1)
    expect(page.locator("#receipts details.receipt")).to_have_count(1)  # none shown twice
    page.screenshot(path=str(shots / "9-created.png"), full_page=True)
    page.goto(f"{weather.url}/ui/")
    page.click("#create-box summary")
    page.fill("#create-model", "nonsense:model")
    page.click("#create-submit")
    expect(page.locator("#create-status")).to_contain_text("error:")
    assert errors == []


BEFORE = "def add(a, b):\n    # adds two numbers\n    return a - b\n"
AFTER = "def add(a, b):\n    # adds two numbers\n    return a + b\n"


@pytest.fixture
def tools(make_server: MakeServer, tmp_path: Path) -> Served:
    model = script(
        tmp_path,
        [
            {
                "match": "fix",
                "replies": [
                    {
                        "tool_calls": [
                            {
                                "name": "edit_file",
                                "input": {
                                    "path": "calc.py",
                                    "old": "    return a - b\n",
                                    "new": "    return a + b\n",
                                },
                            }
                        ]
                    },
                    {"tool_calls": [{"name": "read_file", "input": {"path": "missing.txt"}}]},
                    {
                        "text": "Fixed the sign.",
                        "usage": {"input_tokens": 1200, "output_tokens": 300},
                    },
                ],
            },
            {
                "match": ".",
                "replies": [
                    {"text": "Hello.", "usage": {"input_tokens": 400, "output_tokens": 40}}
                ],
            },
        ],
        chunk_chars=4,
        chunk_delay_ms=40,
    )
    server = make_server(model=model)
    (Path(server.runtime.workspace) / "calc.py").write_text(BEFORE)
    return server


def _check_tool_cards(page: Any) -> None:
    from playwright.sync_api import expect

    edit, read = page.locator("details.tool").nth(0), page.locator("details.tool").nth(1)
    expect(edit.locator("summary")).to_have_text("→ edit_file calc.py ✓ edited calc.py at line 3")
    assert edit.get_attribute("open") is not None  # a diff is shown, not folded away
    expect(edit.locator(".diff-head")).to_have_text("calc.py")
    expect(edit.locator(".d-del")).to_have_text(["-     return a - b"])
    expect(edit.locator(".d-add")).to_have_text(["+     return a + b"])
    expect(read).to_have_class(re.compile(r"\berror\b"))
    expect(read.locator("summary")).to_have_text(
        "→ read_file missing.txt ✗ no such file: missing.txt"
    )
    # each result went to its call: no message of bare tool results is left
    expect(page.locator("#messages .msg")).to_have_count(6)  # hello, Hello., fix, 2 calls, answer
    expect(page.locator("#messages details.fold-tool_result")).to_have_count(0)


def _receipt_timeline(page: Any) -> list[str]:
    """The receipts read as a step timeline: the first lists its sections, each later one says
    what changed since the one before it (here: two new messages, the same sections) and
    repeats no unchanged section."""
    from playwright.sync_api import expect

    expect(page.locator("#receipts > li > details.receipt")).to_have_count(4)
    changes: list[str] = page.locator("#receipts .change").all_inner_texts()
    assert re.fullmatch(r"first request: \d+ sections, 1 messages", changes[0]), changes
    assert changes[1:] == ["+2 messages · sections unchanged"] * 3, changes
    assert page.locator("#receipts details.receipt").nth(0).locator("tbody tr").count() >= 3
    for n in (1, 2, 3):
        assert page.locator("#receipts details.receipt").nth(n).locator("table").count() == 0
    return changes


def test_tool_calls_show_with_their_results_and_edits_as_diffs(
    browser: Any, tools: Served, tmp_path: Path
):
    from playwright.sync_api import expect

    api = tools.client()
    sid = api.post(
        "/sessions", json={"title": "Fix the sign", "prompt": {"text": "hello", "wait": True}}
    ).json()["session"]["id"]
    shots = tmp_path / "screenshots"
    errors: list[str] = []
    page = _page(browser, tools.url, shots, errors)
    page.goto(f"{tools.url}/ui/sessions/{sid}")
    expect(page.locator("#conn")).to_have_text("following")
    page.fill("#prompt", "please fix the add function")
    page.click("#send")
    expect(page.locator("#messages .msg.role-assistant").last).to_have_text(
        re.compile("Fixed the sign."), timeout=20_000
    )
    _check_tool_cards(page)
    live = _receipt_timeline(page)  # built by session.js as the receipts arrived
    expect(page.locator("#turn-chart g.turn-bar")).to_have_count(2)
    expect(page.locator("#turn-chart text.cost")).to_have_count(2)
    titles = page.locator("#turn-chart g.turn-bar title").evaluate_all(
        "ns => ns.map(n => n.textContent)"
    )
    turns = api.get(f"/sessions/{sid}/turns").json()["turns"]
    assert titles == [
        f"turn {i} · {t['tokens_in']:,} in / {t['tokens_out']:,} out · "
        + ("unknown" if t["cost_usd"] is None else f"${t['cost_usd']:.4f}")
        for i, t in enumerate(turns, 1)
    ]
    assert titles[0].endswith("· unknown")  # a scripted model has no price: never "$0.0000"
    assert titles[0].startswith("turn 1 · 400 in / 40 out")
    page.screenshot(path=str(shots / "10-tools-live.png"), full_page=True)
    page.reload()  # the server renders the same pairing and diff
    expect(page.locator("#conn")).to_have_text("following")
    _check_tool_cards(page)
    assert _receipt_timeline(page) == live  # the server renders the same timeline
    page.screenshot(path=str(shots / "11-tools-reloaded.png"), full_page=True)
    assert (Path(tools.runtime.workspace) / "calc.py").read_text() == AFTER
    assert errors == []


@pytest.fixture
def prefixed(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """The app mounted under /wk in another Starlette app (its lifespan run by the outer one)."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.routing import Mount

    from tests.server.conftest import ServerThread
    from wakeful.config import Config
    from wakeful.execution import Runtime
    from wakeful.server import Settings, Tokens, create_app

    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    model = script(
        tmp_path,
        [{"match": ".", "replies": [{"text": "Answered under a prefix."}]}],
        chunk_chars=4,
        chunk_delay_ms=10,
    )
    rt = Runtime(str(tmp_path / "p.db"), model=model, workspace=work, config=Config())
    inner = create_app(
        rt, tokens=Tokens([TOKEN]), settings=Settings(keepalive_s=1.0, poll_ms=10), own_runtime=True
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with inner.router.lifespan_context(inner):
            yield

    thread = ServerThread(Starlette(routes=[Mount("/wk", app=inner)], lifespan=lifespan))
    thread.start()
    try:
        yield f"http://127.0.0.1:{thread.port}", rt
    finally:
        thread.stop()


def test_the_app_works_mounted_under_a_path_prefix(
    browser: Any, prefixed: tuple[str, Any], tmp_path: Path
):
    import httpx
    from playwright.sync_api import expect

    url, _rt = prefixed
    with httpx.Client(base_url=url, timeout=30) as http:
        health = http.get("/wk/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"  # no token needed
        assert http.get("/wk/sessions").status_code == 401
        login = http.get("/wk/ui/")
        assert login.status_code == 401 and 'action="/wk/ui/login"' in login.text
        auth = {"Authorization": f"Bearer {TOKEN}"}
        css = http.get("/wk/ui/static/app.css", headers=auth)
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert http.get("/wk/ui/static/session.js", headers=auth).status_code == 200
        made = http.post("/wk/sessions", headers=auth, json={"title": "Under a prefix"})
        assert made.status_code == 201
        assert made.headers["location"] == f"/wk/sessions/{made.json()['session']['id']}"
    shots = tmp_path / "screenshots"
    errors: list[str] = []
    page = _page(browser, f"{url}/wk", shots, errors)
    expect(page.locator("#sessions tbody tr")).to_have_count(1)
    assert page.url == f"{url}/wk/ui/"
    header = page.locator("header.top").evaluate("h => getComputedStyle(h).backgroundColor")
    assert header == "rgb(29, 35, 48)"  # the style sheet loaded
    page.click("#create-box summary")
    page.fill("#create-title", "Made under a prefix")
    page.fill("#create-prompt", "hello from the prefix")
    page.click("#create-submit")
    expect(page.locator("#title")).to_have_text("Made under a prefix")
    assert page.url.startswith(f"{url}/wk/ui/sessions/ses_")
    expect(page.locator("#conn")).to_have_text("following")  # the log stream under the prefix
    expect(page.locator("#messages .msg.role-assistant").last).to_have_text(
        re.compile("Answered under a prefix."), timeout=20_000
    )
    page.fill("#prompt", "and once more")
    page.click("#send")
    expect(page.locator("#compose-status")).to_contain_text("steer admitted")
    expect(page.locator("#messages .msg.role-assistant")).to_have_count(2, timeout=20_000)
    expect(page.locator("#turns tbody tr[data-turn]")).to_have_count(2, timeout=20_000)
    expect(page.locator("#receipts details.receipt")).to_have_count(2)  # none shown twice
    page.screenshot(path=str(shots / "12-prefix.png"), full_page=True)
    page.click("header.top .logout button")
    expect(page.locator("#login")).to_be_visible()
    assert page.url == f"{url}/wk/ui/login"
    page.goto(f"{url}/wk/ui/")  # signed out: the cookie is gone
    expect(page.locator("#login")).to_be_visible()
    assert errors == []


def test_serve_behind_a_proxy_that_strips_the_prefix(tmp_path: Path):
    """`wakeful serve --root-path /wk`: requests arrive without the prefix, links carry it."""
    import httpx

    from tests.server.test_serve_cli import Serve, _env

    server = Serve(tmp_path, "--token", TOKEN, "--root-path", "/wk", env=_env(tmp_path))
    try:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
        login = httpx.get(f"{server.url}/ui/", timeout=10)
        assert login.status_code == 401 and 'action="/wk/ui/login"' in login.text
        page = httpx.get(f"{server.url}/ui/", headers=auth, timeout=10)
        assert page.status_code == 200
        assert 'href="/wk/ui/static/app.css"' in page.text and 'data-base="/wk"' in page.text
        assert (
            httpx.get(f"{server.url}/ui/static/list.js", headers=auth, timeout=10).status_code
            == 200
        )
        home = httpx.get(f"{server.url}/", headers=auth, timeout=10)
        assert home.status_code == 303 and home.headers["location"] == "/wk/ui/"
    finally:
        assert server.stop() == 0
    assert f"{server.url}/wk/ui/" in server.output()


@pytest.fixture
def asking(make_server: MakeServer, tmp_path: Path) -> Served:
    model = script(
        tmp_path,
        [
            {
                "match": "deploy",
                "replies": [
                    {
                        "tool_calls": [
                            {"name": "shell", "input": {"command": "echo deployed >> ledger.txt"}}
                        ]
                    },
                    {"text": "Deployed."},
                ],
            },
            {
                "match": "fix",
                "replies": [
                    {
                        "tool_calls": [
                            {
                                "name": "edit_file",
                                "input": {
                                    "path": "calc.py",
                                    "old": "    return a - b\n",
                                    "new": "    return a + b\n",
                                },
                            }
                        ]
                    },
                    {"text": "Left it alone."},
                ],
            },
        ],
    )
    server = make_server(model=model, permissions={})  # the defaults: shell and writes ask
    (Path(server.runtime.workspace) / "calc.py").write_text(BEFORE)
    return server


def test_pending_approvals_show_the_command_or_diff_and_are_decided_from_the_page(
    browser: Any, asking: Served, tmp_path: Path
):
    from playwright.sync_api import expect

    api = asking.client()
    sid = api.post(
        "/sessions", json={"title": "Deploy", "prompt": {"text": "deploy it", "wait": True}}
    ).json()["session"]["id"]
    shots = tmp_path / "screenshots"
    errors: list[str] = []
    page = _page(browser, asking.url, shots, errors)
    page.goto(f"{asking.url}/ui/sessions/{sid}")
    expect(page.locator("#conn")).to_have_text("following")
    expect(page.locator("#status")).to_have_text("awaiting_approval")
    card = page.locator("#approvals .approval")
    expect(card).to_have_count(1)
    expect(card.locator(".approval-preview")).to_have_text("$ echo deployed >> ledger.txt")
    expect(page.locator("details.tool .tool-state")).to_have_text("awaiting approval")
    page.screenshot(path=str(shots / "20-approval-shell.png"), full_page=True)
    card.locator("button[data-decision=allow]").click()
    expect(page.locator("#messages .msg.role-assistant").last).to_have_text(
        re.compile("Deployed."), timeout=20_000
    )
    expect(page.locator("#approvals")).to_be_hidden()
    expect(page.locator("#status")).to_have_text("idle")
    assert (Path(asking.runtime.workspace) / "ledger.txt").read_text() == "deployed\n"
    # a write: the diff is shown; deny it and the model is told
    page.fill("#prompt", "fix the add function")
    page.click("#send")
    expect(card).to_have_count(1, timeout=20_000)
    expect(card.locator(".d-del")).to_have_text(["-    return a - b"])
    expect(card.locator(".d-add")).to_have_text(["+    return a + b"])
    page.screenshot(path=str(shots / "21-approval-diff.png"), full_page=True)
    card.locator("button[data-decision=deny]").click()
    expect(page.locator("#messages .msg.role-assistant").last).to_have_text(
        re.compile("Left it alone."), timeout=20_000
    )
    assert (Path(asking.runtime.workspace) / "calc.py").read_text() == BEFORE
    page.screenshot(path=str(shots / "22-approval-denied.png"), full_page=True)
    assert errors == []


def test_schedules_are_listed_added_paused_resumed_and_deleted_from_the_page(
    browser: Any, weather: Served, tmp_path: Path
):
    from playwright.sync_api import expect

    api = weather.client()
    sid = api.post("/sessions", json={"title": "Target"}).json()["session"]["id"]
    made = api.post(
        "/schedules",
        json={"prompt": "weather now?", "every": "1h", "session_id": sid, "name": "hourly weather"},
    ).json()
    shots = tmp_path / "screenshots"
    errors: list[str] = []
    page = _page(browser, weather.url, shots, errors)
    page.click("header nav a:has-text('schedules')")
    rows = page.locator("#schedules tbody tr")
    expect(rows).to_have_count(1)
    row = rows.first
    expect(row.locator(".title")).to_have_text("hourly weather")
    expect(row.locator(".when")).to_have_text("every 1h")
    expect(row.locator(".target a")).to_have_attribute("href", re.compile(f"/ui/sessions/{sid}$"))
    stamp = row.locator(".next time[data-ms]")
    assert stamp.get_attribute("data-ms") == str(made["next_fire_ms"])
    expect(stamp).not_to_have_text(made["next_fire"])  # formatted in the browser's time zone
    expect(row.locator(".last")).to_have_text("never")
    page.screenshot(path=str(shots / "s1-schedules.png"), full_page=True)

    row.locator("button.pause").click()
    expect(page.locator("#schedules tbody tr").first.locator(".next")).to_have_text("paused")
    assert api.get(f"/schedules/{made['id']}").json()["enabled"] is False
    page.locator("#schedules tbody tr").first.locator("button.resume").click()
    expect(page.locator("#schedules tbody tr").first.locator("button.pause")).to_be_visible()

    page.click("#schedule-box summary")
    page.fill("#schedule-prompt", "morning weather")
    page.select_option("#schedule-kind", "cron")
    page.fill("#schedule-spec", "0 7 * * *")
    page.fill("#schedule-tz", "Europe/Oslo")
    page.click("#schedule-submit")
    expect(rows).to_have_count(2)
    expect(rows.nth(1).locator(".when")).to_have_text("cron 0 7 * * * in Europe/Oslo")
    expect(rows.nth(1).locator(".target")).to_have_text("new session per fire")
    page.click("#schedule-box summary")
    page.select_option("#schedule-kind", "cron")
    page.fill("#schedule-prompt", "broken")
    page.fill("#schedule-spec", "every day")
    page.click("#schedule-submit")
    expect(page.locator("#schedule-status")).to_contain_text("error: bad cron expression")
    page.screenshot(path=str(shots / "s2-added.png"), full_page=True)

    rows.first.locator("button.delete").click()
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".title")).to_have_text("morning weather")


@pytest.fixture
def rewinding(make_server: MakeServer, tmp_path: Path) -> Served:
    model = script(
        tmp_path,
        [
            {
                "match": "^make",
                "replies": [
                    {
                        "tool_calls": [
                            {
                                "name": "write_file",
                                "input": {"path": "made.txt", "content": "made\n"},
                            }
                        ]
                    },
                    {"text": "Made the file."},
                ],
            },
            {"match": ".", "replies": [{"text": "Hello."}]},
        ],
    )
    return make_server(model=model, permissions={"*": "allow"})


def test_a_turn_is_rewound_and_unreverted_from_the_page_and_artifacts_are_listed(
    browser: Any, rewinding: Served, tmp_path: Path
):
    from playwright.sync_api import expect

    api = rewinding.client()
    sid = api.post(
        "/sessions", json={"title": "Rewind me", "prompt": {"text": "hello", "wait": True}}
    ).json()["session"]["id"]
    api.post(f"/sessions/{sid}/prompt", json={"text": "make a file", "wait": True})
    pr = "https://github.com/acme/app/pull/7"
    api.post(
        f"/sessions/{sid}/artifacts", json={"kind": "pull_request", "uri": pr, "label": "PR #7"}
    )
    made = Path(rewinding.runtime.workspace) / "made.txt"
    assert made.exists()
    shots = tmp_path / "screenshots"
    errors: list[str] = []
    page = _page(browser, rewinding.url, shots, errors)
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(f"{rewinding.url}/ui/sessions/{sid}")
    expect(page.locator("#conn")).to_have_text("following")
    rows = page.locator("#artifacts tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("pull_request")
    expect(rows.nth(0).locator("a")).to_have_attribute("href", pr)
    expect(rows.nth(1)).to_contain_text("made.txt")
    expect(page.locator("#reverted")).to_have_count(0)
    expect(page.locator("#messages")).to_contain_text("make a file")
    page.screenshot(path=str(shots / "20-before-rewind.png"), full_page=True)

    page.locator("#turns button.rewind").nth(1).click()  # the turn that made the file
    expect(page.locator("#reverted")).to_be_visible()
    expect(page.locator("#messages")).not_to_contain_text("make a file")
    expect(page.locator("#messages .msg")).to_have_count(2)  # hello, Hello.
    assert made.exists()  # the page's rewind leaves files alone
    page.screenshot(path=str(shots / "21-rewound.png"), full_page=True)

    page.click("#unrevert")
    expect(page.locator("#reverted")).to_have_count(0)
    expect(page.locator("#messages")).to_contain_text("Made the file.")
    page.screenshot(path=str(shots / "22-unreverted.png"), full_page=True)
    assert errors == []


@pytest.fixture
def flooding(make_server: MakeServer, tmp_path: Path) -> Served:
    """A user tool returning 300,000 bytes: over the cap on tool results (issue 43 item 1)."""
    from tests.faults.test_tool_cap import flood

    model = script(
        tmp_path,
        [
            {
                "match": "flood",
                "replies": [
                    {"tool_calls": [{"name": "flood", "input": {"size": 300_000}}]},
                    {"text": "Flooded."},
                ],
            },
            {"match": ".", "replies": [{"text": "Hello."}]},
        ],
        chunk_chars=4,
        chunk_delay_ms=20,
    )
    return make_server(model=model, tools=[flood])


def test_a_result_cut_for_the_model_links_its_whole_output(
    browser: Any, flooding: Served, tmp_path: Path
):
    from playwright.sync_api import expect

    from tests.mcp.mcp_server import numbered

    api = flooding.client()
    sid = api.post(
        "/sessions", json={"title": "Flood", "prompt": {"text": "hello", "wait": True}}
    ).json()["session"]["id"]
    errors: list[str] = []
    page = _page(browser, flooding.url, tmp_path / "screenshots", errors)
    page.goto(f"{flooding.url}/ui/sessions/{sid}")
    expect(page.locator("#conn")).to_have_text("following")
    page.fill("#prompt", "flood me")
    page.click("#send")
    link = page.locator(".tool .tool-out a.whole-output")
    expect(link).to_have_text(
        "the whole output (300000 bytes; the model was given it cut)", timeout=20_000
    )
    href = link.get_attribute("href")
    assert href is not None and f"/sessions/{sid}/media/" in href
    assert api.get(href).text == numbered(300_000)
    page.reload()  # the server renders the same link
    expect(page.locator(".tool .tool-out a.whole-output")).to_have_attribute("href", href)
    assert errors == []
