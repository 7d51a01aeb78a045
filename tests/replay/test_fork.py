"""A recorded turn re-run from a step on another model, as a fork: the steps before it come
from the recording (their tools are not run again), the steps from it on are the new model's
and their tools really run at the fork's location; the source is untouched, and the fork is a
session of its own to continue and compare."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Wk
from tests.server.conftest import MakeServer
from wakeful.execution import Runtime
from wakeful.replay import replay_step

WRITER = [
    {
        "match": "write",
        "replies": [
            {"tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "one"}}]},
            {"tool_calls": [{"name": "shell", "input": {"command": "echo two >> log.txt"}}]},
            {"text": "written twice"},
        ],
    },
]
OTHER = [  # a reply is picked by the count of replies after the prompt: step 2 takes the 2nd
    {
        "match": "write",
        "replies": [
            {"text": "(step 1 is the recorded one)"},
            {"tool_calls": [{"name": "shell", "input": {"command": "echo other >> b.txt"}}]},
            {"text": "done my way"},
        ],
    },
]


async def _allow(_name: str, _input: dict[str, object]) -> bool:
    return True


def _script(path: Path, rules: list[dict]) -> str:
    path.write_text(json.dumps({"rules": rules}))
    return f"scripted:{path}"


async def test_a_turn_re_run_from_its_second_step_on_another_model(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    writer, other = _script(tmp_path / "w.json", WRITER), _script(tmp_path / "o.json", OTHER)
    rt = Runtime(str(tmp_path / "s.db"), model=writer, workspace=work, ask=_allow)
    [turn] = await rt.run("write the file")
    assert turn.outcome == "completed" and turn.steps == 3
    sid = rt.store.list_sessions().sessions[0].id
    (work / "a.txt").unlink()
    before = [e.to_json() for e in rt.store.events(sid)]

    done = await replay_step(rt, sid, [other], turn=1, step=2, fork=True)
    [case] = done.view.started.cases
    result = done.view.results[(case.id, other)]
    assert result.error is None and result.text == "done my way"
    assert [c.name for c in result.tool_calls] == ["shell"]  # its own steps only
    assert (work / "b.txt").read_text() == "other\n"  # its tool really ran, at the location
    assert not (work / "a.txt").exists()  # the recorded step 1 was not run again
    fork = rt.store.get_session(result.session_id or "")
    assert fork.forked_from == sid and fork.model == other
    roles = [(m.role, [c.name for c in m.tool_calls()]) for m in rt.store.messages(fork.id)]
    assert roles[:3] == [("user", []), ("assistant", ["write_file"]), ("user", [])]
    assert roles[3:] == [("assistant", ["shell"]), ("user", []), ("assistant", [])]
    # The original column: the recorded turn from step 2 on.
    assert done.original.text == "written twice"
    assert [c.name for c in done.original.tool_calls] == ["shell"]
    assert [e.to_json() for e in rt.store.events(sid)] == before  # the source is untouched
    await rt.aclose()


def test_the_command_line_forks_and_names_the_fork(wk: Wk, workdir: Path) -> None:
    writer = _script(workdir.parent / "w.json", WRITER)
    (workdir / "wakeful.toml").write_text('[permissions]\nwrite_file = "allow"\nshell = "allow"\n')
    sid = json.loads(wk("run", "--model", writer, "--format", "json", "write it").stdout)[
        "session_id"
    ]
    out = wk("replay", sid, "--step", "1", "--fork", "--model", writer, "--format", "json")
    data = json.loads(out.stdout)
    result = data["models"][writer]
    assert result["text"] == "written twice" and result["error"] is None
    assert result["session_id"] and result["session_id"] != sid
    assert data["source"]["fork"] is True and result["diff"] == ""  # the same model: the same turn
    assert (workdir / "log.txt").read_text() == "two\ntwo\n"  # ran twice: original and fork
    shown = wk("session", "show", result["session_id"], "--format", "json").stdout
    assert sid in shown  # the fork names its origin


async def test_to_end_re_sends_the_later_turns_and_compares_turn_by_turn(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    chatty = [*WRITER, {"match": "next", "replies": [{"text": "original next"}]}]
    other = [*OTHER, {"match": "next", "replies": [{"text": "other next"}]}]
    writer, alt = _script(tmp_path / "w.json", chatty), _script(tmp_path / "o.json", other)
    rt = Runtime(str(tmp_path / "s.db"), model=writer, workspace=work, ask=_allow)
    await rt.run("write the file")
    sid = rt.store.list_sessions().sessions[0].id
    await rt.run("next one", session_id=sid)
    await rt.run("next two", session_id=sid)

    done = await replay_step(rt, sid, [alt], turn=1, step=2, fork=True, to_end=True)
    [case] = done.view.started.cases
    result = done.view.results[(case.id, alt)]
    assert [(t.turn, t.text) for t in result.turns] == [
        (1, "done my way"),
        (2, "other next"),
        (3, "other next"),
    ]
    assert [(t.turn, t.text) for t in done.original.turns] == [
        (1, "written twice"),
        (2, "original next"),
        (3, "original next"),
    ]
    fork_prompts = [
        m.text() for m in rt.store.messages(result.session_id or "") if m.role == "user"
    ]
    assert [p for p in fork_prompts if p] == ["write the file", "next one", "next two"]
    await rt.aclose()


def test_the_eval_page_shows_a_continuation_turn_by_turn(
    tmp_path: Path, make_server: MakeServer
) -> None:
    import asyncio

    work = tmp_path / "work"
    work.mkdir()
    writer = _script(
        tmp_path / "w.json", [*WRITER, {"match": "next", "replies": [{"text": "o-next"}]}]
    )
    alt = _script(
        tmp_path / "o.json", [*OTHER, {"match": "next", "replies": [{"text": "alt-next"}]}]
    )
    db = str(tmp_path / "s.db")

    async def record() -> str:
        rt = Runtime(db, model=writer, workspace=work, ask=_allow)
        await rt.run("write the file")
        sid = rt.store.list_sessions().sessions[0].id
        await rt.run("next please", session_id=sid)
        done = await replay_step(rt, sid, [alt], turn=1, step=2, fork=True, to_end=True)
        await rt.aclose()
        return done.view.run_id

    run_id = asyncio.run(record())
    page = make_server(db=db).client().get(f"/ui/evals/{run_id}")
    assert page.status_code == 200
    assert "turn by turn" in page.text and "alt-next" in page.text and "turn 2" in page.text
