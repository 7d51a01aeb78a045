"""A recorded step replayed to two models behind loopback servers speaking the Anthropic and
OpenAI protocols, through the official SDKs: both answers and their diffs come back, the
recorded request is what is sent again (adapted to each wire format only), and the source
session's log is byte for byte what it was."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.providers.fake_servers import FakeServer
from tests.replay.wire import a_text, a_tool_call, o_text
from wakeful.config import Config, FamilyConfig, ProvidersConfig
from wakeful.events import EvalCaseEnded, EvalStarted
from wakeful.execution import Runtime
from wakeful.replay import read_run, replay_step, reply_diff

CLAUDE = "anthropic:claude-fake-1"
GPT = "openai:gpt-fake-1"


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeServer, FakeServer]]:
    async with FakeServer() as anthropic, FakeServer() as openai:
        yield anthropic, openai


def _runtime(
    tmp_path: Path, a: FakeServer, o: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> Runtime:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    providers = ProvidersConfig(
        anthropic=FamilyConfig(base_url=a.url), openai=FamilyConfig(base_url=f"{o.url}/v1")
    )
    config = Config(providers=providers, permissions={"shell": "allow"})
    return Runtime(str(tmp_path / "s.db"), model=CLAUDE, workspace=tmp_path, config=config)


def _log(db: Path, sid: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        events = conn.execute(
            "SELECT id, seq, type, at_ms, data FROM events WHERE session_id = ? ORDER BY seq",
            (sid,),
        ).fetchall()
        row = conn.execute("SELECT * FROM sessions WHERE id = ?", (sid,)).fetchall()
    return [*events, *row]


async def test_a_step_replayed_to_two_models_leaves_the_source_untouched(
    tmp_path: Path, servers: tuple[FakeServer, FakeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    anthropic, openai = servers
    rt = _runtime(tmp_path, anthropic, openai, monkeypatch)
    anthropic.enqueue(a_tool_call("toolu_1", "echo recorded-output"), a_text("The tool said it."))
    [turn] = await rt.run("run the tool please")
    assert turn.outcome == "completed", turn.error
    sid = rt.store.list_sessions().sessions[0].id
    before = _log(tmp_path / "s.db", sid)
    sent_then = anthropic.requests[1].json()  # step 2: the history holds the tool's result

    anthropic.enqueue(a_text("Claude again: the output was recorded-output."))
    openai.enqueue(o_text("GPT: it printed recorded-output."))
    done = await replay_step(rt, sid, [CLAUDE, GPT], turn=1, step=2)

    assert _log(tmp_path / "s.db", sid) == before  # not a byte of the source changed
    assert anthropic.requests[2].json() == sent_then  # the recorded request, sent again as it was
    wire = openai.requests[0].json()
    assert wire["model"] == "gpt-fake-1"
    assert any(
        m.get("role") == "tool" and "recorded-output" in str(m.get("content"))
        for m in wire["messages"]
    )  # the same history, in Chat Completions' shape
    [case] = done.view.started.cases
    claude, gpt = done.view.results[(case.id, CLAUDE)], done.view.results[(case.id, GPT)]
    assert claude.text == "Claude again: the output was recorded-output."
    assert gpt.text == "GPT: it printed recorded-output."
    assert (gpt.input_tokens, gpt.output_tokens, gpt.finish) == (50, 9, "stop")
    assert done.original.text == "The tool said it." and done.original.finish == "stop"
    diff = "\n".join(reply_diff(done.original, gpt, GPT))
    assert "-The tool said it." in diff and "+GPT: it printed recorded-output." in diff

    # The replay is a run of its own, linked to the step it replays.
    run = read_run(rt.store, done.view.run_id)
    assert run.ended and run.started.kind == "replay"
    assert run.started.source is not None and run.started.source["session_id"] == sid
    assert rt.store.metadata(done.view.run_id)["replay"]["receipt_id"] == case.receipt_id
    ended = [
        e.event for e in rt.store.events(done.view.run_id) if isinstance(e.event, EvalCaseEnded)
    ]
    assert sorted(e.model for e in ended) == sorted([CLAUDE, GPT])
    assert [e.event.type for e in rt.store.events(done.view.run_id)][:2] == [
        "session.created",
        EvalStarted(name="x", models=(), cases=()).type,
    ]
    await rt.aclose()
