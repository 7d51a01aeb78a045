"""docs/schedules.md's example runs as written, from a directory outside the clone."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "schedules.md"


def test_the_schedules_example_runs(tmp_path: Path):
    block = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert block, "docs/schedules.md lacks its example"
    (tmp_path / "example.py").write_text(block.group(1))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[1:3] == ["interval", "2000"]
    assert lines[1].split()[1:3] == ["cron", "0"]
    fires = ast.literal_eval(lines[-1])
    assert fires and set(fires) == {"fired"}
