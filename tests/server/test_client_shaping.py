"""`Client` and `AsyncClient` shaping methods (rewind, unrevert, history edits, artifacts,
metadata, extension state) against a real server; each mistake raises wakeful's own type."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.conftest import TOKEN, MakeServer, Served, script
from tests.server.test_shaping_api import RULES
from wakeful.client import ApiError, AsyncClient, Client
from wakeful.errors import ConflictError, NotFoundError, UsageError

PR = "https://github.com/acme/app/pull/7"


def _made_a_file(served: Served) -> tuple[str, Path]:
    """A session whose second turn wrote hello.txt through `write_file`."""
    with Client(served.url, TOKEN) as c:
        sid = c.create_session(prompt="hello", wait=True)["session"]["id"]
        c.prompt(sid, "make a file", wait=True)
    hello = served.runtime.workspace / "hello.txt"
    assert hello.read_text() == "hi\n"
    return str(sid), hello


@pytest.fixture
def served(make_server: MakeServer, tmp_path: Path) -> Served:
    return make_server(model=script(tmp_path, RULES), permissions={"*": "allow"})


def test_client_rewinds_unreverts_and_edits_history(served: Served):
    sid, hello = _made_a_file(served)
    with Client(served.url, TOKEN) as c:
        out = c.rewind(sid[:12], files=True)  # a unique prefix will do
        assert out["session_id"] == sid and out["files_restored"] == ["hello.txt"]
        assert out["prompt"] == "make a file" and out["warnings"] == []
        assert not hello.exists()
        back = c.unrevert(sid)
        assert back["files_restored"] == ["hello.txt"] and back["hidden"] == out["hidden"]
        assert hello.read_text() == "hi\n"
        with pytest.raises(UsageError, match="no rewind"):
            c.unrevert(sid)

        with pytest.raises(ConflictError, match="changed"):
            c.edit_history(sid, revision=1, delete_turn="x")
        revision = c.get_session(sid)["last_seq"]
        first_turn = c.turns(sid)["turns"][0]["id"]
        edited = c.edit_history(sid, revision=revision, delete_turn=first_turn)
        assert edited == {"session_id": sid, "revision": revision + 1}
        assert "hello" not in [
            m["message"]["blocks"][0].get("text") for m in c.messages(sid)["messages"]
        ]

        hello.write_text("mine\n")  # changed by something else since
        with pytest.raises(ConflictError, match="hello.txt") as conflict:
            c.rewind(sid, files=True)
        assert isinstance(conflict.value, ApiError) and conflict.value.status == 409
        assert hello.read_text() == "mine\n"
        with pytest.raises(NotFoundError, match="no turn"):
            c.rewind(sid, turn_id="turn_nope")
        forced = c.rewind(sid, files=True, force=True)
        assert forced["files_restored"] == ["hello.txt"] and not hello.exists()


def test_client_artifacts_metadata_and_extension_state(served: Served):
    with Client(served.url, TOKEN) as c:
        sid = c.create_session()["session"]["id"]
        added = c.add_artifact(sid, "pull_request", PR, "PR 7", {"number": 7})
        assert (added["kind"], added["uri"], added["meta"]) == ("pull_request", PR, {"number": 7})
        c.add_artifact(sid, "branch", "git:feature", "feature")
        kinds = [a["kind"] for a in c.artifacts(sid)["artifacts"]]
        assert sorted(kinds) == ["branch", "pull_request"]
        assert [a["uri"] for a in c.artifacts(sid, kind="pull_request")["artifacts"]] == [PR]
        assert c.artifacts(sid, since_ms=added["updated_ms"] + 10**9)["artifacts"] == []
        assert [a["session_id"] for a in c.find_artifacts(PR)["artifacts"]] == [sid]
        assert c.find_artifacts(PR, kind="link")["artifacts"] == []
        with pytest.raises(UsageError):
            c.add_artifact(sid, "Bad Kind", PR, "x")
        with pytest.raises(NotFoundError):
            c.artifacts("ses_missing")

        before = c.metadata(sid)
        assert before["session_id"] == sid and "owner" not in before["metadata"]
        merged = c.update_metadata(sid, {"owner": "alice", "n": 1})["metadata"]
        assert merged == before["metadata"] | {"owner": "alice", "n": 1}
        after = c.update_metadata(sid, {"n": None})["metadata"]
        assert after == before["metadata"] | {"owner": "alice"} == c.metadata(sid)["metadata"]
        with pytest.raises(UsageError, match="exceed"):
            c.update_metadata(sid, {"x": "y" * 70_000})

        state = c.set_extension_state(sid, "todo-sync", "cursor", {"page": 2})
        assert state == {
            "session_id": sid,
            "namespace": "todo-sync",
            "values": {"cursor": {"page": 2}},
        }
        assert c.extension_state(sid, "todo-sync")["values"] == {"cursor": {"page": 2}}
        assert c.delete_extension_state(sid, "todo-sync", "cursor")["values"] == {}
        with pytest.raises(UsageError):
            c.set_extension_state(sid, "todo-sync", "k", "y" * 20_000)


async def test_async_client_shaping(served: Served):
    sid, hello = _made_a_file(served)
    async with AsyncClient(served.url, TOKEN) as c:
        out = await c.rewind(sid, files=True)
        assert out["files_restored"] == ["hello.txt"] and not hello.exists()
        back = await c.unrevert(sid)
        assert back["files_restored"] == ["hello.txt"] and hello.read_text() == "hi\n"
        with pytest.raises(UsageError, match="no rewind"):
            await c.unrevert(sid)
        hello.write_text("mine\n")
        with pytest.raises(ConflictError, match="hello.txt"):
            await c.rewind(sid, files=True)
        with pytest.raises(ConflictError):
            await c.edit_history(sid, revision=1, delete_turn="x")
        revision = (await c.get_session(sid))["last_seq"]
        turn = (await c.turns(sid))["turns"][0]["id"]
        assert (await c.edit_history(sid, revision=revision, delete_turn=turn))[
            "revision"
        ] == revision + 1

        await c.add_artifact(sid, "pull_request", PR, "PR 7")
        listed = (await c.artifacts(sid, kind="pull_request"))["artifacts"]
        assert [a["uri"] for a in listed] == [PR]
        assert [a["session_id"] for a in (await c.find_artifacts(PR))["artifacts"]] == [sid]
        with pytest.raises(NotFoundError):
            await c.artifacts("ses_missing")

        assert (await c.update_metadata(sid, {"owner": "bob"}))["metadata"]["owner"] == "bob"
        assert (await c.metadata(sid))["metadata"]["owner"] == "bob"
        with pytest.raises(UsageError):
            await c.update_metadata(sid, {})  # at least one key

        await c.set_extension_state(sid, "ns", "k", [1, 2])
        assert (await c.extension_state(sid, "ns"))["values"] == {"k": [1, 2]}
        assert (await c.delete_extension_state(sid, "ns", "k"))["values"] == {}
        with pytest.raises(NotFoundError):
            await c.extension_state("ses_missing", "ns")
