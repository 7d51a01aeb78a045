"""The command line through real subprocesses, on both store backends."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli.conftest import write_script
from wakeful.store import open_store

HELLO = [{"match": ".", "replies": [{"text": "hello back"}]}]


def sessions(wk) -> list[dict]:
    return json.loads(wk("session", "list", "--format", "json").stdout)


def wait_for(predicate, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def test_run_json_contract_and_listing(wk, workdir: Path):
    model = write_script(workdir, HELLO)
    out = json.loads(wk("run", "--model", model, "--format", "json", "say hi").stdout)
    assert {"session_id", "turn_id", "outcome", "text", "usage"} <= set(out)
    assert out["outcome"] == "completed" and out["text"] == "hello back"
    [row] = sessions(wk)
    assert row["id"] == out["session_id"]
    assert {"id", "parent_id", "title", "status", "updated_at"} <= set(row)
    shown = json.loads(wk("session", "show", row["id"], "--format", "json").stdout)
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant"]


def test_continue_and_fork(wk, workdir: Path):
    model = write_script(workdir, HELLO)
    first = json.loads(wk("run", "--model", model, "--format", "json", "one").stdout)
    again = json.loads(wk("run", "--model", model, "--format", "json", "--continue", "two").stdout)
    assert again["session_id"] == first["session_id"]
    fork = json.loads(
        wk(
            "run",
            "--model",
            model,
            "--format",
            "json",
            "--session",
            first["session_id"],
            "--fork",
            "three",
        ).stdout
    )
    assert fork["session_id"] != first["session_id"]
    original = json.loads(wk("session", "show", first["session_id"], "--format", "json").stdout)
    forked = json.loads(wk("session", "show", fork["session_id"], "--format", "json").stdout)
    assert len(original["messages"]) == 4
    assert forked["messages"][:4] == original["messages"] and len(forked["messages"]) == 6
    assert forked["forked_from"] == first["session_id"]


def test_send_steers_into_a_running_session_and_queue_waits(wk, spawn, workdir: Path, db_url: str):
    model = write_script(
        workdir,
        [
            {
                "match": "^start",
                "replies": [
                    {"text": "working slowly on it " * 16},
                    {"text": "never"},
                ],
            },
            {"match": "^steer", "replies": [{"text": "steer seen"}]},
            {"match": "^queued", "replies": [{"text": "queued seen"}]},
        ],
        chunk_chars=4,
        chunk_delay_ms=50,
    )
    runner = spawn("run", "--model", model, "--format", "json", "start")
    store = open_store(db_url)
    try:
        sid = wait_for(
            lambda: (p := store.list_sessions().sessions) and p[0].status == "running" and p[0].id
        )
        wk("send", "--session", sid, "steer this")
        wk("send", "--session", sid, "--queue", "queued item")
        out, err = runner.communicate(timeout=60)
        assert runner.returncode == 0, err
        texts = [m.text() for m in store.messages(sid)]
        assert texts.index("steer this") < texts.index("steer seen") < texts.index("queued item")
        assert texts[-1] == "queued seen"
        assert store.pending(sid) == []
    finally:
        store.close()


def test_interrupt_from_another_process(wk, spawn, workdir: Path, db_url: str):
    model = write_script(
        workdir,
        # about 18 s of streaming: under load the interrupt took 2-8 s to arrive, longer than
        # the 6 s the answer streamed before
        [{"match": ".", "replies": [{"text": "x" * 1200}]}],
        chunk_chars=2,
        chunk_delay_ms=30,
    )
    runner = spawn("run", "--model", model, "--format", "json", "long one")
    store = open_store(db_url)
    try:
        sid = wait_for(
            lambda: (p := store.list_sessions().sessions) and p[0].status == "running" and p[0].id
        )
        wk("interrupt", "--session", sid)
        out, _ = runner.communicate(timeout=60)
        assert runner.returncode == 130
        assert json.loads(out)["outcome"] == "interrupted"
        assert store.get_session(sid).status == "idle"
    finally:
        store.close()


def test_prune_preview_counts_equal_delete(wk, workdir: Path):
    model = write_script(workdir, HELLO)
    for prompt in ("a", "b"):
        wk("run", "--model", model, prompt)
    preview = wk("session", "prune", "--older-than", "0").stdout
    assert preview.startswith("would prune 2 sessions (0 child sessions")
    deleted = wk("session", "prune", "--older-than", "0", "--delete", "--yes").stdout
    assert deleted.replace("deleted", "would prune") == preview
    assert sessions(wk) == []


def test_export_then_import_gives_an_equal_transcript(wk, workdir: Path):
    model = write_script(workdir, HELLO)
    sid = json.loads(wk("run", "--model", model, "--format", "json", "export me").stdout)[
        "session_id"
    ]
    exported = workdir / "s.jsonl"
    wk("session", "export", sid, "-o", str(exported))
    new_id = wk("session", "import", str(exported)).stdout.strip()
    a = json.loads(wk("session", "show", sid, "--format", "json").stdout)["messages"]
    b = json.loads(wk("session", "show", new_id, "--format", "json").stdout)["messages"]
    assert a == b and new_id != sid


def test_log_follow_sees_events_from_another_process(wk, spawn, workdir: Path):
    model = write_script(workdir, HELLO)
    sid = json.loads(wk("run", "--model", model, "--format", "json", "first").stdout)["session_id"]
    # The follower stops once it has printed the second input (read as it comes), not after an
    # idle time: under load a `run` can take longer to start than any short idle timeout.
    follower = spawn(
        "log", "--session", sid, "--follow", "--format", "jsonl", "--idle-timeout", "60"
    )
    time.sleep(0.5)
    wk("run", "--model", model, "--session", sid, "second")
    assert follower.stdout is not None
    lines = []
    for raw in follower.stdout:
        lines.append(json.loads(raw))
        if lines[-1].get("data", {}).get("payload") == {"text": "second"}:
            break
    follower.terminate()
    follower.wait(timeout=30)
    seqs = [x["seq"] for x in lines if x.get("type") != "sync"]
    assert seqs == list(range(1, len(seqs) + 1))
    assert sum(1 for x in lines if x.get("type") == "sync") == 1
    assert any(x.get("data", {}).get("payload") == {"text": "second"} for x in lines)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("session", "show", "ses_nope"), "no session ses_nope"),
        (("run", "--continue", "hi"), "--continue"),
        (("run", "--fork", "hi"), "--fork needs a SESSION or --continue"),
        (("run", "--agent", "ghost", "hi"), "unknown agent"),
        (("run", "--model", "bogus:thing", "hi"), "bogus"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(wk, db_url, args, needle):
    open_store(db_url).close()  # a store exists: the error is about the argument
    done = wk(*args, check=False)
    assert done.returncode != 0
    assert needle in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_malformed_config_names_file_and_key(wk, workdir: Path):
    (workdir / "wakeful.toml").write_text("[compaction]\nthreshold_percent = 500\n")
    done = wk("config", "show", check=False)
    assert (
        done.returncode == 2
        and "wakeful.toml" in done.stderr
        and "threshold_percent" in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_unwritable_database_path(wk, cli_env):
    done = wk("session", "list", "--db", "/proc/nope/sessions.db", check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr


def test_a_reply_cut_by_the_output_limit_shows_as_truncated(wk, workdir: Path):
    model = write_script(
        workdir, [{"match": ".", "replies": [{"text": "Once upon a", "finish": "length"}]}]
    )
    out = json.loads(
        wk(
            "run", "--model", model, "--max-output-tokens", "7", "--format", "json", "tell a story"
        ).stdout
    )
    assert out["outcome"] == "completed" and out["truncated"] is True
    assert out["turns"][0]["truncated"] is True
    sid = out["session_id"]
    text = wk("run", "--session", sid, "--max-output-tokens", "7", "go on")
    assert text.stdout.strip() == "Once upon a"
    assert "[truncated] the reply stopped at the output limit" in text.stderr
    shown = wk("session", "show", sid).stdout
    assert "[assistant, truncated at the output limit] Once upon a" in shown
    assert "run " in shown and "completed (truncated)" in shown
    data = json.loads(wk("session", "show", sid, "--format", "json").stdout)
    assert [r["truncated"] for r in data["runs"]] == [True, True]
    assert data["messages"][1]["metadata"]["truncated"] is True
    receipt = json.loads(
        wk("debug", "prompt", "--session", sid, "--step", "1", "--format", "json").stdout
    )
    [params] = [s for s in receipt["sections"] if s["id"] == "params"]
    assert json.loads(params["content"])["max_output_tokens"] == 7 and receipt["verified"]


def test_the_output_limit_comes_from_config_too(wk, workdir: Path):
    model = write_script(workdir, HELLO)
    (workdir / "wakeful.toml").write_text("[providers]\nmax_output_tokens = 33\n")
    sid = json.loads(wk("run", "--model", model, "--format", "json", "hi").stdout)["session_id"]
    receipt = json.loads(
        wk("debug", "prompt", "--session", sid, "--step", "1", "--format", "json").stdout
    )
    [params] = [s for s in receipt["sections"] if s["id"] == "params"]
    assert json.loads(params["content"])["max_output_tokens"] == 33
    done = wk("run", "--max-output-tokens", "0", "hi", check=False)
    assert done.returncode == 2 and "--max-output-tokens" in done.stderr
