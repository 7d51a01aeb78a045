"""The cheap commands (`--version`, `session list`, `session show`, `log`) start without loading
what only other commands need: the provider SDKs, prompt_toolkit, the server, MCP, llama.cpp,
the configuration models; none of them loads pydantic or builds a model for what the store
wrote (`show` and `log` read it as plain JSON, `wakeful.events._plain`; issue 25,
`bench/bench_cold_start.py` measures the time)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Wk
from wakeful.events import (
    ApprovalRequested,
    MessageAdded,
    ReceiptRecorded,
    RetryScheduled,
    TurnEnded,
    UsageRecorded,
)
from wakeful.execution._writes import promote_idle
from wakeful.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from wakeful.store import open_store

# Top-level packages none of the cheap commands may import.
HEAVY = (
    "anthropic",
    "openai",
    "prompt_toolkit",
    "fastapi",
    "uvicorn",
    "starlette",
    "mcp",
    "llama_cpp",
    "httpx",
)


# Modules of our own none of them needs: the provider converters of the message package.
CONVERTERS = (
    "wakeful.messages._anthropic",
    "wakeful.messages._openai_chat",
    "wakeful.messages._openai_responses",
    "wakeful.messages._repair",
    "wakeful.config",
)

# What `--version` and `session list` leave out besides: neither decodes an event or a message,
# so no pydantic model (nor pydantic itself) is loaded (the store imports them where used).
MODEL_FREE = ("pydantic", "pydantic_core", "wakeful.events", "wakeful.messages")

# What `session show` and `log` leave out: they read the stored JSON without the models.
MODELS = (
    "pydantic",
    "pydantic.main",
    "wakeful.events._types",
    "wakeful.events._codec",
    "wakeful.messages._blocks",
    "wakeful.messages._codec",
    "wakeful.runner._turn",
    "wakeful.execution",
)


def modules(stderr: str) -> set[str]:
    """Module names in a `-X importtime` report."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def imported(stderr: str) -> set[str]:
    """Top-level package names in a `-X importtime` report."""
    return {name.split(".")[0] for name in modules(stderr)}


@pytest.fixture
def session_id(db_url: str) -> str:
    """A session with a delivered input, a tool call and its result (an image among its
    output), a run with its usage, a receipt and a retry, and a call waiting for approval."""
    store = open_store(db_url)
    try:
        row = store.create_session(title="cold")
        call = ToolCallBlock(id="c1", name="shell", input={"command": "ls"})
        result = ToolResultBlock(
            call_id="c1",
            output=(TextBlock(text="a.txt"), ImageBlock(media_type="image/png", data="aGk=")),
        )
        asking = Message(
            role="assistant",
            blocks=(ToolCallBlock(id="c2", name="shell", input={"command": "rm x"}),),
        )
        store.admit(row.id, "in1", "user", {"text": "hi"})
        promote_idle(store, row.id, None, start_turn="t1")
        store.append(
            row.id,
            [
                MessageAdded(
                    message=Message(role="assistant", blocks=(TextBlock(text="yo"), call))
                ),
                MessageAdded(message=Message(role="user", blocks=(result,))),
                UsageRecorded(input_tokens=5, output_tokens=2, cost_usd=0.5),
                ReceiptRecorded(
                    receipt_id="r", turn_id="t1", step=1, attempt=1, model="m", request_digest="d"
                ),
                RetryScheduled(
                    turn_id="t1", step=1, attempt=2, deadline_ms=1, error_kind="k", error="e"
                ),
                MessageAdded(message=asking),
                ApprovalRequested(
                    call_id="c2", message_id=asking.id, name="shell", preview="$ rm x"
                ),
                TurnEnded(turn_id="t1", outcome="paused", error="awaiting approval"),
            ],
        )
        return row.id
    finally:
        store.close()


@pytest.mark.usefixtures(
    "own_keys"
)  # the plain cold start (an encrypted listing opens sealed titles)
def test_cheap_commands_load_no_sdk_ui_or_server(
    wk: Wk, session_id: str, cli_env: dict[str, str], workdir: Path
) -> None:
    commands = [
        ["--version"],
        ["session", "list"],
        ["session", "show", session_id],
        ["session", "show", session_id, "--format", "json"],
        ["log", "--session", session_id],
        ["log", "--session", session_id, "--format", "jsonl"],
    ]
    for args in commands:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "wakeful", *args],
            cwd=workdir,
            env=cli_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        names = imported(done.stderr)
        assert "wakeful" in names  # the report is real: it lists our own package
        assert not names & set(HEAVY), (args, sorted(names & set(HEAVY)))
        assert not modules(done.stderr) & set(CONVERTERS), args
        if args[-1] in ("--version", "list"):
            assert not modules(done.stderr) & set(MODEL_FREE), (
                args,
                modules(done.stderr) & set(MODEL_FREE),
            )
        assert not modules(done.stderr) & set(MODELS), (args, modules(done.stderr) & set(MODELS))
    assert "0.1.0" in wk("--version").stdout
    assert "cold" in wk("session", "list").stdout
    shown = wk("session", "show", session_id).stdout
    assert "→ shell  ls\n  a.txt\n  [image image/png]" in shown
    assert "awaiting approval: c2  shell\n    $ rm x" in shown
    assert "run t1: paused, 1 steps, 5 in / 2 out, 1 retries" in shown
    assert "pending inputs" not in shown
    assert "cost_usd=0.5" in wk("log", "--session", session_id).stdout


def test_other_commands_still_load_what_they_need(wk: Wk) -> None:
    # `--help` lists every command, so each lazily registered command still resolves.
    out = wk("--help").stdout
    for name in (
        "approve",
        "chat",
        "compact",
        "config",
        "debug",
        "interrupt",
        "log",
        "run",
        "schedule",
        "send",
        "serve",
        "session",
        "worker",
    ):
        assert f"  {name} " in out
    assert "search" in wk("session", "--help").stdout
    assert "Usage" in wk("chat", "--help").stdout


def _fresh(code: str) -> str:
    """stdout of `code` run in a new interpreter (no model built by other tests)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_opening_a_store_and_listing_builds_no_model(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    open_store(str(db)).close()
    out = _fresh(
        "from wakeful.store import open_store\n"
        "from wakeful.events import SessionCreated, MessageAdded\n"
        "from wakeful.config import StoreConfig\n"
        f"s = open_store({str(db)!r}); s.list_sessions(); s.close()\n"
        "print(StoreConfig.__pydantic_complete__, SessionCreated.__pydantic_complete__,"
        " MessageAdded.__pydantic_complete__)"
    )
    assert out.split() == ["False", "False", "False"]


@pytest.mark.usefixtures(
    "own_keys"
)  # the plain cold start (an encrypted listing opens sealed titles)
def test_opening_a_store_and_listing_loads_no_model_module(tmp_path: Path) -> None:
    # The library path `session list` takes: the store package, `open_store`, a listing and
    # the summaries load neither pydantic nor the event and message models.
    db = tmp_path / "s.db"
    store = open_store(str(db))
    store.create_session(title="t")
    store.close()
    out = _fresh(
        "import sys\n"
        "from wakeful.store import open_store\n"
        f"s = open_store({str(db)!r})\n"
        "page = s.list_sessions(); s.session_summaries([r.id for r in page.sessions]); s.close()\n"
        "print(len(page.sessions), *sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic'"
        " or m.startswith(('wakeful.events', 'wakeful.messages', 'wakeful.config'))))"
    )
    assert out.split() == ["1"]


def test_an_event_is_decoded_by_its_own_model_alone() -> None:
    # Only the named type's model is built; the others stay deferred until used.
    out = _fresh(
        "from wakeful.events import load_event, SessionCreated, TurnEnded\n"
        'e = load_event(\'{"v":1,"type":"session.created","title":"t"}\')\n'
        "print(type(e).__name__, e.title, SessionCreated.__pydantic_complete__,"
        " TurnEnded.__pydantic_complete__)"
    )
    assert out.split() == ["SessionCreated", "t", "True", "False"]


@pytest.mark.parametrize(
    "body",
    [
        '{"type": "session.created", "v": 1, "title": "t"}',  # another key order: the union
        '{"v":1,"type":"session.updated","type":"session.created","title":"t"}',  # last key wins
        '{ "v" : 1 , "type" : "session.created" , "title" : "t" }',
    ],
)
def test_any_event_body_still_decodes_as_the_union_reads_it(body: str) -> None:
    from pydantic import TypeAdapter

    from wakeful.events import SessionCreated, SessionEvent, load_event

    event = load_event(body)
    assert isinstance(event, SessionCreated) and event.title == "t"
    assert event == TypeAdapter(SessionEvent).validate_json(body)


def test_an_unreadable_event_is_a_store_error() -> None:
    from wakeful.errors import StoreError
    from wakeful.events import load_event

    with pytest.raises(StoreError, match="unreadable event"):
        load_event('{"v":1,"type":"session.created","title":5}')
    with pytest.raises(StoreError, match="unreadable event"):
        load_event('{"v":1,"type":"no.such.type"}')
