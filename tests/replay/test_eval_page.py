"""The inspector's eval page in a real headless Chromium: the table per model and each case's
results side by side, at a desktop and a phone width without the page scrolling sideways;
screenshots go to the test's tmp_path."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import TOKEN, MakeServer, Served
from tests.server.test_inspector import browser
from wakeful.execution import Runtime
from wakeful.replay import load_suite, run_suite

LONG = "A long answer that wraps: " + "word " * 60


@pytest.fixture
def evals(tmp_path: Path) -> tuple[str, str]:
    """An eval run of two cases on two scripted models (made before the browser starts: its
    driver holds an event loop in this thread); the database and the run's id."""
    db = str(tmp_path / "evals.db")
    return db, _run(tmp_path, db)


@pytest.fixture
def served(evals: tuple[str, str], make_server: MakeServer) -> Served:
    """A server over the database holding the run (the inspector's `browser` fixture takes it)."""
    return make_server(db=evals[0])


def _run(tmp_path: Path, db: str) -> str:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": "weather",
                        "replies": [
                            {"tool_calls": [{"name": "get_weather", "input": {"city": "Oslo"}}]}
                        ],
                    },
                    {"match": ".", "replies": [{"text": "Paris. " + LONG}]},
                ]
            }
        )
    )
    bad.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "No idea."}]}]}))
    suite = tmp_path / "suite.toml"
    suite.write_text(f"""name = "capitals"
models = ["scripted:{good}", "scripted:{bad}"]
[[cases]]
id = "france"
prompt = "What is the capital of France?"
graders = [{{kind = "contains", value = "Paris"}}]
[[cases]]
id = "weather"
prompt = "weather in Oslo"
graders = [{{kind = "tool_called", name = "get_weather"}}]
""")

    async def main() -> str:
        rt = Runtime(db, workspace=tmp_path, model=f"scripted:{good}")
        try:
            return (await run_suite(rt, load_suite(rt.store, suite))).run_id
        finally:
            await rt.aclose()

    return asyncio.run(main())


def test_the_eval_page_shows_the_table_and_each_case_side_by_side(
    evals: tuple[str, str], served: Served, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    run_id = evals[1]
    shots = tmp_path / "screenshots"
    shots.mkdir()
    for width, height in ((1400, 1000), (420, 900)):
        page = browser.new_page(viewport={"width": width, "height": height})
        errors: list[str] = []
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        page.goto(f"{served.url}/ui/login#token={TOKEN}")
        expect(page.locator("#sessions")).to_be_visible()
        page.goto(f"{served.url}/ui/evals/{run_id[:12]}")  # a prefix: redirected to the run
        expect(page.locator("#eval-name")).to_have_text("capitals")
        assert page.url.endswith(f"/ui/evals/{run_id}")
        rows = page.locator("#eval-models tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.nth(0)).to_contain_text("2 / 2")
        expect(rows.nth(1)).to_contain_text("0 / 2")
        page.click("#case-2 summary")
        expect(page.locator("#case-2 table.side")).to_contain_text('get_weather {"city": "Oslo"}')
        expect(page.locator("#case-1 table.side")).to_contain_text("✗ contains: lacks 'Paris'")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page scrolls sideways by {overflow}px at {width}px"
        shot = shots / f"eval-{width}.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
        assert errors == []
        page.close()
    # A session that is not a run has no eval page.
    other = served.client().post("/sessions", json={"title": "plain"}).json()["session"]["id"]
    page = browser.new_page()
    page.goto(f"{served.url}/ui/login#token={TOKEN}")
    expect(page.locator("#sessions")).to_be_visible()
    assert page.goto(f"{served.url}/ui/evals/{other}").status == 404


def test_a_runs_progress_is_its_log_on_the_api(evals: tuple[str, str], served: Served) -> None:
    run_id = evals[1]
    page = served.client().get(f"/sessions/{run_id}/log").json()
    types = [e["type"] for e in page["events"]]
    assert types[:2] == ["session.created", "eval.started"] and types[-1] == "eval.ended"
    assert types.count("eval.case_started") == types.count("eval.case_ended") == 4
    ended = [e["data"] for e in page["events"] if e["type"] == "eval.case_ended"]
    assert {(d["case_id"], d["result"]["passed"]) for d in ended} == {
        ("france", True),
        ("france", False),
        ("weather", True),
        ("weather", False),
    }


__all__ = ["browser"]  # the inspector's fixture, used here
