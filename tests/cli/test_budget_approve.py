"""`wakeful approve SESSION --budget`: a session its budget paused, in one process, is raised
and continued by another, on both backends; a bad amount is one line and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import write_script

CALLS = [{"tool_calls": [{"name": "goal_set", "input": {"goal": f"g{i}"}}]} for i in range(40)]
RULES = [{"match": ".", "replies": [*CALLS, {"text": "done"}]}]


def test_approve_budget_raises_and_continues(wk, workdir: Path):
    (workdir / "wakeful.toml").write_text("[budgets]\nsession_tokens = 3000\n")
    model = write_script(workdir, RULES)
    done = wk("run", "--model", model, "--format", "json", "work", check=False)
    assert done.returncode == 4, done.stderr
    out = json.loads(done.stdout)
    assert (out["outcome"], out["error_kind"]) == ("paused", "budget")
    assert "wakeful approve SESSION --budget" in out["error"]
    sid = out["session_id"]
    bad = wk("approve", sid, "--budget", "+5eur", check=False)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1
    assert "Traceback" not in bad.stderr
    again = wk("approve", sid, "--budget", "+3000tokens", "--format", "json", check=False)
    assert again.returncode == 4, again.stderr  # continued, then paused at the new limit
    out = json.loads(again.stdout)
    assert (out["outcome"], out["error_kind"]) == ("paused", "budget")
    assert "of its 6,000 tokens" in out["error"] and out["budget"]["add_tokens"] == 3000
    last = wk("approve", sid, "--budget", "1000000tokens")
    assert last.stdout.strip().endswith("done")
    shown = json.loads(wk("session", "show", sid, "--format", "json").stdout)
    assert shown["status"] == "idle"


def test_run_shows_the_budget_notice_on_the_terminal(wk, workdir: Path):
    (workdir / "wakeful.toml").write_text("[budgets]\nsession_tokens = 6000\nnotice_percent = 50\n")
    model = write_script(workdir, RULES)
    done = wk("run", "--model", model, "work", check=False)
    assert done.returncode == 4, done.stderr
    [line] = [ln for ln in done.stderr.splitlines() if ln.startswith("! budget:")]
    assert "of its 6,000 tokens" in line and "notice at 50%" in line
