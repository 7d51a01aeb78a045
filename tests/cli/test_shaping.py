"""`wakeful session rewind|unrevert|artifacts|meta` in a real process, on each backend."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Wk

SCRIPT = {
    "rules": [
        {
            "match": "^make",
            "replies": [
                {
                    "tool_calls": [
                        {"name": "write_file", "input": {"path": "hello.txt", "content": "hi\n"}},
                        {"name": "shell", "input": {"command": "echo x > side.txt"}},
                    ]
                },
                {"text": "made it"},
            ],
        },
        {"match": ".", "replies": [{"text": "ok"}]},
    ]
}


def _session(wk: Wk, workdir: Path, tmp_path: Path) -> str:
    (workdir / "wakeful.toml").write_text('[permissions]\n"*" = "allow"\n')
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    wk("run", "--model", f"scripted:{script}", "hello there")
    sid = json.loads(wk("session", "list", "--format", "json").stdout)[0]["id"]
    wk("run", "--model", f"scripted:{script}", "--session", sid, "make a file")
    return str(sid)


def test_rewind_unrevert_artifacts_and_meta(wk: Wk, workdir: Path, tmp_path: Path):
    sid = _session(wk, workdir, tmp_path)
    assert (workdir / "hello.txt").exists()

    out = json.loads(wk("session", "rewind", sid, "--files", "--format", "json").stdout)
    assert out["files_restored"] == ["hello.txt"] and out["prompt"] == "make a file"
    assert out["shell_calls"] == ["echo x > side.txt"] and len(out["warnings"]) == 1
    assert not (workdir / "hello.txt").exists() and (workdir / "side.txt").exists()
    shown = json.loads(wk("session", "show", sid, "--format", "json").stdout)
    assert "make a file" not in json.dumps(shown["messages"])

    back = json.loads(wk("session", "unrevert", sid, "--format", "json").stdout)
    assert back["files_restored"] == ["hello.txt"] and back["hidden"] == out["hidden"]
    assert (workdir / "hello.txt").read_text() == "hi\n"

    uri = (workdir / "hello.txt").resolve().as_uri()
    listed = json.loads(wk("session", "artifacts", sid, "--format", "json").stdout)["artifacts"]
    assert [(a["kind"], a["uri"]) for a in listed] == [("file", uri)]
    found = json.loads(wk("session", "artifacts", "--uri", uri, "--format", "json").stdout)
    assert [a["session_id"] for a in found["artifacts"]] == [sid]

    wk("session", "meta", sid, "--set", "owner=alice", "--set", "n=3")
    meta = json.loads(wk("session", "meta", sid, "--unset", "n", "--format", "json").stdout)
    assert meta["metadata"]["owner"] == "alice" and "n" not in meta["metadata"]


def test_mistakes_are_one_line(wk: Wk, workdir: Path, tmp_path: Path):
    sid = _session(wk, workdir, tmp_path)
    for args, says in [
        (("session", "rewind", sid, "--turn", "nope"), "no turn nope"),
        (("session", "unrevert", sid), "no rewind to undo"),
        (("session", "artifacts"), "give a session"),
        (("session", "meta", sid, "--set", "bad"), "KEY=VALUE"),
        (("session", "artifacts", sid, "--since", "yesterday"), "ISO time"),
    ]:
        done = wk(*args, check=False)
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    (workdir / "hello.txt").write_text("mine\n")
    done = wk("session", "rewind", sid, "--files", check=False)
    assert done.returncode != 0 and "hello.txt" in done.stderr and "Traceback" not in done.stderr
    assert (workdir / "hello.txt").read_text() == "mine\n"
