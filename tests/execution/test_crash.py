"""Crash tests: a real `wakeful` process is killed with SIGKILL, a new one recovers.

Chosen points use the test-only hook `WAKEFUL_CRASH_AT` (see `wakeful.runner._crashpoints`);
random points kill the process after a random delay, on SQLite and on PostgreSQL. Afterwards
`check_session` asserts the invariants on what the store holds, and the ledger the tools append
to shows that no completed side effect ran twice. `WAKEFUL_CRASH_RANDOM` sets the number of
random kills per backend (50 by default); `WAKEFUL_CRASH_SEED` replays a run.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg import fresh_database
from wakeful.execution._recovery import PARTIAL_RESULT
from wakeful.store import SqlStore, open_store

from .helpers import (
    check_session,
    cli_env,
    create_session,
    finish,
    job_script,
    kill_after,
    ledger_lines,
    make_workspace,
    wakeful,
    write_script,
)

pytestmark = pytest.mark.slow

SID = "ses_crash"


class Scenario:
    """One session with two queued jobs, driven by `wakeful run --session`."""

    def __init__(self, root: Path, db: str | None = None) -> None:
        self.root = root
        self.work = make_workspace(root)
        self.db = db or str(root / "sessions.db")
        self.store: SqlStore = open_store(self.db)
        model = job_script(root / "script.json", ["A", "B"])
        create_session(self.store, SID, model, ["job A", "job B"], workspace=self.work)

    def run(self, crash_at: str | None = None) -> int:
        extra = {"WAKEFUL_CRASH_AT": crash_at} if crash_at else {}
        env = cli_env(self.db, self.root, **extra)
        code, _out, err = finish(wakeful(["run", "--session", SID], env, self.work))
        assert code in (0, -9), err
        return code

    def results_of(self, tag: str) -> Iterator[str]:
        """Tool-result texts answering calls whose command writes `tag`."""
        calls = {
            e.event.call_id  # type: ignore[union-attr]
            for e in self.store.events(SID, types=["tool.started"])
            if f"echo {tag}" in str(e.event.input)  # type: ignore[union-attr]
        }
        for message in self.store.messages(SID):
            for block in message.blocks:
                if getattr(block, "call_id", None) in calls:
                    yield str(block.output)  # type: ignore[misc]


def unanswered_reply(scn: Scenario) -> list[str]:
    """Results of calls the store never saw start (answered by recovery as not run)."""
    started = {c.call_id for c in scn.store.tool_calls(SID)}
    return [
        str(r.output)
        for m in scn.store.messages(SID)
        for r in m.tool_results()
        if r.call_id not in started
    ]


@pytest.fixture
def scn(tmp_path: Path) -> Scenario:
    s = Scenario(tmp_path)
    yield s
    s.store.close()


@pytest.mark.parametrize(
    "point", ["drain.claimed", "receipt.before", "receipt.after", "receipt.after@4"]
)
def test_crash_around_the_receipt_recovers_every_job(scn: Scenario, point: str):
    assert scn.run(point) == -9
    assert scn.run() == 0
    counts = check_session(scn.store, SID, ledger_lines(scn.work))
    assert counts["completed"] == 2
    assert len(ledger_lines(scn.work)) == 10  # nothing was lost: every side effect ran once


def test_crash_mid_stream_keeps_nothing_of_the_cut_reply(scn: Scenario):
    assert scn.run("stream.delta@8") == -9  # inside job A's final streamed answer
    assert scn.run() == 0
    check_session(scn.store, SID, ledger_lines(scn.work))
    finals = [m.text() for m in scn.store.messages(SID) if m.text().startswith("job A finished")]
    assert len(finals) == 1  # the cut stream was live-only; the recovered one is stored once


def test_crash_after_calls_persisted_before_side_effects(scn: Scenario):
    assert scn.run("tool.started") == -9
    assert scn.store.tool_calls(SID)[0].status == "running"
    assert scn.run() == 0
    ledger = ledger_lines(scn.work)
    check_session(scn.store, SID, ledger)
    assert "A.1a" not in ledger and "A.1b" not in ledger  # never replayed
    assert list(scn.results_of("A.1")) == [PARTIAL_RESULT] * 2
    assert [c.status for c in scn.store.tool_calls(SID)][:2] == ["failed", "failed"]


def test_crash_during_a_side_effect(scn: Scenario):
    assert scn.run("tool.during") == -9
    assert scn.run() == 0
    ledger = ledger_lines(scn.work)
    check_session(scn.store, SID, ledger)
    assert ledger["A.2a"] == 1 and "A.2b" not in ledger  # the half that ran, once
    assert list(scn.results_of("A.2")) == [PARTIAL_RESULT]


def test_crash_after_side_effects_before_their_results(scn: Scenario):
    assert scn.run("tool.done") == -9
    assert scn.run() == 0
    ledger = ledger_lines(scn.work)
    check_session(scn.store, SID, ledger)
    assert ledger["A.1a"] == 1 and ledger["A.1b"] == 1  # ran once, not replayed
    assert list(scn.results_of("A.1")) == [PARTIAL_RESULT] * 2


def test_crash_right_after_the_reply_finds_its_calls_durable(scn: Scenario):
    # The reply and its calls' `tool.started` commit together: no crash can leave a reply
    # whose calls the store never saw (recovery still answers such calls from older versions).
    assert scn.run("reply.saved") == -9
    assert [c.status for c in scn.store.tool_calls(SID)] == ["running", "running"]
    assert scn.run() == 0
    ledger = ledger_lines(scn.work)
    check_session(scn.store, SID, ledger)
    assert "A.1a" not in ledger
    assert unanswered_reply(scn) == []
    assert list(scn.results_of("A.1")) == [PARTIAL_RESULT] * 2


def test_crash_during_a_retry_wait_keeps_the_durable_deadline(scn: Scenario):
    assert scn.run("retry.wait") == -9
    state = scn.store.retry_state(SID)
    assert state is not None and state.attempt == 2
    assert scn.run() == 0
    check_session(scn.store, SID, ledger_lines(scn.work))
    retried = [e for e in scn.store.events(SID, types=["receipt.recorded"]) if e.event.attempt == 2]  # type: ignore[union-attr]
    assert retried and retried[0].at_ms >= state.deadline_ms  # waited for the stored deadline


def test_crash_before_the_turn_ended_completes_without_a_request(scn: Scenario):
    assert scn.run("turn.ending") == -9
    receipts = len(scn.store.receipts(SID))
    assert scn.run() == 0
    check_session(scn.store, SID, ledger_lines(scn.work))
    turns = scn.store.turns(SID)
    assert [t.status for t in turns] == ["completed", "completed"]
    job_a = [r for r in scn.store.receipts(SID) if r.turn_id == turns[0].turn_id]
    assert len(job_a) == receipts  # no request for job A after the crash


def test_crash_during_recovery_then_recover_again(scn: Scenario):
    assert scn.run("tool.started") == -9
    assert scn.run("drain.healed") == -9  # the second process dies right after healing
    assert scn.run() == 0
    check_session(scn.store, SID, ledger_lines(scn.work))


def test_repeated_crashes_of_one_turn_are_bounded(scn: Scenario):
    for _ in range(4):  # receipt.after of step 1, every time: the turn never gets further
        assert scn.run("receipt.after") == -9
    assert scn.run() == 0
    check_session(scn.store, SID, ledger_lines(scn.work))
    first = scn.store.turns(SID)[0]
    assert first.status == "failed" and "recovery gave up after 3 attempts" in (first.error or "")
    assert scn.store.turns(SID)[1].status == "completed"  # the next input is not stranded


@pytest.mark.postgres
@pytest.mark.parametrize("point", ["tool.during", "retry.wait"])
def test_crash_points_on_postgres(tmp_path: Path, point: str):
    with fresh_database() as url:
        scn = Scenario(tmp_path, url)
        try:
            assert scn.run(point) == -9
            assert scn.run() == 0
            counts = check_session(scn.store, SID, ledger_lines(scn.work))
            assert counts["completed"] == 2
        finally:
            scn.store.close()


def test_random_kills(tmp_path: Path, db_url: str):
    kills_wanted = int(os.environ.get("WAKEFUL_CRASH_RANDOM", "50"))
    seed = int(os.environ.get("WAKEFUL_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    work = make_workspace(tmp_path)
    db = db_url
    store = open_store(db)
    tags = [f"R{i}" for i in range(5 * kills_wanted + 8)]
    model = job_script(tmp_path / "script.json", tags)
    env = cli_env(db, tmp_path)
    fresh = iter(tags)
    create_session(store, SID, model, [f"job {next(fresh)}" for _ in range(3)], workspace=work)
    kills = runs = 0
    while kills < kills_wanted:
        top_up = 4 - len(store.pending(SID))  # enough work that most kills land inside it
        create_session(store, SID, model, [f"job {next(fresh)}" for _ in range(top_up)])
        args = ["run", "--session", SID] if rng.random() < 0.7 else ["worker", "--once"]
        proc = wakeful(args, env, work)
        kills += kill_after(proc, rng.uniform(0.3, 1.5))
        proc.communicate()
        runs += 1
    code, _out, err = finish(wakeful(["run", "--session", SID], env, work))
    assert code in (0, 1), err  # 1: the last turn may have exhausted its recovery attempts
    counts = check_session(store, SID, ledger_lines(work))
    assert counts["completed"] > 0, f"seed {seed}: no turn completed in {runs} runs"
    print(f"seed {seed}: {kills} kills in {runs} runs; {counts}")
    store.close()


def test_crash_during_compaction(tmp_path: Path):
    work = make_workspace(tmp_path)
    with (work / "wakeful.toml").open("a") as f:
        f.write("[compaction]\nreserved = 500\n")
    db = str(tmp_path / "sessions.db")
    store = open_store(db)
    pad = "lorem ipsum dolor sit amet " * 100  # ~700 tokens a reply: compaction on turn 6
    model = write_script(
        tmp_path / "script.json",
        [
            {
                "match": "^Stop the work here",
                "replies": [{"text": "## Objective\n- go on"}],
            },  # cached
            {
                "match": "^Summarize the conversation below",
                "replies": [{"text": "## Objective\n- go on"}],
            },
            {"match": "^talk", "replies": [{"text": "reply " + pad}]},
        ],
        context_window=6000,
        max_output_tokens=500,
    )
    create_session(store, SID, model, [f"talk {n}" for n in range(7)], workspace=work)
    crash = cli_env(db, tmp_path, WAKEFUL_CRASH_AT="compaction.summarizing")
    code, _out, err = finish(wakeful(["run", "--session", SID], crash, work))
    assert code == -9, err
    assert store.events(SID, types=["compaction.ended"]) == []
    code, _out, err = finish(wakeful(["run", "--session", SID], cli_env(db, tmp_path), work))
    assert code == 0, err
    counts = check_session(store, SID)
    assert counts["completed"] == 7
    assert len(store.events(SID, types=["compaction.ended"])) == 1
    summaries = [r for r in store.receipts(SID) if r.purpose == "compaction"]
    assert len(summaries) == 2  # the one the crash cut short, and the one that finished
    store.close()


def test_a_read_only_step_is_durable_with_its_results_or_not_at_all(tmp_path: Path):
    # A reply whose calls are all read-only commits together with their results: killed
    # between them, the store holds neither (nothing outside the session changed), and the
    # next process asks the step again; no call is ever left `running`.
    work = make_workspace(tmp_path)
    (work / "notes.txt").write_text("the notes\n")
    reads = {
        "tool_calls": [
            {"name": "read_file", "input": {"path": "notes.txt"}},
            {"name": "goal_set", "input": {"goal": "summarize the notes"}},
        ]
    }
    rule = {"match": "^summarize$", "replies": [reads, {"text": "the notes say: the notes"}]}
    db = str(tmp_path / "sessions.db")
    store = open_store(db)
    try:
        create_session(
            store,
            SID,
            write_script(tmp_path / "script.json", [rule]),
            ["summarize"],
            workspace=work,
        )
        env = cli_env(db, tmp_path, WAKEFUL_CRASH_AT="tool.started")
        code, _out, err = finish(wakeful(["run", "--session", SID], env, work))
        assert code == -9, err
        assert [m.role for m in store.messages(SID)] == ["user"]  # no reply without results
        assert store.tool_calls(SID) == []
        assert len(store.receipts(SID)) == 1
        code, _out, err = finish(wakeful(["run", "--session", SID], cli_env(db, tmp_path), work))
        assert code == 0, err
        check_session(store, SID, {})
        assert [c.status for c in store.tool_calls(SID)] == ["completed", "completed"]
        assert [m.role for m in store.messages(SID)] == [
            "user",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert store.messages(SID)[-1].text() == "the notes say: the notes"
    finally:
        store.close()


def test_a_crash_after_a_boundary_that_wrote_the_next_receipt_recovers(tmp_path: Path):
    # After a read-only step, the step boundary writes its reply and results and the next
    # step's receipt in one commit (`RequestBuilder.build_ahead`); killed right after it
    # (`receipt.after` of step 2), the store holds step 1 whole and a receipt with no reply:
    # the state a kill after `receipt.after` always leaves. The next process asks step 2 again.
    work = make_workspace(tmp_path)
    reads = {"tool_calls": [{"name": "goal_set", "input": {"goal": "read on"}}]}
    rule = {"match": "^summarize$", "replies": [reads, {"text": "all read"}]}
    db = str(tmp_path / "sessions.db")
    store = open_store(db)
    try:
        create_session(
            store,
            SID,
            write_script(tmp_path / "script.json", [rule]),
            ["summarize"],
            workspace=work,
        )
        env = cli_env(db, tmp_path, WAKEFUL_CRASH_AT="receipt.after@2")
        code, _out, err = finish(wakeful(["run", "--session", SID], env, work))
        assert code == -9, err
        assert [m.role for m in store.messages(SID)] == ["user", "assistant", "user"]
        assert [c.status for c in store.tool_calls(SID)] == ["completed"]
        assert [(r.step, r.attempt) for r in store.receipts(SID)] == [(1, 1), (2, 1)]
        code, _out, err = finish(wakeful(["run", "--session", SID], cli_env(db, tmp_path), work))
        assert code == 0, err
        check_session(store, SID, {})
        assert store.messages(SID)[-1].text() == "all read"
        assert len(store.receipts(SID)) == 3  # step 2's request was sent once, after recovery
    finally:
        store.close()
