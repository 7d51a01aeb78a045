"""A first-time user: no configuration, no API key, no network, the README's main job."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None and os.environ.get("CI") != "true",
    reason="the `local` extra is not installed; `make test` installs it",
)


def test_main_job_answers_offline_and_lists_the_session(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "WAKEFUL_DB"}
    env |= {
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    work = tmp_path / "work"
    work.mkdir()

    def wakeful(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "wakeful", *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    done = wakeful("run", "What is the capital of France?")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    listed = json.loads(wakeful("session", "list", "--format", "json").stdout)
    assert len(listed) == 1 and listed[0]["model"] == "local"
    assert (tmp_path / "data" / "wakeful" / "sessions.db").exists()
