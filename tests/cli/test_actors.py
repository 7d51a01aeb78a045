"""Who did what, from the command line and the library (issue 39 item 1, docs/access.md "Who
did what"): `local:` and the OS user, in the session's log and in a deleted session's
tombstone, on both store backends."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

from tests.cli.conftest import Wk, write_script
from wakeful.execution import Runtime
from wakeful.store import open_store

HELLO = [{"match": ".", "replies": [{"text": "hello back"}]}]
ME = f"local:{getpass.getuser()}"


def test_the_cli_records_the_os_user(wk: Wk, workdir: Path, db_url: str):
    model = write_script(workdir, HELLO)
    sid = json.loads(wk("run", "--model", model, "--format", "json", "hi").stdout)["session_id"]
    logged = json.loads(wk("log", sid, "--format", "json").stdout)
    [admitted] = [e for e in logged if e["type"] == "inbox.enqueued"]
    assert admitted["data"]["actor"] == ME
    assert f"actor={ME}" in wk("log", sid).stdout
    wk("session", "delete", sid, "--yes")
    store = open_store(db_url)
    try:
        [gone] = store.access.deletions(sid)
    finally:
        store.close()
    assert (gone.session_id, gone.actor, gone.owner, gone.how) == (sid, ME, None, "delete")
    shown = wk("session", "show", sid, check=False)
    assert shown.returncode != 0 and f"UTC by {ME})" in shown.stderr, shown.stderr
    assert f"no session {sid} (deleted " in shown.stderr and "Traceback" not in shown.stderr
    wk("run", "--model", model, "old")
    wk("session", "prune", "--older-than", "0", "--delete", "--yes")
    store = open_store(db_url)
    try:
        pruned = [d for d in store.access.deletions() if d.how == "prune"]
    finally:
        store.close()
    assert [d.actor for d in pruned] == [ME]


async def test_the_library_records_its_runtimes_actor(tmp_path: Path):
    model = write_script(tmp_path, HELLO)
    rt = Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path)
    rt.actor = "svc-nightly"
    try:
        sent = rt.send("hi", resume=False)
        rt.send("and you", session_id=sent.session_id, resume=False, actor="bot:ci")
        events = [e for e in rt.store.log(sent.session_id) if hasattr(e, "event")]
        actors = [e.event.actor for e in events if e.type == "inbox.enqueued"]
        assert actors == ["svc-nightly", "bot:ci"]
        other = Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path)
        assert other.actor == ME
        other.close()
    finally:
        await rt.aclose()
