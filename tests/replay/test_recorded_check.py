"""`replay --check`: a session recorded through the Anthropic or the OpenAI SDK against a
loopback server is
re-driven through today's code from its recording alone (no server, no key): every request's
digest comes back; after an AGENTS.md edit the first differing request is named, with the
changed section and the diff of the bodies."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.providers.fake_servers import FakeServer
from tests.replay.wire import a_text, a_tool_call, o_call, o_text
from wakeful.config import Config, FamilyConfig, ProvidersConfig
from wakeful.execution import Runtime
from wakeful.replay import body_diff, check_session

FAMILIES = {  # model, key variable, base URL path, a tool call, a text answer
    "openai": ("openai:gpt-fake-1", "OPENAI_API_KEY", "/v1", o_call, o_text),
    "anthropic": ("anthropic:claude-fake-1", "ANTHROPIC_API_KEY", "", a_tool_call, a_text),
}


@pytest.fixture(params=sorted(FAMILIES))
def family(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> tuple[Runtime, str, int]:
    """Ten turns, each a shell call (really run) and an answer, recorded against the server."""
    model, key, path, call, text = FAMILIES[family]
    monkeypatch.setenv(key, "test-key")
    (tmp_path / "AGENTS.md").write_text("House rule: answer in one line.\n")
    async with FakeServer() as server:
        table = FamilyConfig(base_url=f"{server.url}{path}")
        providers = ProvidersConfig.model_validate({family: table})
        config = Config(providers=providers, permissions={"shell": "allow"})
        rt = Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config)
        sid = None
        for n in range(1, 11):
            server.enqueue(
                call(f"call_{n}", f"echo turn-{n} >> log.txt; cat log.txt"), text(f"answer {n}")
            )
            [turn] = await rt.run(f"prompt number {n}", session_id=sid)
            assert turn.outcome == "completed", turn.error
            sid = sid or rt.store.list_sessions().sessions[0].id
        sent = len(server.requests)
    assert sid is not None
    monkeypatch.delenv(key)  # the check needs no key, and the server is gone
    (tmp_path / "log.txt").write_text("the workspace moved on since\n")
    return rt, sid, sent


async def test_a_recorded_session_reproduces_every_digest_then_names_the_first_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str
) -> None:
    rt, sid, sent = await _record(tmp_path, monkeypatch, family)
    receipts = rt.store.receipts(sid)
    assert sent == len(receipts) == 20

    result = await check_session(rt.store, sid)
    assert result.ok, result.difference
    assert (result.requests, result.matched, result.exact) == (20, 20, 20)  # every digest, exactly

    (tmp_path / "AGENTS.md").write_text("House rule: answer in two lines.\n")
    changed = await check_session(rt.store, sid)
    assert not changed.ok and changed.matched == 0
    d = changed.difference
    assert d is not None and d.index == 1 and d.label == "turn 1 step 1"
    assert d.recorded_digest == receipts[0].request_digest != d.replayed_digest
    assert [s[0] for s in d.sections] == ["system.instructions.AGENTS.md"]
    diff = "\n".join(body_diff(d.recorded_body, d.replayed_body, "recorded", "today"))
    assert "-" in diff and "answer in one line" in diff and "answer in two lines" in diff
    await rt.aclose()


async def test_a_session_whose_location_is_gone_is_refused_in_one_line(tmp_path: Path) -> None:
    import shutil

    from wakeful.errors import LocationUnavailableError

    place = tmp_path / "gone"
    place.mkdir()
    script = tmp_path / "s.json"
    script.write_text('{"rules": [{"match": ".", "replies": [{"text": "hi"}]}]}')
    rt = Runtime(str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=place)
    await rt.run("hello")
    sid = rt.store.list_sessions().sessions[0].id
    shutil.rmtree(place)
    with pytest.raises(LocationUnavailableError, match="not a directory on this host"):
        await check_session(rt.store, sid)
    await rt.aclose()
