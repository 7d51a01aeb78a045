"""`wakeful chat` through a pseudo-terminal (pexpect)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect
import pytest

from wakeful.store import open_store


@pytest.fixture
def chat_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return env | {
        "WAKEFUL_DB": str(tmp_path / "chat.db"),
        "HOME": str(tmp_path),
        "TERM": "dumb",
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "XDG_DATA_HOME": str(tmp_path / ".local"),
    }


def model(tmp_path: Path, delay_ms: int = 0) -> str:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            {
                "chunk_chars": 4,
                "chunk_delay_ms": delay_ms,
                "rules": [
                    {"match": "^slow", "replies": [{"text": "tick " * 60}]},
                    {"match": "^steer", "replies": [{"text": "SAW!"}]},
                    {"match": ".", "replies": [{"text": "OK!!"}]},
                ],
            }
        )
    )
    return f"scripted:{path}"


def spawn(tmp_path: Path, env: dict[str, str], delay_ms: int = 0) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "chat", "--model", model(tmp_path, delay_ms)],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )
    child.expect("/quit")  # the help banner
    return child


def count_sessions(env: dict[str, str]) -> int:
    store = open_store(env["WAKEFUL_DB"])
    try:
        return len(store.list_sessions(roots_only=False, archived=None).sessions)
    finally:
        store.close()


def test_quitting_before_a_submission_stores_nothing(tmp_path: Path, chat_env):
    child = spawn(tmp_path, chat_env)
    child.sendline("/new")
    child.expect("nothing stored")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert count_sessions(chat_env) == 0


def test_submit_then_new_session(tmp_path: Path, chat_env):
    child = spawn(tmp_path, chat_env)
    child.sendline("hello")
    child.expect("OK!!")
    child.sendline("/new")
    child.expect("new session")
    child.sendline("again")
    child.expect("OK!!")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert count_sessions(chat_env) == 2


def test_typing_while_working_steers(tmp_path: Path, chat_env):
    child = spawn(tmp_path, chat_env, delay_ms=40)
    child.sendline("slow task")
    child.expect("tick")
    child.sendline("steer please")
    child.expect("SAW!", timeout=60)
    child.sendline("/quit")
    child.expect(pexpect.EOF, timeout=60)
    store = open_store(chat_env["WAKEFUL_DB"])
    try:
        [row] = store.list_sessions().sessions
        texts = [m.text() for m in store.messages(row.id)]
    finally:
        store.close()
    assert texts.index("steer please") < texts.index("SAW!")


def test_ctrl_c_interrupts_the_turn(tmp_path: Path, chat_env):
    child = spawn(tmp_path, chat_env, delay_ms=60)
    child.sendline("slow task")
    child.expect("tick")
    child.sendintr()
    child.expect(r"\[interrupted\]")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    store = open_store(chat_env["WAKEFUL_DB"])
    try:
        [row] = store.list_sessions().sessions
        assert store.turns(row.id)[-1].status == "interrupted"
    finally:
        store.close()


def test_a_shell_call_is_asked_about_inline_and_the_decision_is_durable(tmp_path: Path, chat_env):
    path = tmp_path / "ask.json"
    path.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": "^go",
                        "replies": [
                            {
                                "tool_calls": [
                                    {
                                        "name": "shell",
                                        "input": {"command": "echo one >> ledger.txt"},
                                    }
                                ]
                            },
                            {"text": "RAN!"},
                        ],
                    },
                    {
                        "match": "^no",
                        "replies": [
                            {
                                "tool_calls": [
                                    {
                                        "name": "shell",
                                        "input": {"command": "echo two >> ledger.txt"},
                                    }
                                ]
                            },
                            {"text": "SKIPPED!"},
                        ],
                    },
                ]
            }
        )
    )
    (tmp_path / ".git").mkdir()
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "chat", "--model", f"scripted:{path}"],
        cwd=str(tmp_path),
        env=chat_env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )
    child.expect("/quit")
    child.sendline("go")
    child.expect(r"\? shell wants to run:")
    child.expect(r"\$ echo one >> ledger.txt")
    child.expect("allow\\?")
    child.sendline("y")
    child.expect("RAN!")
    child.sendline("no thanks")
    child.expect("allow\\?")
    child.sendline("n")
    child.expect("SKIPPED!")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert (tmp_path / "ledger.txt").read_text() == "one\n"
    store = open_store(chat_env["WAKEFUL_DB"])
    try:
        [row] = store.list_sessions().sessions
        decided = [e.event for e in store.events(row.id, types=["approval.decided"])]
        assert [getattr(d, "decision", None) for d in decided] == ["allow", "deny"]
    finally:
        store.close()


def test_compact_says_once_how_it_went_before_the_next_command(tmp_path: Path, chat_env):
    """Issue 38 item 6: no `(compaction progress)` line per streamed chunk, and the result is
    printed before a `/new` right after it switches sessions."""
    child = spawn(tmp_path, chat_env)
    for n in range(4):
        child.sendline(f"message {n}")
        child.expect("OK!!")
    child.sendline("/compact")
    child.sendline("/new")
    child.expect(r"compacted: \d+ messages replaced by summary")
    between = child.before
    child.expect("new session")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert "progress" not in between and "progress" not in child.before


def test_the_chat_says_which_model_answers(tmp_path: Path, chat_env):
    """Issue 38 item 11: the model and agent are named when the chat starts."""
    child = spawn(tmp_path, chat_env)
    child.expect(r"model scripted:\S+script\.json · agent build")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
