"""`wakeful acp` as an editor meets it: an ACP client written with the same SDK starts the
agent as a real subprocess, prompts, is asked for permission, grants it, SIGKILLs the agent
mid-turn, starts it again and loads the session: the history is whole, the tool ran once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UserMessageChunk,
)

from tests.cli.conftest import write_script
from wakeful.store import open_store

GO = "echo ran >> ledger.txt"
FINAL = "The ledger has one line now, and that is all."
RULES = [
    {
        "match": "^go$",
        "replies": [
            {"tool_calls": [{"name": "shell", "input": {"command": GO}}]},
            {"text": FINAL},
        ],
    },
    {"match": "^hello$", "replies": [{"text": "hi there"}]},
    {"match": "^slow$", "replies": [{"text": FINAL}]},
]


class Editor:
    """The editor side: records every update, answers permission requests with `answer`."""

    def __init__(self, answer: str | None = "allow") -> None:
        self.answer = answer
        self.updates: list[Any] = []
        self.asked: list[tuple[ToolCallUpdate, list[str]]] = []
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)
        self.changed.set()

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        self.asked.append((tool_call, [o.option_id for o in options]))
        if self.answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.answer)
        )

    async def wait_for(self, found: Callable[[list[Any]], bool]) -> None:
        async with asyncio.timeout(60):
            while not found(self.updates):
                self.changed.clear()
                await self.changed.wait()

    def text(self) -> str:
        return "".join(u.content.text for u in self.updates if isinstance(u, AgentMessageChunk))


@pytest.fixture
def ask_shell(workdir: Path) -> Path:
    (workdir / "wakeful.toml").write_text('[permissions]\nshell = "ask"\n')
    return workdir


@asynccontextmanager
async def agent(
    editor: Editor, model: str, env: dict[str, str], cwd: Path
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process]]:
    async with spawn_agent_process(
        editor, sys.executable, "-m", "wakeful", "acp", "--model", model, env=env, cwd=cwd
    ) as (conn, proc):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session
        yield conn, proc


def ledger(workdir: Path) -> Counter[str]:
    path = workdir / "ledger.txt"
    return Counter(path.read_text().split()) if path.exists() else Counter()


def events_of(db: str, sid: str) -> list[str]:
    store = open_store(db)
    try:
        return [e.event.type for e in store.events(sid)]
    finally:
        store.close()


@pytest.mark.slow
async def test_a_killed_agent_loses_nothing_and_runs_the_tool_once(
    cli_env: dict[str, str], db_url: str, ask_shell: Path
):
    workdir = ask_shell
    model = write_script(workdir, RULES, chunk_chars=4, chunk_delay_ms=150)
    editor = Editor("allow")
    async with agent(editor, model, cli_env, workdir) as (conn, proc):
        new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        sid = new.session_id
        assert new.modes is not None and new.modes.current_mode_id == "build"
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        # The call is shown, asked about, granted, run; the reply after it starts streaming.
        await editor.wait_for(lambda us: any(isinstance(u, AgentMessageChunk) for u in us))
        [(asked, options)] = editor.asked
        assert asked.title == f"shell: $ {GO}" and asked.kind == "execute"
        assert options == ["allow", "always", "deny"]
        statuses = [u.status for u in editor.updates if isinstance(u, ToolCallProgress)]
        assert statuses == ["in_progress", "completed"]
        proc.kill()  # SIGKILL, mid-turn: the final reply is still streaming
        await proc.wait()
        with pytest.raises((ConnectionError, RequestError, asyncio.IncompleteReadError, Exception)):
            await asyncio.wait_for(prompt, 10)
    assert FINAL not in editor.text()  # it really was cut off
    assert ledger(workdir) == {"ran": 1}

    again = Editor(answer=None)  # nothing may be asked again
    async with agent(again, model, cli_env, workdir) as (conn, _):
        await conn.load_session(cwd=str(workdir), session_id=sid, mcp_servers=[])
        shown = again.updates
        assert [u.content.text for u in shown if isinstance(u, UserMessageChunk)] == ["go"]
        [call] = [u for u in shown if isinstance(u, ToolCallStart)]
        assert call.title == f"shell: $ {GO}" and call.raw_input == {"command": GO}
        results = [u for u in shown if isinstance(u, ToolCallProgress) and u.status == "completed"]
        assert [r.tool_call_id for r in results] == [call.tool_call_id]
        assert again.text().endswith(FINAL)  # the recovered turn finished while loading
        assert again.asked == []
        # The session goes on in the restarted agent.
        done = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert done.stop_reason == "end_turn" and again.text().endswith("hi there")
    assert ledger(workdir) == {"ran": 1}
    types = events_of(db_url, sid)
    assert types.count("tool.started") == 1 and types.count("approval.decided") == 1


async def test_a_prompt_streams_and_a_new_session_lives_in_the_editors_directory(
    cli_env: dict[str, str], db_url: str, workdir: Path
):
    model = write_script(workdir, RULES)
    where = str(workdir)  # pytest.s tmp_path is already resolved
    editor = Editor()
    async with agent(editor, model, cli_env, workdir.parent) as (conn, _):
        new = await conn.new_session(cwd=str(workdir), mcp_servers=[])
        done = await conn.prompt(session_id=new.session_id, prompt=[text_block("hello")])
        assert done.stop_reason == "end_turn"
        assert editor.text() == "hi there"
        listed = await conn.list_sessions(cwd=str(workdir))
        assert [s.session_id for s in listed.sessions] == [new.session_id]
        assert listed.sessions[0].cwd == where
    store = open_store(db_url)
    try:
        assert store.get_session(new.session_id).location == where
    finally:
        store.close()


async def test_a_denied_call_is_answered_and_a_cancelled_question_stays_waiting(
    cli_env: dict[str, str], db_url: str, ask_shell: Path
):
    workdir = ask_shell
    model = write_script(workdir, RULES)
    editor = Editor(answer=None)  # the editor cancels the question
    async with agent(editor, model, cli_env, workdir) as (conn, _):
        sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
        first = await conn.prompt(session_id=sid, prompt=[text_block("go")])
        assert first.stop_reason == "cancelled" and len(editor.asked) == 1
        assert ledger(workdir) == Counter()
        editor.answer = "deny"  # the next prompt asks about the waiting call first
        second = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        assert second.stop_reason == "end_turn" and len(editor.asked) == 2
        failed = [
            u for u in editor.updates if isinstance(u, ToolCallProgress) and u.status == "failed"
        ]
        assert len(failed) == 1 and "denied" in json.dumps(failed[0].raw_output)
    assert ledger(workdir) == Counter()
    types = events_of(db_url, sid)
    assert types.count("approval.decided") == 1 and types.count("tool.started") == 1


async def test_mode_and_model_are_the_sessions_agent_and_model(
    cli_env: dict[str, str], db_url: str, workdir: Path
):
    model = write_script(workdir, RULES)
    other_file = workdir.parent / "other.json"
    other_file.write_text(json.dumps({"rules": RULES}))
    other = f"scripted:{other_file}"
    editor = Editor()
    async with agent(editor, model, cli_env, workdir) as (conn, _):
        sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        changed = await conn.set_config_option(config_id="model", session_id=sid, value=other)
        assert {o.id: o.current_value for o in changed.config_options} == {
            "mode": "plan",
            "model": other,
        }
        with pytest.raises(RequestError) as bad:
            await conn.set_session_mode(session_id=sid, mode_id="nobody")
        assert "nobody" in str(bad.value.data)
        with pytest.raises(RequestError):
            await conn.load_session(cwd=str(workdir), session_id="ses_missing", mcp_servers=[])
    store = open_store(db_url)
    try:
        row = store.get_session(sid)
        assert (row.agent, row.model) == ("plan", other)
    finally:
        store.close()


def test_a_regular_file_for_stdout_is_refused_in_one_line(
    cli_env: dict[str, str], workdir: Path, tmp_path: Path
):
    with (tmp_path / "out.txt").open("w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "wakeful", "acp"],
            cwd=workdir,
            env=cli_env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "error: wakeful acp speaks JSON-RPC on stdin and stdout; stdout is a regular file "
        "(start it from an editor, whose pipes it talks to)"
    ]


async def test_cancel_interrupts_the_turn_and_the_prompt_answers_cancelled(
    cli_env: dict[str, str], db_url: str, workdir: Path
):
    model = write_script(workdir, RULES, chunk_chars=4, chunk_delay_ms=150)
    editor = Editor()
    async with agent(editor, model, cli_env, workdir) as (conn, _):
        sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("slow")]))
        await editor.wait_for(lambda us: any(isinstance(u, AgentMessageChunk) for u in us))
        await conn.cancel(session_id=sid)
        done = await asyncio.wait_for(prompt, 30)
        assert done.stop_reason == "cancelled" and FINAL not in editor.text()
    types = events_of(db_url, sid)
    assert "session.interrupt_requested" in types
    store = open_store(db_url)
    try:
        [ended] = [e.event for e in store.events(sid) if e.event.type == "turn.ended"]
        assert ended.outcome == "interrupted"
    finally:
        store.close()
