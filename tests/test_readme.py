"""The README's library example runs as written, from a directory outside the clone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def example() -> str:
    text = README.read_text()
    block = re.search(r"<!-- library-example:start -->\s*```python\n(.*?)```", text, re.S)
    assert block, "README lacks the library example"
    return block.group(1)


def test_the_library_example_runs_from_anywhere(tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = tmp_path / "model.json"  # the model is chosen as the README says: $WAKEFUL_MODEL
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "Paris."}]}]}))
    (elsewhere / "example.py").write_text(example())
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "WAKEFUL_MODEL": f"scripted:{script}",
        "PYTHONPATH": "",
    }
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "completed Paris."
    assert re.fullmatch(r"1 session\(s\) mention it, best match ses_[0-9a-f]{24}", lines[1])
    assert (elsewhere / "sessions.db").exists()


def test_the_readme_points_only_inside_the_repository():
    root = README.parent
    for path in re.findall(r"`((?:docs|bench|tests|src)/[\w./-]+|[A-Z]+\.md)`", README.read_text()):
        assert (root / path).exists(), path
    assert "DESIGN.md" not in README.read_text()
