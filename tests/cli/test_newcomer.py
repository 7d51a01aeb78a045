"""The first ten minutes (issue 38): no silent failures. Without a usable model a command says
what to do and writes nothing; listing before the first run lists nothing; `session show` says
why a turn failed or blocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import write_script

# The CLI as a process without the `local` extra: `llama_cpp` cannot be imported (a None in
# `sys.modules` is what `importlib.util.find_spec` reads as "not installed").
NO_LOCAL = "import sys; sys.modules['llama_cpp'] = None; from wakeful.cli import main; main()"


def newcomer(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A workspace, the environment of a person with no key and no configuration, and where
    the default store would be."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env = {k: v for k, v in env.items() if not k.startswith("WAKEFUL_")}
    env |= {
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").mkdir()
    return work, env, tmp_path / "data" / "wakeful" / "sessions.db"


def wakeful(
    work: Path, env: dict[str, str], *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", NO_LOCAL, *args],
        cwd=work,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_and_chat_without_a_model_say_what_to_do_and_write_nothing(tmp_path: Path):
    work, env, db = newcomer(tmp_path)
    for args, stdin in ((("run", "hi"), ""), (("chat",), "hi\n")):
        done = wakeful(work, env, *args, stdin=stdin)
        assert done.returncode == 2, done
        assert done.stdout == ""
        [line] = done.stderr.splitlines()  # one line, no traceback
        assert line.startswith("error: ")
        for hint in (
            "pip install 'wakeful[local]'",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "--model",
        ):
            assert hint in line, line
        assert not db.exists() and not db.parent.exists()


def test_listing_before_the_first_run_lists_nothing_and_creates_nothing(tmp_path: Path):
    work, env, db = newcomer(tmp_path)
    for args in (("session", "list"), ("session", "search", "anything"), ("schedule", "list")):
        done = wakeful(work, env, *args, "--format", "json")
        assert (done.returncode, json.loads(done.stdout)) == (0, []), done
    usage = wakeful(work, env, "usage", "--format", "json")
    assert usage.returncode == 0 and json.loads(usage.stdout)["total"]["requests"] == 0, usage
    idle = wakeful(work, env, "worker", "--once")
    assert idle.returncode == 0 and "nothing written" in idle.stderr
    table = wakeful(work, env, "session", "list")
    assert table.returncode == 0 and table.stdout == ""
    assert "no sessions yet" in table.stderr and "wakeful run" in table.stderr
    assert not db.exists() and not db.parent.exists()
    # a store named and missing is still a mistake: no new empty database
    typo = wakeful(work, env, "session", "list", "--db", str(tmp_path / "typo.db"))
    assert typo.returncode == 2 and "no store at" in typo.stderr
    assert not (tmp_path / "typo.db").exists()


def test_session_show_says_why_a_turn_failed_or_blocked(wk, workdir: Path):
    model = write_script(
        workdir,
        [
            {"match": "^fail", "replies": [{"error": {"kind": "invalid_request"}}]},
            {"match": ".", "replies": [{"text": "fine"}]},
        ],
    )
    failed = wk("run", "--model", model, "--format", "json", "fail please", check=False)
    assert failed.returncode == 3  # blocked: the request is refused
    out = json.loads(failed.stdout)
    shown = wk("session", "show", out["session_id"]).stdout
    assert out["error"] and out["error"] in shown
    # the session's model file goes away: the next turn is blocked, and show says why
    sid = json.loads(wk("run", "--model", model, "--format", "json", "hello").stdout)["session_id"]
    Path(model.removeprefix("scripted:")).unlink()
    blocked = wk("run", "--session", sid, "--format", "json", "again", check=False)
    assert blocked.returncode == 3
    reason = json.loads(blocked.stdout)["error"]
    assert reason and reason in wk("session", "show", sid).stdout
