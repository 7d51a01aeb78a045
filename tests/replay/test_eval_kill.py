"""An eval of 30 cases on two models (loopback Anthropic and OpenAI servers through the
official SDKs), SIGKILLed twice mid-run and started again, finishes with every case answered
exactly once by each model: the servers count the requests they answered. Requests the killed
process had in flight are held at the server (a closed gate) and never answered, so each kill
leaves pairs that were started and never finished; the restarted run sends those again (their
attempt 2) and nothing that has a result. The report and the JUnit file agree."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.allow import allow_writes
from tests.providers.fake_servers import FakeServer, Recorded, Reply
from tests.replay.wire import a_text, o_text
from wakeful.store import open_store

pytestmark = pytest.mark.slow
CASES = 30
MODELS = ("anthropic:claude-fake-1", "openai:gpt-fake-1")
_CASE = re.compile(rb"case-(\d+)")


class Answering:
    """Answers `case-N` with `ok N` after a short delay (`no N` from OpenAI for every 7th
    case: a failure the report must show), counting answered requests per case. While the
    gate is closed a request is held uncounted; one held across a kill is never answered."""

    def __init__(self, server: FakeServer, reply: type[object] | object) -> None:
        self.server = server
        self.reply = reply
        self.answered: Counter[int] = Counter()
        self.open = asyncio.Event()
        self.open.set()
        self.epoch = 0
        server.respond = self.respond

    async def respond(self, request: Recorded) -> Reply | None:
        epoch = self.epoch
        await self.open.wait()
        if epoch != self.epoch:  # its process was killed while it was held
            return None
        await asyncio.sleep(0.04)
        found = _CASE.search(request.body)
        assert found is not None, request.body[:200]
        n = int(found.group(1))
        self.answered[n] += 1
        text = f"no {n}" if self.reply is o_text and n % 7 == 0 else f"ok {n}"
        return self.reply(text)  # type: ignore[operator, no-any-return]


def _suite(work: Path, a: FakeServer, o: FakeServer) -> Path:
    (work / "wakeful.toml").write_text(
        f'[providers.anthropic]\nbase_url = "{a.url}"\n\n[providers.openai]\nbase_url = "{o.url}/v1"\n'
    )
    cases = "".join(
        f'\n[[cases]]\nid = "c{n:02d}"\nprompt = "case-{n}: answer ok"\n'
        f'graders = [{{kind = "regex", pattern = "^ok \\\\d+$"}}]\n'
        for n in range(1, CASES + 1)
    )
    models = ", ".join(f'{{spec = "{m}", concurrency = 3}}' for m in MODELS)
    path = work / "suite.toml"
    path.write_text(f'name = "kill"\nmodels = [{models}]\n{cases}')
    return path


def _results(db: str) -> int:
    store = open_store(db)
    try:
        runs = [s.id for s in store.list_sessions(limit=10).sessions if s.title == "eval kill"]
        return len(store.events(runs[0], types=["eval.case_ended"])) if runs else 0
    finally:
        store.close()


async def _until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(60):
        while not await asyncio.to_thread(check):  # noqa: ASYNC110 (a store and a server, polled)
            await asyncio.sleep(0.05)


async def test_an_eval_killed_twice_runs_every_case_once_per_model(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").mkdir()
    db = str(tmp_path / "s.db")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {
        "WAKEFUL_DB": db,
        "ANTHROPIC_API_KEY": "k",
        "OPENAI_API_KEY": "k",
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
    }
    allow_writes(tmp_path / ".config")
    async with FakeServer() as a_server, FakeServer() as o_server:
        servers = (Answering(a_server, a_text), Answering(o_server, o_text))
        suite = _suite(work, a_server, o_server)
        args = [
            sys.executable,
            "-m",
            "wakeful",
            "eval",
            str(suite),
            "--format",
            "json",
            "--junit",
            str(tmp_path / "junit.xml"),
        ]

        def answered() -> int:
            return sum(sum(s.answered.values()) for s in servers)

        for at in (15, 38):  # two kills, each once that many pairs were answered
            proc = await asyncio.create_subprocess_exec(
                *args, cwd=work, env=env, stdout=asyncio.subprocess.DEVNULL
            )
            await _until(lambda at=at: answered() >= at)
            for s in servers:  # hold what is sent from now on: it is in flight at the kill
                s.open.clear()
            await _until(lambda: _results(db) == answered())  # every answer is durable
            await asyncio.sleep(0.3)  # the next requests reach the gate and wait there
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            for s in servers:
                s.epoch += 1
                s.open.set()
        final = await asyncio.create_subprocess_exec(
            *args, cwd=work, env=env, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(final.communicate(), timeout=120)
        assert final.returncode == 0
    for s in servers:  # every case answered exactly once by each model
        assert s.answered == Counter(range(1, CASES + 1)), s.answered
    report = json.loads(out)
    assert report["finished"] and report["done"] == report["total"] == 2 * CASES
    resent = [(c["id"], m) for c in report["cases"] for m, n in c["attempts"].items() if n > 1]
    assert resent, "no pair was in flight at a kill: the test did not kill mid-run"
    rows = {r["model"]: r for r in report["models"]}
    assert rows[MODELS[0]]["passed"] == CASES
    assert (
        rows[MODELS[1]]["failed"] == CASES // 7 and rows[MODELS[1]]["passed"] == CASES - CASES // 7
    )
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    for suite_el in junit.iter("testsuite"):
        model = next(m for m in MODELS if m in suite_el.get("name", ""))
        tests = suite_el.findall("testcase")
        failed = {t.get("name") for t in tests if t.find("failure") is not None}
        assert len(tests) == int(suite_el.get("tests", "0")) == rows[model]["cases"] == CASES
        assert len(failed) == int(suite_el.get("failures", "0")) == rows[model]["failed"]
        assert failed == {c["id"] for c in report["cases"] if not c["results"][model]["passed"]}


async def test_a_turn_case_killed_mid_tool_resumes_its_own_session(tmp_path: Path) -> None:
    """A `turn` case killed while its tool runs: started again, the eval resumes the same
    session through the runtime's recovery (the call is settled as possibly run, never run
    again) instead of starting a second one, and the prompt is delivered once."""
    work = tmp_path / "work"
    work.mkdir()
    (work / ".git").mkdir()
    (work / "wakeful.toml").write_text('[permissions]\nshell = "allow"\n')
    script = tmp_path / "m.json"
    script.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": "slow",
                        "replies": [
                            {
                                "tool_calls": [
                                    {
                                        "name": "shell",
                                        "input": {
                                            "command": "echo started >> marks.txt; sleep 30; echo finished >> marks.txt"
                                        },
                                    }
                                ]
                            },
                            {"text": "all done"},
                        ],
                    }
                ]
            }
        )
    )
    suite = work / "suite.toml"
    suite.write_text(
        f'models = ["scripted:{script}"]\n[[cases]]\nid = "slow"\n'
        'prompt = "the slow one"\nmode = "turn"\n'
        'graders = [{kind = "contains", value = "all done"}]\n'
    )
    db = str(tmp_path / "s.db")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"WAKEFUL_DB": db, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    allow_writes(tmp_path / ".config")
    args = [sys.executable, "-m", "wakeful", "eval", str(suite), "--format", "json"]
    proc = await asyncio.create_subprocess_exec(
        *args, cwd=work, env=env, stdout=asyncio.subprocess.DEVNULL
    )
    await _until(lambda: (work / "marks.txt").exists())
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    final = await asyncio.create_subprocess_exec(
        *args, cwd=work, env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(final.communicate(), timeout=120)
    assert final.returncode == 0
    [case] = json.loads(out)["cases"]
    result = case["results"][f"scripted:{script}"]
    assert result["passed"] and result["text"] == "all done"
    assert (work / "marks.txt").read_text() == "started\n"  # never run a second time
    store = open_store(db)
    try:
        sessions = [
            s
            for s in store.list_sessions(limit=50).sessions
            if store.metadata(s.id).get("eval_case") == "slow"
        ]
        assert [s.id for s in sessions] == [result["session_id"]]
        texts = [m.text() for m in store.messages(sessions[0].id) if m.role == "user"]
        assert texts.count("the slow one") == 1  # delivered once (then the takeover's note)
        results = [
            b
            for m in store.messages(sessions[0].id)
            for b in m.blocks
            if getattr(b, "type", "") == "tool_result"
        ]
        assert len(results) == 1 and "may have" in str(results[0].output)
    finally:
        store.close()
