"""A custom tool named by import path in `wakeful.toml` is loaded by every process that drives
the session: `wakeful run` starts the session and pauses on the tool's approval, `wakeful
approve --no-wake` records the decision, and `wakeful worker --once`, another process, runs the
tool and finishes the session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wakeful.store import open_store

from .helpers import check_session, cli_env, finish, make_workspace, wakeful

pytestmark = pytest.mark.slow

TOOLS = '''
import os
from pydantic import BaseModel
from wakeful.tools import ToolContext, tool

class Text(BaseModel):
    text: str

@tool(permission="loud")
def shout(args: Text, ctx: ToolContext) -> str:
    """Upper-case the text; note it in shouted.txt."""
    with open(ctx.workspace / "shouted.txt", "a") as f:
        f.write(args.text + "\\n")
    return f"{args.text.upper()} from pid {os.getpid()}"
'''


def test_a_worker_loads_the_tool_by_import_path_and_finishes_the_session(tmp_path: Path) -> None:
    work = make_workspace(tmp_path)
    (work / "teamtools.py").write_text(TOOLS)
    with (work / "wakeful.toml").open("a") as f:
        f.write('[tools]\nshout = "teamtools:shout"\n[permissions]\nloud = "ask"\n')
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": ".",
                        "replies": [
                            {"tool_calls": [{"name": "shout", "input": {"text": "hello"}}]},
                            {"text": "shouted"},
                        ],
                    }
                ]
            }
        )
    )
    db = str(tmp_path / "sessions.db")
    env = cli_env(db, tmp_path)
    code, out, err = finish(wakeful(["run", "--model", f"scripted:{script}", "shout"], env, work))
    assert "wakeful approve" in err, (code, out, err)  # paused: nobody at a terminal
    store = open_store(db)
    [row] = store.list_sessions().sessions
    [call] = store.tool_calls(row.id) or [None]
    assert call is None and not (work / "shouted.txt").exists()  # not run by `wakeful run`
    waiting = [e.event for e in store.events(row.id, types=["approval.requested"])]
    call_id = waiting[0].call_id  # type: ignore[union-attr]
    code, out, err = finish(wakeful(["approve", row.id, call_id, "--no-wake"], env, work))
    assert code == 0, err
    worker = wakeful(["worker", "--once"], env, tmp_path)  # another directory, another process
    code, out, err = finish(worker, timeout=120)
    assert code == 0, err
    [result] = [r for m in store.messages(row.id) for r in m.tool_results()]
    assert result.output == f"HELLO from pid {worker.pid}" and not result.is_error
    assert (work / "shouted.txt").read_text() == "hello\n"
    assert [t.status for t in store.turns(row.id)][-1] == "completed"
    check_session(store, row.id)
    store.close()
