"""`wakeful session list` filters and rows, and `wakeful session rename` (issue 37, items 4, 6)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Wk
from wakeful.events import TurnEnded
from wakeful.execution._writes import promote_idle
from wakeful.store import open_store


def _seed(db_url: str, workdir: Path, elsewhere: Path) -> dict[str, str]:
    """Sessions of two agents at two locations; one with inputs, an artifact and a child."""
    store = open_store(db_url)
    here = str(workdir.resolve())
    ids = {
        "mine": store.create_session(agent="plan", location=here).id,
        "build": store.create_session(title="build here", agent="build", location=here).id,
        "away": store.create_session(title="plan away", agent="plan", location=str(elsewhere)).id,
    }
    sid = ids["mine"]
    for n, text in enumerate(["  what is   up?", "and then"], 1):
        store.admit(sid, f"in{n}", "user", {"text": text})
        promote_idle(store, sid, None, start_turn=f"turn_{n}")
        store.append(sid, [TurnEnded(turn_id=f"turn_{n}", outcome="completed")])
    store.shaping.add_artifact(sid, "link", "https://example.com/pr/1", "PR 1")
    store.create_session(parent_id=sid)
    store.close()
    return ids


def test_list_filters_by_agent_and_location_with_counts(
    wk: Wk, db_url: str, workdir: Path, tmp_path: Path
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ids = _seed(db_url, workdir, elsewhere)

    def listed(*args: str) -> list[dict]:
        return json.loads(wk("session", "list", "--format", "json", *args).stdout)

    rows = {r["id"]: r for r in listed("--agent", "plan", "--location", "this")}
    assert set(rows) == {ids["mine"]}
    mine = rows[ids["mine"]]
    assert (mine["turns"], mine["user_messages"], mine["artifacts"], mine["child_sessions"]) == (
        2,
        2,
        1,
        1,
    )
    assert mine["first_prompt"] == "what is up?"
    assert {r["id"] for r in listed("--location", str(elsewhere))} == {ids["away"]}
    assert {r["id"] for r in listed("--agent", "plan")} == {ids["mine"], ids["away"]}
    assert {r["id"] for r in listed("--location", "any")} == set(ids.values())
    produced = json.loads(
        wk("session", "artifacts", "--location", "this", "--format", "json").stdout
    )
    assert [a["session_id"] for a in produced["artifacts"]] == [ids["mine"]]
    table = wk("session", "list", "--location", "this").stdout
    assert "“what is up?”" in table and "build here" in table and "plan away" not in table


def test_rename_a_session(wk: Wk, db_url: str, workdir: Path, tmp_path: Path):
    ids = _seed(db_url, workdir, tmp_path)
    sid = ids["build"]
    done = wk("session", "rename", sid[:12], "  Better name ", "--format", "json")
    assert json.loads(done.stdout) == {"id": sid, "title": "Better name"}
    assert wk("session", "rename", sid, "Best").stdout.strip() == f"renamed {sid}: Best"
    store = open_store(db_url)
    assert store.get_session(sid).title == "Best"
    before = store.get_session(sid).last_seq
    store.close()
    blank = wk("session", "rename", sid, "   ", check=False)
    assert blank.returncode == 2 and blank.stderr.strip() == "error: the title is empty"
    unknown = wk("session", "rename", "ses_nope", "x", check=False)
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1
    store = open_store(db_url)
    assert store.get_session(sid).last_seq == before  # the refusals wrote nothing
    store.close()
