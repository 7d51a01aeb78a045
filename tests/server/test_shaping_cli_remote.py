"""`wakeful session rewind|unrevert|artifacts|meta --db http://...` against a `wakeful serve`
process: the same output as on the server's own store, and the server's refusals as one line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import script
from tests.server.test_serve_cli import TOKEN, Serve, _env
from tests.server.test_shaping_api import RULES


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").mkdir()
    (work / "wakeful.toml").write_text('[permissions]\n"*" = "allow"\n')
    server = Serve(
        tmp_path, "--token", TOKEN, "--model", script(tmp_path, RULES), env=_env(tmp_path)
    )
    yield server
    server.stop()


def _wk(tmp_path: Path, db: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = _env(tmp_path, WAKEFUL_SERVER_TOKEN=TOKEN)
    return subprocess.run(
        [sys.executable, "-m", "wakeful", "session", *args, "--db", db],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def _one_line_error(done: subprocess.CompletedProcess[str], says: str) -> None:
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def _session(serve: Serve) -> str:
    with httpx.Client(
        base_url=serve.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
    ) as c:
        sid = c.post("/sessions", json={"prompt": {"text": "hello", "wait": True}}).json()
        sid = sid["session"]["id"]
        r = c.post(f"/sessions/{sid}/prompt", json={"text": "make a file", "wait": True})
        assert r.status_code in (200, 202), r.text
    return str(sid)


def test_rewind_and_unrevert_through_a_server(serve: Serve, tmp_path: Path):
    sid = _session(serve)
    hello = tmp_path / "work" / "hello.txt"
    assert hello.read_text() == "hi\n"
    url = serve.url

    out = json.loads(_ok(_wk(tmp_path, url, "rewind", sid[:12], "--files", "--format", "json")))
    assert out["session_id"] == sid and out["files_restored"] == ["hello.txt"]
    assert out["prompt"] == "make a file" and out["warnings"] == [] and not hello.exists()
    text = _ok(_wk(tmp_path, url, "unrevert", sid)).splitlines()
    assert text == [
        f"restored {sid}: {out['hidden']} message(s) (seq {out['seq'] + 1})",
        "  restored hello.txt",
    ]
    assert hello.read_text() == "hi\n"
    _one_line_error(_wk(tmp_path, url, "unrevert", sid), "no rewind to undo")
    _one_line_error(_wk(tmp_path, url, "rewind", sid, "--turn", "nope"), "no turn nope")
    _one_line_error(_wk(tmp_path, url, "rewind", "ses_missing"), "no session")

    hello.write_text("mine\n")  # changed by something else since the session wrote it
    conflict = _wk(tmp_path, url, "rewind", sid, "--files")
    _one_line_error(conflict, "hello.txt")
    assert "HTTP 409" in conflict.stderr and hello.read_text() == "mine\n"

    text = _ok(_wk(tmp_path, url, "rewind", sid)).splitlines()  # files left alone: a warning
    assert text[0].startswith(f"reverted {sid}: ") and text[1:] == [
        "the reverted prompt was:",
        "make a file",
    ]
    assert hello.read_text() == "mine\n"


def test_artifacts_and_meta_through_a_server_print_as_locally(serve: Serve, tmp_path: Path):
    sid = _session(serve)
    url, local = serve.url, str(tmp_path / "s.db")  # the store the server serves
    pr = "https://github.com/acme/app/pull/7"
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        r = c.post(
            f"/sessions/{sid}/artifacts", json={"kind": "pull_request", "uri": pr, "label": "PR 7"}
        )
        assert r.status_code == 201, r.text

    for args in (
        ("artifacts", sid),
        ("artifacts", sid, "--kind", "file"),
        ("artifacts", "--uri", pr),
    ):
        for fmt in ("table", "json"):
            remote = _ok(_wk(tmp_path, url, *args, "--format", fmt))
            assert remote == _ok(_wk(tmp_path, local, *args, "--format", fmt)), args
    rows = json.loads(_ok(_wk(tmp_path, url, "artifacts", sid, "--format", "json")))["artifacts"]
    assert sorted(a["kind"] for a in rows) == ["file", "pull_request"]
    since = _ok(_wk(tmp_path, url, "artifacts", sid, "--since", "2999-01-01T00:00:00+00:00"))
    assert since == "no artifacts\n"
    _one_line_error(_wk(tmp_path, url, "artifacts", "ses_missing"), "no session")

    _ok(_wk(tmp_path, url, "meta", sid, "--set", "owner=alice", "--set", "n=3"))
    meta = json.loads(_ok(_wk(tmp_path, url, "meta", sid[:12], "--unset", "n", "--format", "json")))
    assert meta["metadata"]["owner"] == "alice" and "n" not in meta["metadata"]
    for fmt in ("text", "json"):
        remote = _ok(_wk(tmp_path, url, "meta", sid, "--format", fmt))
        assert remote == _ok(_wk(tmp_path, local, "meta", sid, "--format", fmt))
    assert 'owner = "alice"' in _ok(_wk(tmp_path, url, "meta", sid)).splitlines()
    _one_line_error(_wk(tmp_path, url, "meta", sid, "--set", "x=" + "y" * 70_000), "exceed")
    _one_line_error(_wk(tmp_path, url, "meta", "ses_missing"), "no session")
