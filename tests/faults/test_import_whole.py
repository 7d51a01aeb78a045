"""Issue 43 items 2 and 4: `session import` checks the whole file before it writes anything,
and each refusal is one line naming the file's line (as an editor numbers it, blank lines
counted): a message id used twice, a message over the store's limit, JSON that does not parse,
a field that does not fit. The real `wakeful` command on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.execution.helpers import WAKEFUL, cli_env, make_workspace
from wakeful.store import MESSAGE_MAX_BYTES, open_store

HEADER = json.dumps({"wakeful_export": 1, "session": {"id": "ses_src", "title": "imported"}})


def message(mid: str, text: str = "hello", role: str = "user") -> str:
    return json.dumps({"id": mid, "role": role, "blocks": [{"type": "text", "text": text}]})


BIG = message("msg_b", "x" * MESSAGE_MAX_BYTES)


def run_import(tmp_path: Path, db: str, lines: list[str]) -> subprocess.CompletedProcess[str]:
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join(lines) + "\n")
    return subprocess.run(
        [WAKEFUL, "session", "import", str(export)],
        cwd=make_workspace(tmp_path),
        env=cli_env(db, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )


def stored(db: str) -> list[list[str]]:
    """The message ids of every session in the store."""
    store = open_store(db)
    try:
        return [
            [m.id for m in store.messages(s.id)]
            for s in store.list_sessions(archived=None).sessions
        ]
    finally:
        store.close()


def refused(done: subprocess.CompletedProcess[str], tmp_path: Path, problem: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"error: {tmp_path / 'export.jsonl'} {problem}"]


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        (
            [
                HEADER,
                message("msg_a"),
                message("msg_b", role="assistant"),
                message("msg_a", "again"),
            ],
            "line 4: message id msg_a repeats line 2",
        ),
        (
            [HEADER, message("msg_a"), "", '{"id": "msg_b", "role": "user", "blocks": [}'],
            "line 4: not valid JSON: Expecting value (column 44)",
        ),
        (
            [HEADER, message("msg_a"), message("msg_b", role="wizard")],
            "line 3: not a message: role: Input should be 'user', 'assistant' or 'system'",
        ),
        (
            [HEADER, message("msg_a"), BIG],
            f"line 3: a message of {len(BIG)} bytes is over the store's limit of {MESSAGE_MAX_BYTES}",
        ),
        (
            [
                HEADER,
                message("msg_a", role="wizard"),
                message("msg_a"),
                message("msg_a"),
            ],  # 2 and 4
            "line 2: not a message: role: Input should be 'user', 'assistant' or 'system' "
            "(and 1 more line with a problem)",
        ),
    ],
    ids=["duplicate-id", "bad-json", "bad-role", "too-large", "several"],
)
def test_an_import_with_a_bad_line_writes_nothing_and_names_the_line(
    tmp_path: Path, db_url: str, lines: list[str], problem: str
):
    refused(run_import(tmp_path, db_url, lines), tmp_path, problem)
    assert stored(db_url) == []


def test_a_good_import_is_stored_whole(tmp_path: Path, db_url: str):
    done = run_import(
        tmp_path, db_url, [HEADER, message("msg_a"), "", message("msg_b", role="assistant")]
    )
    assert done.returncode == 0, done.stderr
    assert stored(db_url) == [["msg_a", "msg_b"]]
