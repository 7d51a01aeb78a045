"""Finding sessions from the command line: `run` names its session, unique id prefixes work
everywhere, `session list` tells look-alike sessions apart; `session delete` asks; read
commands never create a store; the environment overrides configuration files."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Wk, write_script
from wakeful.store import open_store

HELLO = [{"match": ".", "replies": [{"text": "hello back"}]}]


def _run_json(wk: Wk, *args: str) -> dict:
    return json.loads(wk("run", "--format", "json", *args).stdout)


def test_run_prints_the_session_id_on_stderr_also_for_a_fork(wk: Wk, workdir: Path):
    model = write_script(workdir, HELLO)
    first = wk("run", "--model", model, "hi")
    assert first.stdout == "hello back\n"
    [line] = [ln for ln in first.stderr.splitlines() if ln.startswith("session ")]
    sid = line.split()[1]
    assert re.fullmatch(r"ses_[0-9a-f]{24}", sid)
    forked = wk("run", "--model", model, "--session", sid, "--fork", "again")
    [line] = [ln for ln in forked.stderr.splitlines() if ln.startswith("session ")]
    assert line.endswith(f"(fork of {sid})") and line.split()[1] != sid
    assert "session" not in _run_json(wk, "--model", model, "json mode").get("text", "")


def test_unique_prefixes_are_accepted_and_ambiguous_ones_listed(wk: Wk, workdir: Path, db_url):
    model = write_script(workdir, HELLO)
    store = open_store(db_url)
    store.create_session("ses_aaaa0000000000000000000a", title="one")
    store.create_session("ses_aaaa1111111111111111111b", title="two")
    store.close()
    shown = json.loads(wk("session", "show", "ses_aaaa0", "--format", "json").stdout)
    assert shown["id"] == "ses_aaaa0000000000000000000a"
    assert json.loads(wk("session", "show", "aaaa1", "--format", "json").stdout)["title"] == "two"
    out = _run_json(wk, "--model", model, "--session", "ses_aaaa1", "go")
    assert out["session_id"] == "ses_aaaa1111111111111111111b"
    log = wk("log", "--session", "aaaa1", "--format", "jsonl").stdout.splitlines()
    assert {json.loads(x)["session_id"] for x in log} == {"ses_aaaa1111111111111111111b"}
    assert wk("debug", "prompt", "--session", "aaaa1", "--step", "1").returncode == 0
    wk("session", "archive", "aaaa0")
    assert json.loads(wk("session", "show", "aaaa0", "--format", "json").stdout)["archived"]
    for args in (
        ("session", "show", "aaaa"),
        ("run", "--model", model, "--session", "aaaa", "x"),
        ("log", "--session", "aaaa"),
        ("send", "--session", "aaaa", "x"),
        ("interrupt", "--session", "aaaa"),
        ("session", "delete", "--yes", "aaaa"),
    ):
        done = wk(*args, check=False)
        assert done.returncode == 2, args
        assert done.stderr.strip() == (
            "error: session id prefix 'aaaa' is ambiguous: "
            "ses_aaaa0000000000000000000a, ses_aaaa1111111111111111111b"
        ), args
    missing = wk("session", "show", "ses_bbbb", check=False)
    assert missing.returncode == 2 and missing.stderr.strip() == "error: no session ses_bbbb"


def test_session_list_tells_look_alikes_apart(wk: Wk, workdir: Path, db_url):
    model = write_script(workdir, HELLO)
    sid = _run_json(wk, "--model", model, "same title")["session_id"]
    fork = _run_json(wk, "--model", model, "--session", sid, "--fork", "more")["session_id"]
    store = open_store(db_url)
    store.create_session(parent_id=sid, title="a child")
    store.close()
    lines = wk("session", "list").stdout.splitlines()
    assert lines[0].split() == ["ID", "UPDATED", "STATUS", "TURNS", "MODEL", "TITLE"]
    [orig] = [ln for ln in lines if ln.startswith(sid)]
    [forked] = [ln for ln in lines if ln.startswith(fork)]
    assert f"⑂ fork of {sid[:12]}" in forked and "⑂" not in orig
    assert "+1 child session" in orig and "same title" in orig and "scripted:" in orig
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d\s+idle\s+1\s", orig)  # local time, turns
    children = wk("session", "list", "--no-roots").stdout
    assert f"↳ child of {sid[:12]}" in children
    rows = {r["id"]: r for r in json.loads(wk("session", "list", "--format", "json").stdout)}
    assert rows[sid]["turns"] == 1 and rows[sid]["child_sessions"] == 1
    assert rows[fork]["forked_from"] == sid
    assert f"⑂ fork of {sid} (through seq" in wk("session", "show", fork).stdout
    assert "child sessions: ses_" in wk("session", "show", sid).stdout


def _on_terminal(cli_env: dict, workdir: Path, args: list[str], answer: str):
    """Run wakeful with a pseudo-terminal as stdin, typing `answer`."""
    main, sub = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "wakeful", *args],
            cwd=workdir,
            env=cli_env,
            stdin=sub,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(main, answer.encode())
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(main)
        os.close(sub)
    return proc.returncode, out, err


def test_session_delete_asks_on_a_terminal(wk: Wk, workdir: Path, cli_env: dict):
    model = write_script(workdir, HELLO)
    sid = _run_json(wk, "--model", model, "keep me")["session_id"]
    piped = wk("session", "delete", sid, check=False)
    assert piped.returncode == 2
    assert piped.stderr.strip() == "error: session delete needs --yes when not on a terminal"
    code, out, err = _on_terminal(cli_env, workdir, ["session", "delete", sid[:10]], "n\n")
    assert code != 0 and "for good?" in out and "deleted" not in out
    assert wk("session", "show", sid).returncode == 0
    code, out, err = _on_terminal(cli_env, workdir, ["session", "delete", sid[:10]], "y\n")
    assert code == 0 and "deleted 1 sessions" in out, err
    sid = _run_json(wk, "--model", model, "drop me")["session_id"]
    assert "deleted 1 sessions" in wk("session", "delete", "--yes", sid).stdout


@pytest.mark.parametrize(
    "args",
    [
        ["session", "list"],
        ["session", "show", "ses_x"],
        ["log", "--session", "ses_x"],
        ["session", "search", "word"],
        ["session", "export", "ses_x"],
        ["debug", "prompt", "--session", "ses_x", "--step", "1"],
        ["send", "--session", "ses_x", "hi"],
        ["interrupt", "--session", "ses_x"],
    ],
)
def test_read_commands_never_create_a_store(wk: Wk, tmp_path: Path, args: list[str]):
    typo = tmp_path / "typo" / "sesions.db"
    (tmp_path / "typo").mkdir()
    done = wk(*args, "--db", str(typo), check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: no store at {typo}"
    assert not typo.exists()


def test_a_writing_command_creates_the_store(wk: Wk, workdir: Path, tmp_path: Path):
    fresh = tmp_path / "fresh.db"
    wk("run", "--model", write_script(workdir, HELLO), "--db", str(fresh), "hi")
    assert fresh.exists()


def test_the_environment_overrides_configuration_files(wk: Wk, workdir: Path, cli_env: dict):
    (workdir / "wakeful.toml").write_text('[providers]\nmodel = "scripted:/nowhere.json"\n')
    model = write_script(workdir, HELLO)
    flag = workdir.parent / "flag.json"
    flag.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "from the flag"}]}]}))
    cli_env["WAKEFUL_MODEL"] = model
    out = _run_json(wk, "hi")
    assert out["text"] == "hello back"
    shown = json.loads(wk("config", "show", "--format", "json").stdout)
    assert shown["providers"]["model"] == model
    assert (
        _run_json(wk, "--model", f"scripted:{flag}", "hi")["text"] == "from the flag"
    )  # flags win
    cli_env["WAKEFUL_AGENT"] = "ghost"
    done = wk("run", "hi", check=False)
    assert done.returncode == 2 and "ghost" in done.stderr


def test_the_chat_lists_sessions_with_model_and_fork_marker(tmp_path: Path):
    import pexpect

    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": HELLO}))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {
        "WAKEFUL_DB": str(tmp_path / "chat.db"),
        "HOME": str(tmp_path),
        "TERM": "dumb",
        "XDG_CONFIG_HOME": str(tmp_path / ".c"),
        "XDG_DATA_HOME": str(tmp_path / ".l"),
    }
    child = pexpect.spawn(
        sys.executable,
        ["-m", "wakeful", "chat", "--model", f"scripted:{script}"],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )
    try:
        child.expect("/quit")
        child.sendline("hi")
        child.expect("hello back")
        child.sendline("/fork")
        child.expect(r"forked into (ses_[0-9a-f]{24})")
        child.sendline("/sessions")
        child.expect(r"ses_[0-9a-f]{24}  \S+ \S+  scripted:\S*  hi  ⑂ fork of ses_")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


@pytest.mark.parametrize(
    "args",
    [
        ["session", "list"],
        ["session", "show", "ses_x"],
        ["send", "--session", "ses_x", "hi"],
    ],
)
def test_a_server_that_cannot_be_reached_is_one_line(wk: Wk, args: list[str]):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    done = wk(*args, "--db", url, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: cannot reach the server at {url}: ")
    assert len(done.stderr.strip().splitlines()) == 1
