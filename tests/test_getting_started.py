"""docs/getting-started.md runs as written: every `sh` and `python` block, in page order.

Each line of a `sh` block runs in bash (one process per line, `wakeful` from this environment),
in a fresh home with no API key, the default store of that home, and `WAKEFUL_MODEL` set to a
scripted model (the page's commands stay as written; only the model is chosen for the test,
as the page says `WAKEFUL_MODEL` does). `ses_…` (the placeholder the page asks a reader to
replace) becomes the newest session's id. A block preceded by
`<!-- getting-started: not run ... -->` is skipped (the reason is in the comment); one preceded
by `<!-- getting-started: background ... -->` is started, read until it prints the inspector's
login link, tried, and stopped. Each command must exit 0; what it printed is checked below.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

PAGE = Path(__file__).parent.parent / "docs" / "getting-started.md"
FENCE = re.compile(
    r"(?:<!-- getting-started: (not run|background)\b[^>]*-->\n)?```(\w+)\n(.*?)```", re.S
)
SCRIPT = {
    "rules": [
        {"match": "France", "replies": [{"text": "The capital of France is Paris."}]},
        {"match": "Spain", "replies": [{"text": "The capital of Spain is Madrid."}]},
    ]
}


@dataclass
class Block:
    mode: str  # "run", "not run" or "background"
    lang: str
    body: str


def blocks() -> list[Block]:
    """The page's fenced blocks, each with how the test treats it."""
    return [Block(m[1] or "run", m[2], m[3]) for m in FENCE.finditer(PAGE.read_text())]


def _env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("WAKEFUL_")
    }
    script = home / "model.json"
    script.write_text(json.dumps(SCRIPT))
    bindir = str(Path(sys.executable).parent)  # the `wakeful` of this environment
    return env | {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "WAKEFUL_MODEL": f"scripted:{script}",
        "PATH": bindir + os.pathsep + env.get("PATH", ""),
    }


def _newest(env: dict[str, str], cwd: Path) -> str:
    out = subprocess.run(
        ["wakeful", "session", "list", "--format", "json"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return str(json.loads(out.stdout)[0]["id"])


def _run(line: str, env: dict[str, str], cwd: Path) -> str:
    if "ses_…" in line:
        line = line.replace("ses_…", _newest(env, cwd))
    done = subprocess.run(
        ["bash", "-c", line], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"`{line}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(line: str, env: dict[str, str], cwd: Path) -> str:
    """Start the command, wait for its login link, sign in with it, stop the command."""
    port = _free_port()  # the page's port may be taken where tests run
    line = re.sub(r"--port \d+", f"--port {port}", line)
    log = cwd / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {line}"], env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        while not (link := re.search(r"http://\S+/ui/login#token=(\S+)", log.read_text())):
            assert proc.poll() is None, f"`{line}` exited {proc.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no login link from `{line}`:\n{log.read_text()}"
            time.sleep(0.1)
        assert link[0].startswith(f"http://127.0.0.1:{port}/ui/login#token=")
        page = httpx.get(
            f"http://127.0.0.1:{port}/ui/",
            headers={"Authorization": f"Bearer {link[1]}"},
            timeout=30,
        )
        assert page.status_code == 200, page.text
        return page.text
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0, log.read_text()


def test_the_getting_started_page_runs_as_written(tmp_path: Path):
    found = blocks()
    assert [b.mode for b in found].count("not run") == 1  # only the install
    assert sum(b.mode == "run" for b in found) >= 6
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = _env(home)
    said: list[str] = []
    for block in found:
        if block.mode == "not run":
            continue
        lines = [line for line in block.body.splitlines() if line.strip()]
        if block.mode == "background":
            [line] = lines
            said.append(_serve(line, env, work))
        elif block.lang == "sh":
            said += [_run(line, env, work) for line in lines]
        else:
            assert block.lang == "python", block.lang
            program = work / "example.py"
            program.write_text(block.body)
            said.append(_run(f"{sys.executable} {program}", env, work))
    first, listed, more, shown, searched, as_json, library, inspector = said
    assert "Paris" in first and re.search(r"^session ses_\w+$", first, re.M)
    sid = re.search(r"session (ses_\w+)", first)[1]  # type: ignore[index]  # asserted above
    assert sid in listed and "What is the capital of France?" in listed
    assert "Madrid" in more and f"session {sid}" in more  # --continue: the same session
    assert "Paris" in shown and "Madrid" in shown
    assert sid in searched
    assert json.loads(as_json)[0]["id"] == sid
    assert library.splitlines()[0] == "completed The capital of France is Paris."
    assert re.fullmatch(r"2 session\(s\) mention it", library.splitlines()[1])
    assert "What is the capital of France?" in inspector  # the list, signed in by the link


def test_the_page_is_in_the_site_navigation():
    config = (PAGE.parent.parent / "mkdocs.yml").read_text()
    assert "Getting started: getting-started.md" in config
