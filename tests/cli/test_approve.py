"""Approvals from the command line, through real processes on both backends: a run nobody can
answer pauses and exits; a later `wakeful approve` (another process) runs the call exactly once,
or denies it and the model is told; a process killed around the decision loses nothing and
repeats nothing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from tests.cli.conftest import write_script

GO = "echo one >> ledger.txt"
RULES = [
    {
        "match": "^go$",
        "replies": [
            {"tool_calls": [{"name": "shell", "input": {"command": GO}}]},
            {"text": "done"},
        ],
    },
    {
        "match": "^edit$",
        "replies": [
            {
                "tool_calls": [
                    {"name": "edit_file", "input": {"path": "a.txt", "old": "old", "new": "new"}}
                ]
            },
            {"text": "edited"},
        ],
    },
]


def ask_shell_and_writes(workdir: Path) -> None:
    """The defaults (shell and writes ask), over the suite's user config that allows them."""
    (workdir / "wakeful.toml").write_text(
        '[permissions]\nshell = "ask"\nwrite_file = "ask"\nedit_file = "ask"\n'
    )


def ledger(workdir: Path) -> Counter[str]:
    path = workdir / "ledger.txt"
    return Counter(path.read_text().split()) if path.exists() else Counter()


def paused_run(wk, workdir: Path, prompt: str = "go") -> tuple[str, str, str]:
    """A non-interactive run that pauses; return (session, call, stderr)."""
    ask_shell_and_writes(workdir)
    model = write_script(workdir, RULES)
    done = wk("run", "--model", model, "--format", "json", prompt, check=False)
    assert done.returncode == 4, done.stderr  # paused: the process exited
    out = json.loads(done.stdout)
    assert (out["outcome"], out["error_kind"]) == ("paused", "awaiting_approval")
    [waiting] = out["approvals"]
    return out["session_id"], waiting["call_id"], done.stderr


def status(wk, sid: str) -> str:
    return json.loads(wk("session", "show", sid, "--format", "json").stdout)["status"]


def test_a_paused_run_is_approved_later_and_the_call_runs_exactly_once(wk, workdir: Path):
    sid, call, _ = paused_run(wk, workdir)
    assert status(wk, sid) == "awaiting_approval" and ledger(workdir) == Counter()
    listed = wk("approve", sid)
    assert listed.stdout.splitlines() == [f"{call}  shell", f"    $ {GO}"]
    approved = wk("approve", sid, call)
    assert approved.stdout == "done\n"
    assert ledger(workdir) == {"one": 1}  # the ledger shows one line
    assert status(wk, sid) == "idle"
    again = wk("approve", sid, call, check=False)  # nothing waits: nothing runs twice
    assert again.returncode == 2 and "awaits approval" in again.stderr
    assert "Traceback" not in again.stderr
    log = [
        json.loads(line)
        for line in wk("log", "--session", sid, "--format", "jsonl").stdout.splitlines()
    ]
    types = [e["type"] for e in log]
    assert types.count("tool.started") == 1 and types.count("approval.decided") == 1
    assert ledger(workdir) == {"one": 1}


def test_text_mode_says_how_to_approve(wk, workdir: Path):
    ask_shell_and_writes(workdir)
    model = write_script(workdir, RULES)
    done = wk("run", "--model", model, "go", check=False)
    assert done.returncode == 4
    assert "[awaiting approval]" in done.stderr and f"$ {GO}" in done.stderr
    assert "wakeful approve ses_" in done.stderr


def test_a_deny_returns_an_error_result_to_the_model(wk, workdir: Path):
    (workdir / "a.txt").write_text("old\n")
    sid, call, _ = paused_run(wk, workdir, "edit")
    listed = json.loads(wk("approve", sid, "--format", "json").stdout)
    assert listed["approvals"][0]["preview"] == (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new"
    )  # the exact diff
    out = json.loads(wk("approve", sid, call, "--deny", "--format", "json").stdout)
    assert out["outcome"] == "completed" and out["text"] == "edited"
    assert (workdir / "a.txt").read_text() == "old\n"
    shown = json.loads(wk("session", "show", sid, "--format", "json").stdout)
    results = [b for m in shown["messages"] for b in m["blocks"] if b["type"] == "tool_result"]
    assert [(r["is_error"], r["output"]) for r in results] == [
        (True, "permission denied: the user declined edit_file")
    ]


def test_a_kill_after_the_decision_was_delivered_loses_nothing(wk, workdir: Path, cli_env):
    """`wakeful approve` dies right after its drain delivered the decision (and started the
    turn), before the call ran; the next process runs it, once."""
    sid, call, _ = paused_run(wk, workdir)
    cli_env["WAKEFUL_CRASH_AT"] = "drain.claimed"
    killed = wk("approve", sid, call, check=False)
    assert killed.returncode == -9 and ledger(workdir) == Counter()
    del cli_env["WAKEFUL_CRASH_AT"]
    resumed = wk("run", "--session", sid, "--format", "json")
    assert json.loads(resumed.stdout)["text"] == "done"
    assert ledger(workdir) == {"one": 1}
    wk("run", "--session", sid, check=False)  # yet another drive: nothing runs again
    assert ledger(workdir) == {"one": 1}


def test_a_kill_while_pausing_keeps_the_call_waiting(wk, workdir: Path, cli_env):
    """The run dies after its reply and the approval request were durable, before the turn
    ended: recovery pauses again (the call is not answered as never run)."""
    ask_shell_and_writes(workdir)
    model = write_script(workdir, RULES)
    cli_env["WAKEFUL_CRASH_AT"] = "approval.requested"
    killed = wk("run", "--model", model, "go", check=False)
    assert killed.returncode == -9
    del cli_env["WAKEFUL_CRASH_AT"]
    [row] = json.loads(wk("session", "list", "--format", "json").stdout)
    resumed = wk("run", "--session", row["id"], "--format", "json", check=False)
    assert (
        resumed.returncode == 4 and json.loads(resumed.stdout)["error_kind"] == "awaiting_approval"
    )
    [waiting] = json.loads(wk("approve", row["id"], "--format", "json").stdout)["approvals"]
    wk("approve", row["id"], waiting["call_id"])
    assert ledger(workdir) == {"one": 1}


def test_run_on_a_terminal_asks_inline_and_always_holds_for_the_session(
    workdir: Path, cli_env: dict[str, str]
):
    import sys

    import pexpect

    ask_shell_and_writes(workdir)
    model = write_script(
        workdir,
        [
            {
                "match": "^go$",
                "replies": [
                    {"tool_calls": [{"name": "shell", "input": {"command": GO}}]},
                    {"text": "done"},
                ],
            },
            {
                "match": "^more$",
                "replies": [
                    {
                        "tool_calls": [
                            {"name": "shell", "input": {"command": "echo two >> ledger.txt"}}
                        ]
                    },
                    {"text": "more done"},
                ],
            },
        ],
    )
    env = cli_env | {"TERM": "dumb"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "run", "--model", model, "go"],
        cwd=str(workdir),
        env=env,
        encoding="utf-8",
        timeout=30,
    )
    child.expect(r"\? shell wants to run:")
    child.expect(rf"\$ {GO}")
    child.expect(r"allow\? \[y\] once, \[a\] always this session, \[n\] deny: ")
    child.sendline("a")
    child.expect("done")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and ledger(workdir) == {"one": 1}
    # `always` was recorded for the session: the next run there does not ask
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "run", "--model", model, "--continue", "more"],
        cwd=str(workdir),
        env=env,
        encoding="utf-8",
        timeout=30,
    )
    child.expect("more done")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and ledger(workdir) == {"one": 1, "two": 1}


def test_a_prompt_to_a_paused_session_waits_for_the_decision(wk, workdir: Path):
    sid, call, _ = paused_run(wk, workdir)
    model = write_script(workdir, RULES + [{"match": ".", "replies": [{"text": "later"}]}])
    held = wk(
        "run", "--model", model, "--session", sid, "--format", "json", "and then?", check=False
    )
    assert held.returncode == 4
    out = json.loads(held.stdout)
    assert out["error_kind"] == "awaiting_approval" and "inbox" in out["error"]
    assert [a["call_id"] for a in out["approvals"]] == [call]
    shown = json.loads(wk("session", "show", sid, "--format", "json").stdout)
    assert len(shown["pending"]) == 1 and ledger(workdir) == Counter()
    done = json.loads(wk("approve", sid, call, "--format", "json").stdout)
    assert done["outcome"] == "completed" and ledger(workdir) == {"one": 1}
    shown = json.loads(wk("session", "show", sid, "--format", "json").stdout)
    texts = [b["text"] for m in shown["messages"] for b in m["blocks"] if b["type"] == "text"]
    assert texts == ["go", "done", "and then?", "later"] and shown["pending"] == []


def test_run_on_a_terminal_asks_about_a_session_paused_earlier(
    wk, workdir: Path, cli_env: dict[str, str]
):
    import sys

    import pexpect

    sid, call, _ = paused_run(wk, workdir)
    model = write_script(workdir, RULES)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "run", "--model", model, "--session", sid],
        cwd=str(workdir),
        env=cli_env | {"TERM": "dumb"},
        encoding="utf-8",
        timeout=30,
    )
    child.expect(rf"\$ {GO}")
    child.expect(r"allow\? ")
    child.sendline("y")
    child.expect("done")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and ledger(workdir) == {"one": 1}


def test_ctrl_c_at_the_question_leaves_the_call_waiting(wk, workdir: Path, cli_env: dict[str, str]):
    """Issue 38 item 5: Ctrl-C at the question is no denial: the run pauses (exit 4) and says
    how to decide, and a later `wakeful approve` runs the call exactly once."""
    import sys

    import pexpect

    ask_shell_and_writes(workdir)
    model = write_script(workdir, RULES)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "run", "--model", model, "go"],
        cwd=str(workdir),
        env=cli_env | {"TERM": "dumb"},
        encoding="utf-8",
        timeout=30,
    )
    child.expect(r"allow\? ")
    child.sendintr()
    child.expect(r"wakeful approve (ses_\w+) (\S+)")
    sid, call = child.match.group(1), child.match.group(2)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 4 and ledger(workdir) == Counter()
    assert status(wk, sid) == "awaiting_approval"
    wk("approve", sid, call)
    assert ledger(workdir) == {"one": 1}
