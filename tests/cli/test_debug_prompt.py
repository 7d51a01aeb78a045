"""`wakeful debug prompt`: the exact request body as sent (verified against the receipt's
digest), redacted unless `--show-sensitive`; `--turn`/`--step` reach any request; `--diff`
shows what changed since the previous step."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Wk, write_script

RULES = [
    {
        "match": "files",
        "replies": [
            {"tool_calls": [{"name": "shell", "input": {"command": "echo from-the-tool"}}]},
            {"text": "listed"},
        ],
    },
    {"match": ".", "replies": [{"text": "plain answer"}]},
]
SECRET = "Project rule: the codename is BLUEBIRD-7."


def _prompt(wk: Wk, sid: str, *args: str) -> dict:
    return json.loads(wk("debug", "prompt", "--session", sid, "--format", "json", *args).stdout)


def _session(wk: Wk, workdir: Path) -> str:
    (workdir / "AGENTS.md").write_text(SECRET + "\n")
    model = write_script(workdir, RULES)
    sid = json.loads(wk("run", "--model", model, "--format", "json", "hello first").stdout)[
        "session_id"
    ]
    wk("run", "--model", model, "--session", sid, "now files please")
    return sid


def test_the_body_as_sent_redacted_unless_asked(wk: Wk, workdir: Path):
    sid = _session(wk, workdir)
    out = _prompt(wk, sid)
    assert out["verified"] and out["turn"] == 2 and out["step"] == 2
    body = json.dumps(out["request"])
    assert "BLUEBIRD" not in body and "[redacted: --show-sensitive]" in body
    assert "from-the-tool" in body and "now files please" in body  # the history, whole
    shown = wk("debug", "prompt", "--session", sid, "--show-sensitive", "--format", "json")
    assert SECRET in json.dumps(json.loads(shown.stdout)["request"])
    assert "sensitive" in shown.stderr
    text = wk("debug", "prompt", "--session", sid).stdout
    assert "request body (as sent):" in text and '"messages": [' in text
    assert "BLUEBIRD" not in text and "verified" in text


def test_turn_and_step_pick_any_request(wk: Wk, workdir: Path):
    sid = _session(wk, workdir)
    first = _prompt(wk, sid, "--turn", "1")
    assert (first["turn"], first["step"]) == (1, 1) and first["verified"]
    assert "now files please" not in json.dumps(first["request"])
    step1 = _prompt(wk, sid, "--turn", "2", "--step", "1")
    assert "now files please" in json.dumps(step1["request"])
    assert "from-the-tool" not in json.dumps(step1["request"])
    assert _prompt(wk, sid, "--step", "1")["receipt_id"] == step1["receipt_id"]  # newest turn
    missing = wk("debug", "prompt", "--session", sid, "--turn", "9", check=False)
    assert missing.returncode == 2
    assert missing.stderr.strip() == "error: no turn 9 with a request (turns: 1, 2)"


def test_diff_shows_what_changed_since_the_previous_step(wk: Wk, workdir: Path):
    sid = _session(wk, workdir)
    diff = wk("debug", "prompt", "--session", sid, "--diff").stdout
    assert "--- turn 2 step 1 attempt 1" in diff and "+++ turn 2 step 2 attempt 1" in diff
    added = [ln for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert any("from-the-tool" in ln for ln in added)
    assert not any("BLUEBIRD" in ln for ln in diff.splitlines())
    assert not any('"system"' in ln for ln in added)  # unchanged sections are not repeated
    across = _prompt(wk, sid, "--diff", "--turn", "2", "--step", "1")["diff"]
    assert "--- turn 1 step 1 attempt 1" in across and "+" in across
    first = wk("debug", "prompt", "--session", sid, "--turn", "1", "--diff").stdout
    assert "no previous step" in first


def test_a_server_url_is_a_one_line_error(wk: Wk):
    done = wk("debug", "prompt", "--session", "ses_x", "--db", "http://127.0.0.1:9", check=False)
    assert done.returncode == 2 and done.stderr.startswith(
        "error: debug prompt reads a local store"
    )
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_receipt_recorded_against_its_base_rebuilds_whole(wk: Wk, workdir: Path):
    sid = _session(wk, workdir)
    lines = wk("log", "--session", sid, "--format", "jsonl").stdout.splitlines()
    events = [json.loads(ln) for ln in lines]
    logged = [e["data"] for e in events if e.get("type") == "receipt.recorded"]
    before, newest = logged[-2:]  # turn 2's steps: the first whole (a new run), then a delta
    assert "base" not in before and len(before["message_ids"]) == 3
    assert newest["base"] == [before["receipt_id"], 3] and len(newest["message_ids"]) == 2
    out = _prompt(wk, sid)
    assert out["receipt_id"] == newest["receipt_id"] and out["verified"]
    assert out["message_ids"] == before["message_ids"] + newest["message_ids"]
    assert "messages: 5" in wk("debug", "prompt", "--session", sid).stdout
