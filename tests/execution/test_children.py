"""Child sessions through the `task` tool: foreground, background reports, interrupts, crashes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.allow import ALLOW_WRITES
from wakeful.config import Config, ExecutionConfig, RetryConfig
from wakeful.events import InputEnqueued
from wakeful.execution import Runtime
from wakeful.execution._delegation import lineage_of
from wakeful.runner import LiveEvent
from wakeful.runner._runs import run_records
from wakeful.runner._tool_step import INTERRUPTED_RESULT
from wakeful.runner.tools import Lineage, ToolFailure
from wakeful.store import _inbox, open_store

from .helpers import (
    check_session,
    cli_env,
    create_session,
    finish,
    make_workspace,
    wakeful,
    write_script,
)

CONFIG = Config(
    permissions=ALLOW_WRITES,
    retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    execution=ExecutionConfig(poll_interval_ms=10, lease_ms=300),
)


def task(prompt: str, **more: object) -> dict[str, object]:
    return {"tool_calls": [{"name": "task", "input": {"prompt": prompt, **more}}]}


RULES = [
    {"match": "^child: greet$", "replies": [{"text": "hello from the child"}]},
    # 225 chunks: at 3 ms each the child outlasts the rest of its parent's turn even on a slow,
    # loaded machine (at 12 chunks a parent turn slower than 33 ms met the report still running)
    {"match": "^child: slow$", "replies": [{"text": "child report body " * 200}]},
    {"match": "^child: nest$", "replies": [task("child: greet"), {"text": "could not nest"}]},
    {"match": "^parent fg$", "replies": [task("child: greet"), {"text": "parent done"}]},
    {
        "match": "^parent labels$",
        "replies": [task("child: greet"), task("child: greet"), {"text": "parent done"}],
    },
    {
        "match": "^parent names$",
        "replies": [
            task("child: greet", label="greeter"),
            task("child: greet", label="greeter"),
            task("child: greet", resume="greeter"),
            task("child: greet"),
            {"text": "parent done"},
        ],
    },
    {"match": "^parent nest$", "replies": [task("child: nest"), {"text": "parent done"}]},
    {"match": "^parent slow fg$", "replies": [task("child: slow"), {"text": "never"}]},
    {
        "match": "^parent bad agent$",
        "replies": [task("child: greet", agent="nope"), {"text": "ok"}],
    },
    {
        "match": "^parent bg$",
        "replies": [
            task("child: slow", background=True),
            {"text": "waiting for the child"},
            {"text": "got the report"},
        ],
    },
    {
        "match": "^parent bg busy$",
        "replies": [
            task("child: greet", background=True),
            {"tool_calls": [{"name": "shell", "input": {"command": "sleep 0.6"}}]},
            {"text": "got the report"},
        ],
    },
]


def runtime(db: str, tmp_path: Path, *, delay_ms: int = 0) -> Runtime:
    model = write_script(tmp_path / "script.json", RULES, chunk_delay_ms=delay_ms)
    return Runtime(db, model=model, workspace=tmp_path, config=CONFIG)


def children_of(rt: Runtime, parent: str) -> list[str]:
    page = rt.store.list_sessions(roots_only=False, limit=100)
    return [s.id for s in page.sessions if s.parent_id == parent]


def reports(rt: Runtime, parent: str) -> list[InputEnqueued]:
    return [
        e.event
        for e in rt.store.events(parent, types=["inbox.enqueued"])
        if e.event.kind == "subagent_report"  # type: ignore[union-attr]
    ]  # type: ignore[misc]


async def test_foreground_child_returns_its_final_text(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path)
    [turn] = await rt.run("parent fg")
    assert turn.outcome == "completed" and turn.final_text == "parent done"
    parent = rt.store.list_sessions().sessions[0].id
    [child] = children_of(rt, parent)
    row = rt.store.get_session(child)
    assert (row.parent_id, row.root_id) == (parent, parent)
    assert row.input_tokens > 0 and rt.store.turns(child)[0].status == "completed"
    [result] = [r for m in rt.store.messages(parent) for r in m.tool_results()]
    assert result.output == "hello from the child" and not result.is_error
    assert result.metadata == {"child_session_id": child, "outcome": "completed"}
    assert [s.id for s in rt.store.list_sessions().sessions] == [parent]  # roots only
    for sid in (parent, child):
        check_session(rt.store, sid)
    await rt.aclose()


async def test_a_child_records_its_parent_turn_call_depth_label_and_resume_chain(
    db_url: str, tmp_path: Path
):
    """Issue 37 item 12. On main a child recorded only its parent session (and the task tool
    took no label and could not resume a child)."""
    rt = runtime(db_url, tmp_path)
    await rt.run("parent labels")
    parent = rt.store.list_sessions().sessions[0].id
    [parent_run] = run_records(rt.store, parent)
    assert parent_run.depth == 0 and parent_run.parent_call_id is None
    calls = [c.id for m in rt.store.messages(parent) for c in m.tool_calls()]
    kids = sorted(children_of(rt, parent), key=lambda c: rt.store.get_session(c).created_ms)
    lineages = [lineage_of(rt.store, c) for c in kids]
    assert [(x.label, x.depth, x.parent_call_id, x.parent_turn_id) for x in lineages if x] == [
        ("child-1", 1, calls[0], parent_run.id),
        ("child-2", 1, calls[1], parent_run.id),
    ]
    assert lineage_of(rt.store, parent) is None
    first = kids[0]
    [run] = run_records(rt.store, first)
    assert (run.depth, run.label, run.parent_call_id, run.resumed_from) == (
        1,
        "child-1",
        calls[0],
        None,
    )
    # A later call resumes the first child: a new turn of it, naming the turn it continues.
    again = Lineage(turn_id="turn_later", call_id="call_later", resume=first)
    done = await rt.children.delegate(parent, "child: greet", None, False, lineage=again)
    assert (done.child_id, done.outcome) == (first, "completed")
    one, two = run_records(rt.store, first)
    assert (two.resumed_from, two.parent_call_id, two.label, two.depth) == (
        one.id,
        "call_later",
        "child-1",
        1,
    )
    # A host's own label (the spec's host-assigned `label`) when it delegates itself.
    named = await rt.children.delegate(
        parent, "child: greet", None, False, lineage=Lineage(label="greeter")
    )
    assert lineage_of(rt.store, named.child_id).label == "greeter"  # type: ignore[union-attr]
    kids.append(named.child_id)
    with pytest.raises(ToolFailure, match="not a child"):
        await rt.children.delegate(first, "x", None, False, lineage=Lineage(resume=kids[1]))
    with pytest.raises(ToolFailure, match="runs in the foreground"):
        await rt.children.delegate(parent, "x", None, True, lineage=Lineage(resume=first))
    for sid in (parent, *kids):
        check_session(rt.store, sid)
    await rt.aclose()


async def test_the_model_labels_a_child_and_resumes_it_by_its_label(db_url: str, tmp_path: Path):
    """Issue 37 item 12: the `task` tool's `label` (the spawn tool's label, set by the model) is
    the child's stored label, unique among its parent's children, and `resume` takes it. On
    main the tool had no `label` argument (the input was refused) and resumed by id only."""
    rt = runtime(db_url, tmp_path)
    [turn] = await rt.run("parent names")
    assert turn.outcome == "completed"
    parent = rt.store.list_sessions().sessions[0].id
    kids = sorted(children_of(rt, parent), key=lambda c: rt.store.get_session(c).created_ms)
    assert [lineage_of(rt.store, c).label for c in kids] == ["greeter", "child-2"]  # type: ignore[union-attr]
    results = [r for m in rt.store.messages(parent) for r in m.tool_results()]
    assert [r.is_error for r in results] == [False, True, False, False]
    assert "already names child session" in str(results[1].output)
    assert results[2].metadata["child_session_id"] == kids[0]  # type: ignore[index]
    one, two = run_records(rt.store, kids[0])
    assert (one.label, two.label, two.resumed_from) == ("greeter", "greeter", one.id)
    for sid in (parent, *kids):
        check_session(rt.store, sid)
    await rt.aclose()


async def test_delegation_is_one_level_deep(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path)
    await rt.run("parent nest")
    parent = rt.store.list_sessions().sessions[0].id
    [child] = children_of(rt, parent)
    assert children_of(rt, child) == []
    [result] = [r for m in rt.store.messages(child) for r in m.tool_results()]
    assert result.is_error and "unknown tool 'task'" in str(result.output)
    await rt.aclose()


async def test_an_unknown_agent_is_the_models_error(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path)
    [turn] = await rt.run("parent bad agent")
    assert turn.outcome == "completed"
    parent = rt.store.list_sessions().sessions[0].id
    [result] = [r for m in rt.store.messages(parent) for r in m.tool_results()]
    assert result.is_error and "unknown agent 'nope'" in str(result.output)
    assert children_of(rt, parent) == []
    await rt.aclose()


async def test_background_report_wakes_an_idle_parent(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path, delay_ms=3)
    [first] = await rt.run("parent bg")  # returns before the slow child settles
    assert first.outcome == "completed" and first.final_text == "waiting for the child"
    parent = rt.store.list_sessions().sessions[0].id
    [child] = children_of(rt, parent)
    await rt.coordinator.wait_idle()  # the child settles, its report wakes the parent
    turns = rt.store.turns(parent)
    assert [t.status for t in turns] == ["completed", "completed"]
    [report] = reports(rt, parent)
    assert report.input_id in {
        e.event.input_ids[0]
        for e in rt.store.events(  # type: ignore[union-attr]
            parent, types=["turn.started"]
        )
    }
    assert "child report body" in str(report.payload["text"])
    assert rt.store.messages(parent)[-1].text() == "got the report"
    # Issue 37 item 24: the child is a job of the parent's work state, running, then done.
    [started, done] = [
        e.event.value
        for e in rt.store.events(  # type: ignore[union-attr]
            parent, types=["work_state.updated"]
        )
    ]
    assert [(j["id"], j["status"], j["label"]) for j in started] == [(child, "running", "child-1")]  # type: ignore[index]
    assert [(j["id"], j["status"]) for j in done] == [(child, "completed")]  # type: ignore[index]
    assert rt.store.work_state(parent)["jobs"] == done
    receipt = rt.store.receipts(parent)[-1]  # the turn that read the report saw the job done
    note = [d for s, _src, d in receipt.sections if s == "note.runtime.work_state"]
    assert "[completed] child-1" in rt.store.get_blob(note[0]).decode()
    for sid in (parent, child):
        check_session(rt.store, sid)
    await rt.aclose()


async def test_an_active_parent_promotes_the_report_at_its_next_step(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path)
    [turn] = await rt.run("parent bg busy")
    await rt.coordinator.wait_idle()
    parent = rt.store.list_sessions().sessions[0].id
    assert turn.outcome == "completed" and turn.steps == 3
    assert len(rt.store.turns(parent)) == 1  # the report joined the running turn
    texts = [m.text() for m in rt.store.messages(parent)]
    report = next(i for i, t in enumerate(texts) if t.startswith("Report from child"))
    assert report < texts.index("got the report")
    [job] = rt.store.work_state(parent)["jobs"]  # type: ignore[misc]
    assert job["status"] == "completed"  # type: ignore[index]  # marked at the boundary
    check_session(rt.store, parent)
    await rt.aclose()


async def test_report_commits_with_the_childs_settlement(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """If the report cannot be admitted, the child's turn does not end either; recovery then
    settles it and the report arrives."""
    rt = runtime(db_url, tmp_path, delay_ms=3)
    real = _inbox.admit_in
    calls: list[str] = []

    def failing_once(tx, session_id, input_id, *args, **kw):  # type: ignore[no-untyped-def]
        if input_id.startswith("report_") and not calls:
            calls.append(input_id)
            raise RuntimeError("the process died here")
        return real(tx, session_id, input_id, *args, **kw)

    monkeypatch.setattr(_inbox, "admit_in", failing_once)
    await rt.run("parent bg")
    await rt.coordinator.wait_idle()
    parent = rt.store.list_sessions().sessions[0].id
    [child] = children_of(rt, parent)
    assert [t.status for t in rt.store.turns(child)] == ["running"]  # rolled back together
    assert reports(rt, parent) == []
    await asyncio.sleep(CONFIG.execution.lease_ms / 1000 + 0.1)  # the claim's lease runs out
    [settled] = await rt.resume(child)
    assert settled.outcome == "completed" and rt.store.receipts(child)  # no new request needed
    await rt.coordinator.wait_idle()
    assert len(reports(rt, parent)) == 1
    assert rt.store.messages(parent)[-1].text() == "got the report"
    for sid in (parent, child):
        check_session(rt.store, sid)
    await rt.aclose()


async def test_interrupting_the_parent_interrupts_its_foreground_child(db_url: str, tmp_path: Path):
    rt = runtime(db_url, tmp_path, delay_ms=5)
    fired: list[str] = []

    def listener(ev: LiveEvent) -> None:
        row = rt.store.get_session(ev.session_id)
        if ev.kind == "text" and row.parent_id is not None and not fired:
            fired.append(ev.session_id)
            rt.interrupt(row.parent_id)

    rt.listener = listener
    [turn] = await rt.run("parent slow fg")
    assert turn.outcome == "interrupted"
    [child] = fired
    assert [t.status for t in rt.store.turns(child)] == ["interrupted"]
    assert rt.store.current_claim(child) is None
    parent = rt.store.get_session(child).parent_id
    assert parent is not None
    [result] = [r for m in rt.store.messages(parent) for r in m.tool_results()]
    assert result.output == INTERRUPTED_RESULT
    for sid in (parent, child):
        check_session(rt.store, sid)
    await rt.aclose()


@pytest.mark.slow
def test_a_report_admitted_before_a_crash_is_found_by_the_next_process(tmp_path: Path):
    work = make_workspace(tmp_path)
    db = str(tmp_path / "sessions.db")
    store = open_store(db)
    model = write_script(tmp_path / "script.json", RULES)
    create_session(store, "ses_parent", model, ["parent bg"], workspace=work)
    crash = cli_env(db, tmp_path, WAKEFUL_CRASH_AT="child.reported")
    code, _out, err = finish(wakeful(["run", "--session", "ses_parent"], crash, work))
    assert code == -9, err
    # The report is durable: still pending, or already delivered by the parent's drain, whose
    # unit waiting for the write lock may commit before the crash point's kill runs.
    [report] = [e.event for e in store.events("ses_parent", types=["inbox.enqueued"])][1:]
    assert report.kind == "subagent_report"  # type: ignore[union-attr]
    code, _out, err = finish(wakeful(["worker", "--once"], cli_env(db, tmp_path), work))
    assert code == 0, err
    assert store.messages("ses_parent")[-1].text() == "got the report"
    check_session(store, "ses_parent")
    store.close()
