"""`wakeful schedule add|list|show|pause|resume|rm` as a user runs them: JSON out, one line and
exit 2 for bad input, and a worker that fires what was added."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen

import pytest

from tests.cli.conftest import Wk


@pytest.fixture
def model(tmp_path: Path) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "noted"}]}]}))
    return f"scripted:{path}"


def test_add_list_pause_resume_rm(wk: Wk, model: str, workdir: Path):
    added = json.loads(
        wk(
            "schedule",
            "add",
            "daily report",
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Europe/Paris",
            "--model",
            model,
            "--name",
            "report",
            "--format",
            "json",
        ).stdout
    )
    assert added["kind"] == "cron" and added["timezone"] == "Europe/Paris"
    assert added["every"] == "cron 0 9 * * 1-5 in Europe/Paris"
    assert added["next_fire"].endswith(("+01:00", "+02:00")) and "T09:00:00" in added["next_fire"]
    assert added["template"]["location"] == str(workdir) and added["template"]["model"] == model
    sid = added["id"]
    [listed] = json.loads(wk("schedule", "list", "--format", "json").stdout)
    assert listed["id"] == sid and listed["last_fire"] is None
    assert "report" in wk("schedule", "list").stdout
    paused = json.loads(wk("schedule", "pause", sid, "--format", "json").stdout)
    assert paused["enabled"] is False
    assert "paused" in wk("schedule", "list").stdout
    resumed = json.loads(wk("schedule", "resume", sid, "--format", "json").stdout)
    assert resumed["enabled"] is True and resumed["next_fire_ms"] is not None
    assert wk("schedule", "rm", sid).stdout.strip() == f"deleted {sid}"
    assert wk("schedule", "list").stdout.strip() == "no schedules"


@pytest.mark.parametrize(
    "args",
    [
        ["add", "x", "--cron", "not a cron"],
        ["add", "x", "--every", "soon"],
        ["add", "x", "--every", "1s", "--at", "2030-01-01T00:00"],
        ["add", "x"],
        ["add", "x", "--every", "1s", "--tz", "Nowhere/Land"],
        ["add", "x", "--at", "2001-01-01T00:00"],
        ["add", "", "--every", "1s"],
        ["add", "x", "--every", "1s", "--session", "ses_missing"],
        ["pause", "sch_missing"],
        ["resume", "sch_missing"],
        ["rm", "sch_missing"],
        ["show", "sch_missing"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(wk: Wk, model: str, args: list[str]):
    wk("schedule", "add", "keep", "--every", "1h", "--model", model)  # the store exists
    done = (
        wk("schedule", *args, "--model", model, check=False)
        if args[0] == "add"
        else wk("schedule", *args, check=False)
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert len(json.loads(wk("schedule", "list", "--format", "json").stdout)) == 1


def test_a_running_worker_fires_into_a_session(
    wk: Wk, model: str, spawn: Callable[..., Popen[str]]
):
    sent = json.loads(wk("run", "hello", "--model", model, "--format", "json").stdout)
    sid = sent["session_id"]
    added = json.loads(
        wk("schedule", "add", "tick", "--every", "1s", "--session", sid, "--format", "json").stdout
    )
    worker = spawn("worker")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            shown = json.loads(wk("schedule", "show", added["id"], "--format", "json").stdout)
            if len(shown["fires"]) >= 2:
                break
            time.sleep(0.3)
        assert [f["outcome"] for f in shown["fires"]][:2] == ["fired", "fired"]
        assert all(f["session_id"] == sid for f in shown["fires"])
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)
