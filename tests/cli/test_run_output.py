"""What `wakeful run` prints in text mode (issue 38 item 7): a reply after a steer starts on a
line of its own, never glued to the one before, and an interrupted reply's partial line is
ended before `[interrupted]` is printed."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import write_script
from tests.cli.test_cli import wait_for
from wakeful.store import open_store

SLOW = "working slowly on it " * 16


def running_session(db_url: str) -> str:
    store = open_store(db_url)
    try:
        return wait_for(
            lambda: (p := store.list_sessions().sessions) and p[0].status == "running" and p[0].id
        )
    finally:
        store.close()


def test_a_reply_after_a_steer_starts_on_its_own_line(wk, spawn, workdir: Path, db_url: str):
    model = write_script(
        workdir,
        [
            {"match": "^start", "replies": [{"text": SLOW.strip() + " END."}, {"text": "never"}]},
            {"match": "^steer", "replies": [{"text": "steer seen"}]},
        ],
        chunk_chars=4,
        chunk_delay_ms=100,
    )
    runner = spawn("run", "--model", model, "start")
    sid = running_session(db_url)
    wk("send", sid, "steer this")
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, err
    assert out.splitlines() == [SLOW.strip() + " END.", "steer seen"]


def test_an_interrupted_reply_ends_its_line(wk, spawn, workdir: Path, db_url: str):
    model = write_script(
        workdir,
        [{"match": ".", "replies": [{"text": "x" * 400}]}],
        chunk_chars=2,
        chunk_delay_ms=100,
    )
    runner = spawn("run", "--model", model, "go")
    sid = running_session(db_url)
    wait_for(lambda: "interrupt" in wk("interrupt", sid).stdout)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 130, err
    assert out.startswith("xx") and out.endswith("\n")
    assert "[interrupted]" in err
