"""`session import --from` and `session export --to`: other tools' files round trip through a
real store (SQLite and PostgreSQL), a second import writes nothing, a bad line writes nothing.

The sample files under tests/fixtures/interchange/ are made from each format's public
documentation (docs/interchange.md names the sources)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Wk, write_script

FIXTURES = Path(__file__).parent.parent / "fixtures" / "interchange"
READ = [
    {
        "match": ".",
        "replies": [
            {"tool_calls": [{"name": "read_file", "input": {"path": "a.txt"}}]},
            {"text": "done"},
        ],
    }
]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _import(wk: Wk, fmt: str, *paths: Path) -> dict[str, Any]:
    out = wk("session", "import", "--from", fmt, "--format", "json", *map(str, paths)).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def _sessions(wk: Wk) -> list[dict[str, Any]]:
    """Every session of the store (none when a refused import did not even create it)."""
    done = wk("session", "list", "--all", "--format", "json", check=False)
    if done.returncode == 2 and "no store at" in done.stderr:
        return []
    listed: list[dict[str, Any]] = json.loads(done.stdout)
    return listed


# -- Claude Code -------------------------------------------------------------------------------


def test_claude_code_round_trip_gives_back_every_message_line(wk: Wk, workdir: Path):
    sample = FIXTURES / "claude-code.jsonl"
    first = _import(wk, "claude-code", sample)
    (session,) = first["sessions"]
    assert (session["written"], session["present"]) == (7, 0)
    assert first["dropped"] == {"summary line": 1, "system line": 1}
    again = _import(wk, "claude-code", sample)  # the same file twice writes nothing
    assert again["sessions"][0] | {"written": 0} == session | {"written": 0, "present": 7}
    assert again["sessions"][0]["written"] == 0 and len(_sessions(wk)) == 1

    out = workdir / "back.jsonl"
    wk("session", "export", session["id"], "--to", "claude-code", "-o", str(out))
    original = [x for x in _lines(sample) if x["type"] in ("user", "assistant")]
    assert _lines(out) == original

    shown = json.loads(wk("session", "show", session["id"], "--format", "json").stdout)
    assert shown["title"] == "Fix the failing date test"
    calls = [b for m in shown["messages"] for b in m["blocks"] if b["type"] == "tool_call"]
    results = [b for m in shown["messages"] for b in m["blocks"] if b["type"] == "tool_result"]
    assert [c["name"] for c in calls] == ["Read", "Bash"]
    assert [r["call_id"] for r in results] == [c["id"] for c in calls]
    assert results[1]["is_error"] is True


def test_claude_code_text_output_says_what_is_kept_and_lost(wk: Wk):
    out = wk("session", "import", "--from", "claude-code", str(FIXTURES / "claude-code.jsonl"))
    text = out.stdout
    assert "7 messages written, 0 already there" in text
    assert "kept as metadata:" in text and "claude_code metadata" in text
    assert "not imported: 1 summary line, 1 system line\n" in text
    assert "never imported: lines that are no message" in text


def test_a_bad_line_is_named_and_nothing_is_written(wk: Wk, workdir: Path):
    lines = (FIXTURES / "claude-code.jsonl").read_text().splitlines()
    lines[4] = lines[4][:60]  # line 5 cut short
    bad = workdir / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    good = FIXTURES / "claude-code.jsonl"
    done = wk("session", "import", "--from", "claude-code", str(good), str(bad), check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"{bad} line 5 column" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert _sessions(wk) == []  # the good file given first was not written either


def test_a_wakeful_session_exports_to_claude_code_and_back(wk: Wk, workdir: Path):
    (workdir / "a.txt").write_text("hello")
    model = write_script(workdir, READ)
    sid = json.loads(wk("run", "--model", model, "--format", "json", "read it").stdout)[
        "session_id"
    ]
    out = workdir / "cc.jsonl"
    wk("session", "export", sid, "--to", "claude-code", "-o", str(out))
    lines = _lines(out)
    assert [x["type"] for x in lines] == ["user", "assistant", "user", "assistant"]
    assert [x["parentUuid"] for x in lines[1:]] == [x["uuid"] for x in lines[:-1]]
    (session,) = _import(wk, "claude-code", out)["sessions"]
    before = json.loads(wk("session", "show", sid, "--format", "json").stdout)["messages"]
    after = json.loads(wk("session", "show", session["id"], "--format", "json").stdout)
    assert [m["blocks"] for m in after["messages"]] == [m["blocks"] for m in before]


@pytest.mark.parametrize("fmt", ["no-such-format"])
def test_an_unknown_format_is_one_line(wk: Wk, fmt: str):
    done = wk("session", "import", "--from", fmt, "x.jsonl", check=False)
    assert done.returncode == 2 and "unknown format 'no-such-format'" in done.stderr
    assert "Traceback" not in done.stderr


# -- Codex -------------------------------------------------------------------------------------


def test_codex_round_trip_gives_back_every_item_line(wk: Wk, workdir: Path):
    sample = FIXTURES / "codex.jsonl"
    (session,) = _import(wk, "codex", sample)["sessions"]
    assert session["written"] == 6
    assert _import(wk, "codex", sample)["sessions"][0]["written"] == 0
    out = workdir / "back.jsonl"
    wk("session", "export", session["id"], "--to", "codex", "-o", str(out))
    assert _lines(out) == [x for x in _lines(sample) if x["type"] != "event_msg"]
    shown = json.loads(wk("session", "show", session["id"], "--format", "json").stdout)
    assert shown["model"] == "openai:gpt-5-codex"
    blocks = [b for m in shown["messages"] for b in m["blocks"]]
    call = next(b for b in blocks if b["type"] == "tool_call")
    result = next(b for b in blocks if b["type"] == "tool_result")
    assert call["name"] == "shell" and call["input"]["workdir"] == "/home/user/project"
    assert result["call_id"] == call["id"] and "42" in result["output"]


def test_a_codex_file_without_session_meta_is_refused(wk: Wk, workdir: Path):
    lines = (FIXTURES / "codex.jsonl").read_text().splitlines()[1:]
    bad = workdir / "rollout.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    done = wk("session", "import", "--from", "codex", str(bad), check=False)
    assert done.returncode == 2 and "no session_meta line" in done.stderr
    assert _sessions(wk) == []


# -- OpenAI Agents SDK SQLiteSession -----------------------------------------------------------


def _agents_db(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.executescript((FIXTURES / "openai-agents.sql").read_text())
    con.close()
    return path


def _sdk_items(path: Path, session_id: str) -> list[Any]:
    from agents import SQLiteSession

    session = SQLiteSession(session_id, path)
    try:
        return list(asyncio.run(session.get_items()))
    finally:
        session.close()


def test_openai_agents_round_trip_through_the_sdk(wk: Wk, workdir: Path):
    db = _agents_db(workdir / "agents.db")
    original = _sdk_items(db, "conversation_123")
    assert len(original) == 6
    (session,) = _import(wk, "openai-agents", db)["sessions"]
    assert (session["id"], session["written"]) == ("conversation_123", 6)
    assert _import(wk, "openai-agents", db)["sessions"][0]["written"] == 0
    out = workdir / "back.db"
    wk("session", "export", "conversation_123", "--to", "openai-agents", "-o", str(out))
    assert _sdk_items(out, "conversation_123") == original


def test_openai_agents_import_continues_in_wakeful_session(wk: Wk, workdir: Path, cli_env):
    from wakeful.integrations.openai_agents import WakefulSession

    db = _agents_db(workdir / "agents.db")
    _import(wk, "openai-agents", db)
    session = WakefulSession("conversation_123", cli_env["WAKEFUL_DB"])
    try:
        assert session.get_items_sync() == _sdk_items(db, "conversation_123")
    finally:
        session.close()


def test_an_agents_row_that_is_not_json_is_named(wk: Wk, workdir: Path):
    db = _agents_db(workdir / "agents.db")
    con = sqlite3.connect(db)
    con.execute("UPDATE agent_messages SET message_data = '{oops' WHERE id = 4")
    con.commit()
    con.close()
    done = wk("session", "import", "--from", "openai-agents", str(db), check=False)
    assert done.returncode == 2 and "agent_messages row 4: message_data is not JSON" in done.stderr
    assert _sessions(wk) == []


# -- opencode ----------------------------------------------------------------------------------


def test_opencode_round_trip_gives_back_the_export(wk: Wk, workdir: Path):
    sample = FIXTURES / "opencode.json"
    (session,) = _import(wk, "opencode", sample)["sessions"]
    assert session["written"] == 6  # the assistant message split at each step's results
    assert _import(wk, "opencode", sample)["sessions"][0]["written"] == 0
    out = workdir / "back.json"
    wk("session", "export", session["id"], "--to", "opencode", "-o", str(out))
    assert json.loads(out.read_text()) == json.loads(sample.read_text())
    shown = json.loads(wk("session", "show", session["id"], "--format", "json").stdout)
    kinds = [[b["type"] for b in m["blocks"]] for m in shown["messages"]]
    assert kinds == [
        ["text"],
        ["thinking", "tool_call"],
        ["tool_result"],
        ["tool_call"],
        ["tool_result"],
        ["text"],
    ]


@pytest.mark.parametrize("fmt", ["codex", "opencode"])
def test_a_wakeful_session_exports_and_imports_back(wk: Wk, workdir: Path, fmt: str):
    (workdir / "a.txt").write_text("hello")
    sid = json.loads(
        wk("run", "--model", write_script(workdir, READ), "--format", "json", "read it").stdout
    )["session_id"]
    out = workdir / "out.file"
    wk("session", "export", sid, "--to", fmt, "-o", str(out))
    (session,) = _import(wk, fmt, out)["sessions"]
    before = json.loads(wk("session", "show", sid, "--format", "json").stdout)["messages"]
    after = json.loads(wk("session", "show", session["id"], "--format", "json").stdout)
    assert [m["blocks"] for m in after["messages"]] == [m["blocks"] for m in before]


def test_an_agents_export_imported_where_its_id_is_taken_is_refused(wk: Wk, workdir: Path):
    (workdir / "a.txt").write_text("hello")
    sid = json.loads(
        wk("run", "--model", write_script(workdir, READ), "--format", "json", "read it").stdout
    )["session_id"]
    out = workdir / "out.db"
    wk("session", "export", sid, "--to", "openai-agents", "-o", str(out))
    done = wk("session", "import", "--from", "openai-agents", str(out), check=False)
    assert done.returncode == 2 and "was not imported from openai-agents" in done.stderr
    other = str(workdir / "other.db")
    wk("session", "import", "--from", "openai-agents", "--db", other, str(out))
    before = json.loads(wk("session", "show", sid, "--format", "json").stdout)["messages"]
    after = json.loads(wk("session", "show", sid, "--db", other, "--format", "json").stdout)
    assert [m["blocks"] for m in after["messages"]] == [m["blocks"] for m in before]


def test_a_message_over_the_store_limit_is_named_and_nothing_is_written(wk: Wk, workdir: Path):
    lines = _lines(FIXTURES / "claude-code.jsonl")
    lines[1]["message"]["content"] = "x" * (5 << 20)  # line 2: over MESSAGE_MAX_BYTES
    big = workdir / "big.jsonl"
    big.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    done = wk("session", "import", "--from", "claude-code", str(big), check=False)
    assert done.returncode == 2 and f"{big} line 2: a message of" in done.stderr
    assert "over the store's limit" in done.stderr and _sessions(wk) == []


def test_a_duplicated_opencode_message_id_is_refused(wk: Wk, workdir: Path):
    doc = json.loads((FIXTURES / "opencode.json").read_text())
    doc["messages"].append(doc["messages"][0])
    bad = workdir / "dup.json"
    bad.write_text(json.dumps(doc))
    done = wk("session", "import", "--from", "opencode", str(bad), check=False)
    assert done.returncode == 2 and "messages[2]: message id" in done.stderr
    assert "again (messages[0])" in done.stderr and _sessions(wk) == []
