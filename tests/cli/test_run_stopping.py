"""`wakeful run` on a terminal says the turn is stopping on Ctrl-C (issue 37 item 29): the line
appears at once, the turn then ends interrupted (exit 130), what it streamed kept. On main the
first Ctrl-C printed nothing until the turn had ended."""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect

from tests.cli.conftest import write_script

SLOW = "tick " * 300


def test_ctrl_c_shows_the_stopping_state_then_exits_130(workdir: Path, cli_env: dict[str, str]):
    model = write_script(
        workdir,
        [{"match": ".", "replies": [{"text": SLOW.strip()}]}],
        chunk_chars=5,
        chunk_delay_ms=40,
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "run", "--model", model, "slow"],
        cwd=str(workdir),
        env=cli_env | {"TERM": "dumb"},
        encoding="utf-8",
        timeout=30,
    )
    child.expect("tick tick tick")  # the answer streams
    child.sendintr()
    child.expect("stopping: the turn ends as interrupted")
    child.expect(r"\[interrupted\]")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
