"""Issue 16, item 7: text no store can hold, and configuration values that would overflow, are
one-line errors (exit 2) from the real `wakeful` command, and nothing is written.

Bad text: a prompt that is not valid UTF-8 (the bytes of a lone surrogate included), an export
whose title holds a lone surrogate, a NUL (PostgreSQL text cannot hold it: it was a
`psycopg.DataError` there) or bytes that are not UTF-8. Bad configuration: `wakeful.toml` that
is not UTF-8, nests arrays 5,000 levels deep, or sets `lease_ms = 2**63 - 1`.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from tests.execution.helpers import WAKEFUL, cli_env, make_workspace
from tests.pg import fresh_database
from wakeful.errors import UsageError
from wakeful.execution import Runtime, run_sync
from wakeful.store import open_store


def wk(tmp_path: Path, db: str, *args: str | bytes) -> subprocess.CompletedProcess[str]:
    """Run `wakeful` in the test's workspace with a private HOME; arguments may be raw bytes."""
    work = make_workspace(tmp_path)
    return subprocess.run(
        [WAKEFUL, *args],
        cwd=work,
        env=cli_env(db, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_line_error(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"error: {message}"], done.stderr


def sessions(db: str) -> int:
    store = open_store(db)
    try:
        return len(store.list_sessions(archived=None).sessions)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("command", "prompt", "message"),
    [
        ("run", b"bad \xff byte", "PROMPT: not valid UTF-8 (byte 0xff at character 5)"),
        (
            "run",
            b"a lone \xed\xa0\x80 surrogate",
            "PROMPT: not valid UTF-8 (byte 0xed at character 8)",
        ),
        ("send", b"bad \xc3 byte", "PROMPT: not valid UTF-8 (byte 0xc3 at character 5)"),
    ],
)
def test_a_prompt_that_is_not_utf8_is_refused(
    tmp_path: Path, db_url: str, command: str, prompt: bytes, message: str
):
    target = ["--session", "ses_text"] if command == "send" else ["--model", "scripted:none"]
    one_line_error(wk(tmp_path, db_url, command, *target, prompt), message)
    assert sessions(db_url) == 0


@pytest.mark.parametrize(
    ("title", "message"),
    [
        (
            b'"a\\ud800b"',
            "session title: holds a lone surrogate U+D800 (character 2): not valid Unicode",
        ),
        (b'"a\\u0000b"', "session title: holds a NUL character (character 2)"),
    ],
)
def test_an_import_whose_title_no_store_can_hold_is_refused(
    tmp_path: Path, db_url: str, title: bytes, message: str
):
    export = tmp_path / "export.jsonl"
    export.write_bytes(b'{"wakeful_export": 1, "session": {"title": ' + title + b"}}\n")
    one_line_error(wk(tmp_path, db_url, "session", "import", str(export)), f"{export}: {message}")
    assert sessions(db_url) == 0


def test_an_import_that_is_not_utf8_is_refused(tmp_path: Path):
    db = str(tmp_path / "sessions.db")
    export = tmp_path / "export.jsonl"
    export.write_bytes(b'{"wakeful_export": 1, "session": {"title": "caf\xe9"}}\n')
    done = wk(tmp_path, db, "session", "import", str(export))
    one_line_error(done, f"{export}: not UTF-8 text (byte 0xe9 at offset 47)")


@pytest.mark.postgres
def test_a_nul_in_a_title_is_a_usage_error_from_the_postgres_store():
    # (SQLite text holds a NUL; the CLI refuses it on both backends, as tested above.)
    with fresh_database() as url:
        store = open_store(url)
        try:
            with pytest.raises(UsageError, match="PostgreSQL cannot store a value"):
                store.create_session(title="a\0b")
            assert store.list_sessions().sessions == []
        finally:
            store.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'[retry]\nmax_retries = "\xff"\n',
            "not valid TOML: not UTF-8 text (byte 0xff at offset 23)",
        ),
        (
            b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n",
            "not valid TOML: arrays or tables nested too deeply",
        ),
        (
            b"[execution]\nlease_ms = 9223372036854775807\n",
            "execution.lease_ms: must be 100..86400000",
        ),
        (
            b"[retry]\nmax_delay_ms = 9223372036854775807\n",
            "retry.max_delay_ms: must be at most 86400000",
        ),
    ],
)
def test_a_bad_configuration_file_is_one_line(tmp_path: Path, content: bytes, message: str):
    db = str(tmp_path / "sessions.db")
    work = make_workspace(tmp_path)
    (work / "wakeful.toml").write_bytes(content)
    done = subprocess.run(
        [WAKEFUL, "run", "--model", "scripted:none", "hi"],
        cwd=work,
        env=cli_env(db, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    one_line_error(done, f"{work / 'wakeful.toml'}: {message}")


def test_the_library_refuses_a_lone_surrogate_with_a_usage_error(tmp_path: Path):
    # issue 43 item 5: Runtime.send and run_sync raised pydantic's PydanticSerializationError
    db = str(tmp_path / "sessions.db")
    script = tmp_path / "script.json"
    script.write_text('{"rules": [{"match": ".", "replies": [{"text": "ok"}]}]}')
    model = f"scripted:{script}"
    rt = Runtime(db, model=model, workspace=make_workspace(tmp_path))
    try:
        with pytest.raises(UsageError, match="not valid Unicode"):
            rt.send("a lone \ud800 surrogate", resume=False)
        sid = rt.send("fine", resume=False).session_id
        with pytest.raises(UsageError, match="not valid Unicode"):
            rt.send("again \udfff", session_id=sid, resume=False)
        assert len(rt.store.pending(sid)) == 1  # the good one alone
    finally:
        asyncio.run(rt.aclose())
    with pytest.raises(UsageError, match="not valid Unicode"):
        run_sync("a lone \ud800 surrogate", db=db, model=model)
    assert sessions(db) == 1
