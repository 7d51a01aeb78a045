"""Interrupting the in-process `local` model: exit 130, never a segmentation fault.

llama.cpp generates in a worker thread; an interrupt must stop that thread before the model is
freed and the process exits. Each way in (Ctrl-C on a terminal, `wakeful interrupt` from another
process) is tried five times in a row on a real `wakeful run` answering with SmolLM2.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from wakeful.store import open_store

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None and os.environ.get("CI") != "true",
        reason="the `local` extra is not installed; `make test` installs it",
    ),
]
PROMPT = "Write a long story about a brave dragon and a lost village."
TRIES = 5


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return out | {
        "WAKEFUL_DB": str(tmp_path / "local.db"),
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "TERM": "dumb",
    }


def _start(tmp_path: Path, env: dict[str, str]) -> pexpect.spawn:
    """`wakeful run --model local` on a pseudo-terminal, once its answer is streaming."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "run", "--model", "local", PROMPT],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=120,
    )
    child.expect(r"\w+\s+\w+\s+\w+\s+\w+")  # a few words of the answer: generation is under way
    return child


def _newest_turn(env: dict[str, str]) -> str:
    store = open_store(env["WAKEFUL_DB"])
    try:
        [row] = store.list_sessions(limit=1).sessions
        return store.turns(row.id)[-1].status
    finally:
        store.close()


def _newest_session(db: str) -> str:
    store = open_store(db)
    try:
        return store.list_sessions(limit=1).sessions[0].id
    finally:
        store.close()


def _wait_exit(child: pexpect.spawn) -> int | None:
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus is None, f"killed by signal {child.signalstatus}"
    return child.exitstatus


def test_ctrl_c_while_the_local_model_answers_exits_130(tmp_path: Path, env: dict[str, str]):
    for attempt in range(TRIES):
        child = _start(tmp_path, env)
        child.sendintr()  # Ctrl-C on the terminal: SIGINT to the foreground process group
        assert _wait_exit(child) == 130, f"try {attempt + 1}: {child.before!r}"
        assert "[interrupted]" in (child.before or "")
        assert _newest_turn(env) == "interrupted"


def test_wakeful_interrupt_from_another_process_exits_130(tmp_path: Path, env: dict[str, str]):
    for attempt in range(TRIES):
        child = _start(tmp_path, env)
        sid = _newest_session(env["WAKEFUL_DB"])
        done = subprocess.run(
            [sys.executable, "-m", "wakeful", "interrupt", "--session", sid],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert _wait_exit(child) == 130, f"try {attempt + 1}: {child.before!r}"
        assert _newest_turn(env) == "interrupted"


def test_a_finished_local_answer_still_exits_0(tmp_path: Path, env: dict[str, str]):
    done = subprocess.run(
        [sys.executable, "-m", "wakeful", "run", "--model", "local", "--format", "json", "Hi"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "completed"
