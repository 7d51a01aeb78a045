"""`wakeful run` on a terminal: a spinner while waiting, with a retry's deadline."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect


def test_spinner_shows_the_retry_deadline_then_the_answer(tmp_path: Path):
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "chunk_chars": 4,
                "chunk_delay_ms": 20,
                "rules": [
                    {
                        "match": ".",
                        "replies": [
                            {
                                "text": "ANSWER",
                                "error": {"kind": "rate_limit", "times": 1, "retry_after_ms": 800},
                            }
                        ],
                    }
                ],
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"WAKEFUL_DB": str(tmp_path / "s.db"), "HOME": str(tmp_path)}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "run", "--model", f"scripted:{script}", "hi"],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=30,
    )
    child.expect(r"rate_limit: retry at \d\d:\d\d:\d\d")
    child.expect("ANSW")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
