"""`wakeful serve` as a real process, and the CLI reading a server through `--db http://`."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import ECHO, script, wait_for
from wakeful.client import parse_sse

TOKEN = "cli-test-token-5d1e2f3a4b"
SECRET = "CLI-SECRET-INSTRUCTION-93c1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("WAKEFUL_")
    }
    env |= {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "XDG_DATA_HOME": str(tmp_path / ".local"),
        "WAKEFUL_DB": str(tmp_path / "s.db"),
    }
    return env | extra


class Serve:
    """A `wakeful serve` subprocess with its output in files."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str]) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.out = tmp_path / f"serve-{self.port}.out"
        self.err = tmp_path / f"serve-{self.port}.err"
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        (work / ".git").mkdir(exist_ok=True)
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "wakeful", "serve", "--port", str(self.port), *args],
                cwd=work,
                env=env,
                stdout=out,
                stderr=err,
            )
        wait_for(self._up, timeout=90, what="wakeful serve to answer")

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"wakeful serve exited: {self.err.read_text()}")
        try:
            return httpx.get(f"{self.url}/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def output(self) -> str:
        return self.out.read_text() + self.err.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                return self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("wakeful serve did not stop on SIGINT") from None
        return int(self.proc.returncode)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    model = script(tmp_path, ECHO)
    server = Serve(tmp_path, "--token", TOKEN, "--model", model, env=_env(tmp_path))
    yield server
    server.stop()


def _wk(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = _env(tmp_path, WAKEFUL_SERVER_TOKEN=TOKEN)
    return subprocess.run(
        [sys.executable, "-m", "wakeful", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_drives_sessions_and_stops_cleanly_with_a_follower_open(serve: Serve, tmp_path: Path):
    (tmp_path / "work" / "AGENTS.md").write_text(f"Obey {SECRET}.\n")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=serve.url, headers=auth, timeout=30) as c:
        assert httpx.get(f"{serve.url}/sessions").status_code == 401
        made = c.post(
            "/sessions", json={"title": "from cli test", "prompt": {"text": "hi", "wait": True}}
        )
        assert made.json()["admission"]["turns"][0]["outcome"] == "completed"
        sid = made.json()["session"]["id"]
        assert SECRET not in c.get(f"/sessions/{sid}/receipts").text
        seen: list[str] = []

        def follow() -> None:
            with c.stream("GET", f"/sessions/{sid}/log", params={"follow": "true"}) as r:
                for e in parse_sse(r.iter_lines()):
                    seen.append(e.event)

        t = threading.Thread(target=follow)
        t.start()
        wait_for(lambda: "sync" in seen, what="the follower to sync")
        started = time.monotonic()
        assert serve.stop() == 0
        t.join(10)
        assert not t.is_alive() and time.monotonic() - started < 10
    log = serve.output()
    assert TOKEN not in log and SECRET not in log
    assert 'GET /sessions HTTP/1.1" 401' in log  # the access log is on, and holds no secrets


def test_cli_reads_a_server_through_db_http(serve: Serve, tmp_path: Path):
    with httpx.Client(base_url=serve.url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        sid = c.post(
            "/sessions", json={"title": "remote one", "prompt": {"text": "hi", "wait": True}}
        ).json()["session"]["id"]
    listed = _wk(tmp_path, "session", "list", "--db", serve.url, "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert [s["id"] for s in json.loads(listed.stdout)] == [sid]
    shown = _wk(tmp_path, "session", "show", sid, "--db", serve.url, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    assert data["runs"][0]["outcome"] == "completed"
    log = _wk(
        tmp_path,
        "log",
        "--session",
        sid,
        "--db",
        serve.url,
        "--format",
        "jsonl",
        "--follow",
        "--idle-timeout",
        "0.5",
    )
    lines = [json.loads(x) for x in log.stdout.splitlines()]
    assert lines[-1]["type"] == "sync" and [x["seq"] for x in lines[:-1]] == list(
        range(1, len(lines))
    )
    exported = _wk(tmp_path, "session", "export", sid, "--db", serve.url)
    assert (
        exported.returncode == 0 and len(exported.stdout.splitlines()) == 3
    )  # header + 2 messages
    assert _wk(tmp_path, "session", "archive", sid, "--db", serve.url).returncode == 0
    missing = _wk(tmp_path, "session", "show", "ses_missing", "--db", serve.url)
    assert (
        missing.returncode != 0
        and "no session" in missing.stderr
        and "Traceback" not in missing.stderr
    )
    pruned = _wk(tmp_path, "session", "prune", "--older-than", "1", "--db", serve.url)
    assert pruned.returncode != 0 and "not available through a server" in pruned.stderr
    sent = _wk(tmp_path, "send", "--session", sid, "--db", serve.url, "--input-id", "in-1", "again")
    assert sent.returncode == 0 and sent.stdout.strip() == "in-1", sent.stderr
    wait_for(
        lambda: (
            json.loads(
                _wk(tmp_path, "session", "show", sid, "--db", serve.url, "--format", "json").stdout
            )["messages"][-1]["role"]
            == "assistant"
            and len(
                json.loads(
                    _wk(
                        tmp_path, "session", "show", sid, "--db", serve.url, "--format", "json"
                    ).stdout
                )["messages"]
            )
            == 4
        ),
        what="the sent input answered",
    )
    stopped = _wk(tmp_path, "interrupt", "--session", sid, "--db", serve.url)
    assert stopped.returncode == 0 and "is idle: nothing to interrupt" in stopped.stdout, (
        stopped.stderr
    )
    ran = _wk(tmp_path, "run", "--db", serve.url, "hi")
    assert ran.returncode == 2 and "wakeful server" in ran.stderr


def test_first_start_generates_a_private_token_then_reuses_it(tmp_path: Path):
    env = _env(tmp_path)
    first = Serve(tmp_path, "--model", script(tmp_path, ECHO), env=env)
    try:
        path = tmp_path / ".config" / "wakeful" / "server-token"
        token = path.read_text().strip()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert (
            httpx.get(
                f"{first.url}/sessions", headers={"Authorization": f"Bearer {token}"}
            ).status_code
            == 200
        )
    finally:
        first.stop()
    assert "generated a server token" in first.output() and token in first.output()
    assert f"/ui/login#token={token}" in first.output()
    second = Serve(tmp_path, "--model", script(tmp_path, ECHO), env=env)
    second.stop()
    assert token not in second.output() and "kept in" in second.output()


def test_serve_exits_0_after_a_clean_shutdown_on_sigterm(serve: Serve):
    # issue 43 item 6: uvicorn raised the SIGTERM again after its clean shutdown, and the
    # process died of it (exit 143)
    serve.proc.send_signal(signal.SIGTERM)
    assert serve.proc.wait(timeout=15) == 0, serve.output()
    assert "Traceback" not in serve.output()
