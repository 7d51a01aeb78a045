"""The runnable examples of docs/hooks.md, docs/events.md, docs/tracing.md and docs/replay.md
run as written, from a directory outside the clone, and print what the pages say (events.md:
the lines whose place does not depend on timing)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def blocks(page: str) -> tuple[str, str]:
    """The page's first python block and the output block after it."""
    text = (DOCS / page).read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code, f"{page} lacks a python example"
    printed = re.search(r"It prints.*?```\n(.*?)```", text[code.end() :], re.S)
    assert printed, f"{page} lacks the example's output"
    return code.group(1), printed.group(1)


def run(tmp_path: Path, code: str) -> str:
    (tmp_path / "example.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
    env |= {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config"), "PYTHONPATH": ""}
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("page", ["hooks.md", "tracing.md", "replay.md"])
def test_the_example_prints_what_the_page_says(tmp_path: Path, page: str):
    code, printed = blocks(page)
    assert run(tmp_path, code) == printed


def test_the_events_example_streams_the_turn(tmp_path: Path):
    code, printed = blocks("events.md")
    lines = run(tmp_path, code).splitlines()
    live = [line for line in lines if not line.startswith("durable ")]
    assert live == [line for line in printed.splitlines() if not line.startswith("durable ")]
    durable = [line.split()[1:] for line in lines if line.startswith("durable ")]
    assert [int(seq) for seq, _ in durable] == list(range(2, 16))
    assert lines.index("durable 15 turn.ended") < lines.index("turn ended: completed")
