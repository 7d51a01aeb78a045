"""Issue 16, item 10: a hard link in the workspace leads the file tools nowhere outside it.

A file outside the workspace gets a second name inside it (`os.link`). A real `wakeful run`
drives `read_file`, `grep`, `edit_file` and `write_file` at that name: each refuses, the
outside file keeps its content, and none of it reaches the transcript.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.execution.helpers import (
    check_session,
    cli_env,
    create_session,
    finish,
    make_workspace,
    wakeful,
    write_script,
)
from wakeful.store import open_store

SID = "ses_links"
SECRET = "outside-secret-4f1c"


def test_the_file_tools_refuse_a_hard_link_to_a_file_outside(tmp_path: Path):
    work = make_workspace(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    os.link(outside / "secret.txt", work / "link.txt")
    (work / "own.txt").write_text("own words\n")
    calls = [
        {"name": "read_file", "input": {"path": "link.txt"}},
        {"name": "grep", "input": {"pattern": "secret|own"}},
        {"name": "edit_file", "input": {"path": "link.txt", "old": SECRET, "new": "edited"}},
        {"name": "write_file", "input": {"path": "link.txt", "content": "overwritten"}},
    ]
    db = str(tmp_path / "sessions.db")
    store = open_store(db)
    rule = {"match": "go", "replies": [{"tool_calls": calls}, {"text": "done"}]}
    create_session(
        store, SID, write_script(tmp_path / "script.json", [rule]), ["go"], workspace=work
    )
    code, _out, err = finish(wakeful(["run", "--session", SID], cli_env(db, tmp_path), work))
    assert code == 0, err
    assert (outside / "secret.txt").read_text() == f"{SECRET}\n"
    results = [r for m in store.messages(SID) for r in m.tool_results()]
    outputs = [str(r.output) for r in results]
    assert [r.is_error for r in results] == [True, False, True, True]
    for refused in (outputs[0], outputs[2], outputs[3]):
        assert "link.txt has 2 hard links" in refused
    assert outputs[1] == "own.txt:1: own words"  # grep passes over the link
    assert SECRET not in "".join(outputs)
    check_session(store, SID)
    store.close()
