"""wakeful against software nobody here wrote: llama-cpp-python's own OpenAI-compatible server
(`python -m llama_cpp.server`, the `local` extra) on the bundled SmolLM2 model, driven through
`wakeful run --model openai-compatible:smol@URL` in real subprocesses.

One server per module, with a small window (`--n_ctx`), so each request is quick. Histories that
the tiny model could not produce on purpose (a tool call with no text, a very long reply) are
written by the scripted model; the session then continues on the server after a recorded model
update, as any session whose model changes does. Skipped when the extra is not installed (a
failure under CI=true, where `make test` installs it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from wakeful.events import CompactionEnded, SessionUpdated
from wakeful.store import open_store

pytestmark = pytest.mark.slow

N_CTX = 512  # the server's window; wakeful is not told it (its default is 32,768)
# About 560 tokens: a history holding it is over the window. The summary request of the overflow
# compaction leaves its oldest entries out until it fits (this reply among them), so the
# summary too is written by the same server.
LONG_REPLY = "The quick brown fox jumps over the lazy dog near the river bank. " * 40
CONFIG = """
default_agent = "tiny"

[retry]
initial_delay_ms = 50
max_delay_ms = 200

[compaction]
tail_turns = 0

[agents.tiny]
system_prompt = "You are a helpful assistant. Answer in one short sentence."
tools = ["read_file"]
max_steps = 4

[providers.models.smol]
max_output_tokens = 32
accepts = []
"""

Wk = Callable[..., dict[str, Any]]


SERVER_MODULES = ("llama_cpp", "llama_cpp.server", "fastapi", "sse_starlette", "starlette_context")


def _server_missing() -> str | None:
    for module in SERVER_MODULES:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except ImportError:
            return module
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running llama-cpp-python server; yields its `/v1` base URL."""
    missing = _server_missing()
    if missing is not None:
        reason = f"llama-cpp-python's server needs the `local` extra ({missing} is not installed)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    from wakeful.providers._local import locate_weights

    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    args = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(locate_weights()),
        "--model_alias",
        "smol",
        "--n_ctx",
        str(N_CTX),
        "--seed",
        "7",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"the llama server exited:\n{log.read_text()[-4000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the llama server did not start:\n{log.read_text()[-4000:]}")
            time.sleep(0.2)  # polling the server's own readiness, not waiting out a guess
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / "notes.txt").write_text("alpha\n")
    (tmp_path / "wakeful.toml").write_text(CONFIG)
    return work


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "sessions.db")


@pytest.fixture
def wk(tmp_path: Path, workdir: Path, db: str) -> Wk:
    """`wakeful ARGS --format json` in the workspace; returns the parsed output."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {
        "WAKEFUL_DB": db,
        "WAKEFUL_CONFIG": str(tmp_path / "wakeful.toml"),
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "XDG_DATA_HOME": str(tmp_path / ".local"),
    }

    def run(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "wakeful", *args, "--format", "json"],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        failed = f"wakeful {args} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert done.returncode == 0, failed
        return dict(json.loads(done.stdout))

    return run


def _script(tmp_path: Path, rules: list[dict[str, Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rules": rules}))
    return f"scripted:{path}"


def _continue_on(db: str, session_id: str, model: str) -> None:
    """Record that the session's model is now `model` (the session's own, durable choice)."""
    store = open_store(db)
    try:
        store.append(session_id, [SessionUpdated(model=model)])
    finally:
        store.close()


def _events(db: str, session_id: str, kind: str) -> list[Any]:
    store = open_store(db)
    try:
        return [e.event for e in store.events(session_id, types=[kind])]
    finally:
        store.close()


def test_a_plain_turn(llama: str, wk: Wk, db: str) -> None:
    out = wk("run", "--model", f"openai-compatible:smol@{llama}", "Say hello to Ada.")
    assert out["outcome"] == "completed", out
    assert out["text"].strip()
    assert _events(db, out["session_id"], "retry.scheduled") == []


def test_a_history_with_a_textless_tool_call_continues_on_the_server(
    llama: str, wk: Wk, db: str, tmp_path: Path
) -> None:
    scripted = _script(
        tmp_path,
        [
            {
                "match": "notes",
                "replies": [
                    {"tool_calls": [{"name": "read_file", "input": {"path": "notes.txt"}}]},
                    {"text": "The notes say alpha."},
                ],
            }
        ],
    )
    first = wk("run", "--model", scripted, "Read notes.txt, please.")
    assert first["outcome"] == "completed" and first["turns"][0]["turn_id"]
    sid = first["session_id"]
    shown = wk("session", "show", sid)
    call = shown["messages"][1]
    assert [b["type"] for b in call["blocks"]] == ["tool_call"]  # a tool call and no text
    _continue_on(db, sid, f"openai-compatible:smol@{llama}")
    out = wk("run", "--session", sid, "Thank you. Now say goodbye.")
    assert out["outcome"] == "completed", out  # llama.cpp answered 500 to `"content": null`
    assert out["text"].strip()
    assert _events(db, sid, "retry.scheduled") == []


def test_an_oversized_prompt_is_recovered_by_compaction(
    llama: str, wk: Wk, db: str, tmp_path: Path
) -> None:
    scripted = _script(
        tmp_path,
        [
            {"match": "essay", "replies": [{"text": LONG_REPLY}]},
            {"match": "colour", "replies": [{"text": "Blue."}]},
        ],
    )
    sid = wk("run", "--model", scripted, "Write the essay.")["session_id"]
    wk("run", "--session", sid, "Thanks. Now name a colour.")
    _continue_on(db, sid, f"openai-compatible:smol@{llama}")
    out = wk("run", "--session", sid, "In one sentence, what was that about?")
    assert out["outcome"] == "completed", out
    assert out["text"].strip()
    [ended] = _events(db, sid, "compaction.ended")
    assert isinstance(ended, CompactionEnded) and ended.reason == "overflow"
    assert ended.model == f"openai-compatible:smol@{llama}"  # the server wrote the summary
    assert ended.replaced == 4 and ended.dropped >= 2  # the essay did not fit the summary either
    assert _events(db, sid, "retry.scheduled") == []


def test_a_reply_cut_by_a_small_output_limit_is_shown_as_truncated(llama: str, wk: Wk) -> None:
    model = f"openai-compatible:smol@{llama}"
    out = wk("run", "--model", model, "--max-output-tokens", "3", "Tell me a long story.")
    assert out["outcome"] == "completed" and out["truncated"] is True, out
    shown = wk("session", "show", out["session_id"])
    assert shown["messages"][-1]["metadata"]["truncated"] is True
    assert shown["runs"][-1]["truncated"] is True
