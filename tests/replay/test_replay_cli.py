"""`wakeful replay` and `wakeful replay --check` as a user runs them (scripted models): the
side-by-side view and its JSON, a check that passes (exit 0) and one that names the first
differing request after an AGENTS.md edit (exit 1), instruction text shown only when asked,
and one-line errors for bad use."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Wk, write_script

RULES = [
    {
        "match": "files",
        "replies": [
            {"tool_calls": [{"name": "list_files", "input": {"path": "."}}]},
            {"text": "There are files."},
        ],
    },
    {"match": ".", "replies": [{"text": "plain answer"}]},
]
RULE = "Project rule: the codename is BLUEBIRD-7."


def _session(wk: Wk, workdir: Path) -> tuple[str, str]:
    (workdir / "AGENTS.md").write_text(RULE + "\n")
    model = write_script(workdir, RULES)
    out = wk("run", "--model", model, "--format", "json", "list the files")
    sid = json.loads(out.stdout)["session_id"]
    wk("run", "--model", model, "--session", sid, "thanks")
    return sid, model


def test_replay_shows_both_answers_side_by_side(wk: Wk, workdir: Path) -> None:
    sid, model = _session(wk, workdir)
    other = workdir.parent / "other.json"
    other.write_text(
        json.dumps({"rules": [{"match": ".", "replies": [{"text": "I would not list."}]}]})
    )
    out = wk(
        "replay",
        sid,
        "--turn",
        "1",
        "--step",
        "1",
        "--model",
        f"scripted:{other}",
        "--model",
        model,
        "--format",
        "json",
    )
    data = json.loads(out.stdout)
    assert data["source"]["session_id"] == sid and data["source"]["step"] == 1
    assert data["recorded"]["tool_calls"] == [{"name": "list_files", "input": {"path": "."}}]
    assert data["models"][f"scripted:{other}"]["text"] == "I would not list."
    assert "+I would not list." in data["models"][f"scripted:{other}"]["diff"]
    assert data["models"][model]["diff"] == ""  # the same script gives the same reply
    text = wk("replay", sid, "--turn", "1", "--step", "1", "--model", f"scripted:{other}").stdout
    assert "tool calls" in text and "I would not list." in text and "diff against" in text


def test_check_passes_then_names_the_first_difference(wk: Wk, workdir: Path) -> None:
    sid, _model = _session(wk, workdir)
    ok = wk("replay", "--check", sid)
    assert ok.returncode == 0 and "ok, 3 requests reproduced" in ok.stdout
    (workdir / "AGENTS.md").write_text("Project rule: the codename is REDBIRD-9.\n")
    failed = wk("replay", "--check", sid, check=False)
    assert failed.returncode == 1, failed.stderr
    assert "request 1 (turn 1 step 1) differs" in failed.stdout
    assert "system.instructions.AGENTS.md" in failed.stdout
    assert "BLUEBIRD" not in failed.stdout and "REDBIRD" not in failed.stdout  # redacted
    shown = wk("replay", "--check", sid, "--show-sensitive", "--format", "json", check=False)
    diff = json.loads(shown.stdout)["difference"]["diff"]
    assert "-" in diff and "BLUEBIRD-7" in diff and "REDBIRD-9" in diff


def test_bad_use_is_one_line(wk: Wk, workdir: Path) -> None:
    sid, model = _session(wk, workdir)
    cases = [
        (["replay", sid], "give at least one --model"),
        (["replay", sid, "--model", model, "--turn", "9"], "no turn 9"),
        (["replay", "--check", sid, "--model", model], "takes sessions only"),
        (["replay", "ses_nope", "--model", model], "ses_nope"),
        (["replay", sid, "--model", "nonsense"], "bad model spec"),
    ]
    for args, words in cases:
        done = wk(*args, check=False)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert words in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
