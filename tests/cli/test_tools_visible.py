"""What tools did, visible everywhere: `run` and `chat` show each call's key arguments and a
short result, `session show` pairs each call with its result, `log --format jsonl` is whole."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect

from tests.allow import allow_writes
from tests.cli.conftest import Wk, write_script
from wakeful.cli._tools_view import call_summary, result_summary

TOOLS = [
    {
        "match": "files",
        "replies": [
            {
                "tool_calls": [
                    {"name": "shell", "input": {"command": "echo one; echo two"}},
                    {"name": "write_file", "input": {"path": "notes.txt", "content": "x" * 120}},
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "input": {"path": "notes.txt", "old": "x" * 120, "new": "y"},
                    }
                ]
            },
            {"text": "done"},
        ],
    }
]


def test_call_and_result_summaries():
    assert call_summary("shell", {"command": "ls  -la\n"}) == "shell  ls -la"
    assert (
        call_summary("write_file", {"path": "a.txt", "content": "é"})
        == "write_file  a.txt (2 bytes)"
    )
    assert call_summary("grep", {"pattern": "TODO"}) == "grep  'TODO' in ."
    assert call_summary("mystery", {"a": 1}) == "mystery  a=1"
    assert len(call_summary("shell", {"command": "x" * 500})) < 110
    assert result_summary("first\nsecond\nthird\n", False) == "✓ first  (+2 lines)"
    assert result_summary("", True) == "✗ (no output)"


def test_run_shows_arguments_and_results(wk: Wk, workdir: Path):
    done = wk("run", "--model", write_script(workdir, TOOLS), "make files")
    err = done.stderr.splitlines()
    assert "→ shell  echo one; echo two" in err
    assert "→ write_file  notes.txt (120 bytes)" in err
    assert "  ✓ shell: one  (+2 lines)" in err  # `one`, `two`, and the exit code line
    assert "  ✓ write_file: created notes.txt (120 bytes)" in err
    assert "→ edit_file  notes.txt (-1 +1 lines)" in err
    assert done.stdout.strip() == "done"


def test_session_show_pairs_each_call_with_its_result(wk: Wk, workdir: Path):
    sid = json.loads(
        wk("run", "--model", write_script(workdir, TOOLS), "--format", "json", "make files").stdout
    )["session_id"]
    shown = wk("session", "show", sid).stdout
    assert "tool_call" not in shown and "tool_result" not in shown
    lines = shown.splitlines()
    at = lines.index("→ shell  echo one; echo two")
    assert lines[at + 1 : at + 3] == ["  one", "  two"]
    at = lines.index("→ write_file  notes.txt (120 bytes)")
    assert lines[at + 1] == "  created notes.txt (120 bytes)"
    at = lines.index("→ edit_file  notes.txt (-1 +1 lines)")
    assert lines[at + 1].startswith("  edited notes.txt")
    assert "[assistant] done" in shown


def test_log_jsonl_is_never_truncated(wk: Wk, workdir: Path):
    long = "files " * 2000 + "THE-END"
    sid = json.loads(
        wk("run", "--model", write_script(workdir, TOOLS), "--format", "json", long).stdout
    )["session_id"]
    lines = [
        json.loads(x) for x in wk("log", "--session", sid, "--format", "jsonl").stdout.splitlines()
    ]
    texts = json.dumps(lines)
    assert long in texts  # the prompt, whole
    assert "x" * 120 in texts  # a tool input, whole
    assert all(x["type"] for x in lines)


def test_chat_shows_arguments_and_results(tmp_path: Path):
    import os

    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": TOOLS}))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {
        "WAKEFUL_DB": str(tmp_path / "chat.db"),
        "HOME": str(tmp_path),
        "TERM": "dumb",
        "XDG_CONFIG_HOME": str(tmp_path / ".c"),
        "XDG_DATA_HOME": str(tmp_path / ".l"),
    }
    allow_writes(tmp_path / ".c")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "chat", "--model", f"scripted:{script}"],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )
    try:
        child.expect("/quit")
        child.sendline("make files")
        child.expect("→ shell  echo one; echo two")
        child.expect(r"✓ (shell|write_file): ")
        child.expect("→ edit_file  notes.txt")
        child.expect("done")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_log_text_cuts_long_values_at_a_word_and_says_so():
    from wakeful.cli._log import shorten

    assert shorten("short") == "short"
    long = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu"
    assert (
        shorten(long)
        == f"alpha beta gamma delta epsilon zeta eta theta iota kappa… ({len(long)} chars)"
    )
    assert shorten({"a": 1}) == '{"a": 1}'
