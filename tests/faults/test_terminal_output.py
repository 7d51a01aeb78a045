"""Issue 16, item 8: text from the store reaches a terminal as text, never as escape sequences.

Anyone with a token sets a title (and a prompt) over the HTTP API of a real `wakeful serve`;
`session list`, `session show` and `log` then print them with every control character (ESC,
BEL, CR, C1 controls) shown as a `\\xNN` escape, so no clear-screen or window-title sequence
reaches the terminal.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.server.conftest import ECHO, script
from tests.server.test_serve_cli import TOKEN, Serve, _env

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\r\x9b1m"
SHOWN = r"\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x0d\x9b1m"


def test_titles_and_messages_print_without_escape_sequences(tmp_path: Path):
    server = Serve(
        tmp_path, "--token", TOKEN, "--model", script(tmp_path, ECHO), env=_env(tmp_path)
    )
    try:
        answer = httpx.post(
            f"{server.url}/sessions",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
            json={"title": HOSTILE, "prompt": {"text": f"say {HOSTILE}", "wait": True}},
        )
        assert answer.status_code == 201, answer.text
        sid = answer.json()["session"]["id"]
    finally:
        assert server.stop() == 0
    for args in (["session", "list"], ["session", "show", sid], ["log", "--session", sid]):
        done = subprocess.run(
            [sys.executable, "-m", "wakeful", *args],
            env=_env(tmp_path),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert not any(c in done.stdout for c in "\x1b\x07\r\x9b"), (args, done.stdout)
        assert SHOWN[:40] in done.stdout, (args, done.stdout)
