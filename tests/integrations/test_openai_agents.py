"""wakeful as the OpenAI Agents SDK's session store: the protocol, a real run, two processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from agents.memory import SessionSettings
from agents.memory.session import Session
from openai import AsyncOpenAI

from wakeful.errors import UsageError
from wakeful.integrations.openai_agents import WakefulSession
from wakeful.store import SqlStore

ROOT = Path(__file__).resolve().parents[2]

# The shapes the SDK persists (`RunItem.to_input_item()` and user input).
USER = {"role": "user", "content": "What is 2 + 3?"}
DEVELOPER = {"role": "developer", "content": "Be terse."}
REASONING = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "add"}],
}
CALL = {
    "id": "fc_1",
    "type": "function_call",
    "call_id": "call_1",
    "name": "add",
    "arguments": '{"a": 2, "b": 3}',
    "status": "completed",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "5"}
ANSWER = {
    "id": "msg_a1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "It is 5.", "annotations": [], "logprobs": []}],
}
PLAIN_CALL = {"type": "function_call", "call_id": "call_2", "name": "add", "arguments": "{}"}
WEB = {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search"}}
ITEMS: list[Any] = [DEVELOPER, USER, REASONING, CALL, OUTPUT, ANSWER, PLAIN_CALL, WEB]


@pytest.fixture
def session(store: SqlStore) -> Iterator[WakefulSession]:
    yield WakefulSession("agents-1", store)


def test_it_is_an_agents_sdk_session(session: WakefulSession) -> None:
    assert isinstance(session, Session)
    assert session.session_id == "agents-1"


async def test_items_round_trip_verbatim_with_and_without_limit(session: WakefulSession) -> None:
    assert await session.get_items() == []
    await session.add_items(ITEMS[:4])
    await session.add_items(ITEMS[4:])
    assert await session.get_items() == ITEMS
    assert await session.get_items(limit=3) == ITEMS[-3:]
    assert await session.get_items(limit=100) == ITEMS
    assert await session.get_items(limit=0) == []
    session.session_settings = SessionSettings(limit=2)
    assert await session.get_items() == ITEMS[-2:]


async def test_items_are_ordinary_wakeful_messages(
    session: WakefulSession, store: SqlStore
) -> None:
    await session.add_items([USER, CALL, OUTPUT, ANSWER, PLAIN_CALL])
    messages = store.messages("agents-1")
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant", "assistant"]
    assert messages[0].text() == "What is 2 + 3?"
    assert messages[1].tool_calls()[0].input == {"a": 2, "b": 3}
    assert messages[2].tool_results()[0].output == "5"
    assert messages[3].text() == "It is 5."
    # what the converter gives back exactly is stored once; anything else keeps the item
    assert messages[4].metadata is None
    assert messages[0].metadata == {"openai_agents": {"item": USER}}
    canonical_user = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "hi"}],
    }
    await session.add_items([canonical_user])
    assert store.messages("agents-1")[-1].metadata is None
    created = store.events("agents-1", types=["session.created"])[0].event
    assert created.metadata == {"created_by": "openai-agents"}  # type: ignore[union-attr]
    assert store.get_session("agents-1").agent is None  # wakeful drives it with its default agent


async def test_a_retried_batch_does_not_duplicate(session: WakefulSession, store: SqlStore) -> None:
    await session.add_items([USER])
    await session.add_items([CALL, OUTPUT])
    await session.add_items([CALL, OUTPUT])  # the retry after a crash that followed the commit
    again = WakefulSession("agents-1", store)  # ... also from a fresh process-like object
    await again.add_items([CALL, OUTPUT])
    assert await session.get_items() == [USER, CALL, OUTPUT]
    await session.add_items([USER])  # a new batch with the same content is a new item
    assert await session.get_items() == [USER, CALL, OUTPUT, USER]
    ids = [m.id for m in store.messages("agents-1")]
    assert len(set(ids)) == len(ids)


def _write_at_once(writers: list[WakefulSession], batch: list[Any]) -> list[BaseException]:
    """Every writer appends `batch`, released together; the errors raised."""
    gate = threading.Barrier(len(writers))
    errors: list[BaseException] = []

    def write(w: WakefulSession) -> None:
        try:
            gate.wait()
            w.add_items_sync(batch)
        except BaseException as err:  # reported by the caller
            errors.append(err)

    threads = [threading.Thread(target=write, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_identical_retries_at_the_same_time_land_once(db_url: str) -> None:
    """The same batch retried concurrently (several writers, separate connections, released
    together) lands once: the append is a compare-and-append on the newest message."""
    writers = [WakefulSession("race", db_url) for _ in range(6)]
    writers[0].add_items_sync([USER])
    batches = [[CALL, {**OUTPUT, "output": f"{r}"}] for r in range(5)]
    for batch in batches:
        assert _write_at_once(writers, batch) == []
    assert writers[0].get_items_sync() == [USER] + [x for b in batches for x in b]
    for w in writers:
        w.close()


async def test_a_limit_reads_the_newest_messages_only_and_counts_items(
    session: WakefulSession, store: SqlStore
) -> None:
    """`get_items(limit)` reads the newest messages from the store; a message wakeful wrote
    itself may give several items, and the limit still counts items."""
    from wakeful.events import MessageAdded
    from wakeful.messages import Message, TextBlock, ToolCallBlock

    await session.add_items([USER])
    several = Message(
        id="msg_w1",
        role="assistant",
        blocks=(
            TextBlock(text="Let me add."),
            ToolCallBlock(id="call_9", name="add", input={"a": 1}),
            ToolCallBlock(id="call_10", name="add", input={"a": 2}),
        ),
    )
    store.append("agents-1", [MessageAdded(message=several)])
    await session.add_items([ANSWER, PLAIN_CALL])
    everything = await session.get_items()
    assert len(everything) == 6  # the wakeful message stands for three items
    for k in range(8):
        assert await session.get_items(limit=k) == (everything[-k:] if k else [])
    assert [m.id for m in store.last_messages("agents-1", 2)] == [
        m.id for m in store.messages("agents-1")[-2:]
    ]
    assert store.last_messages("agents-1", 0) == []


async def test_pop_item_is_durable(session: WakefulSession, store: SqlStore) -> None:
    assert await session.pop_item() is None
    await session.add_items([USER, ANSWER])
    assert [h.session.id for h in store.search("It is").hits] == ["agents-1"]
    assert await session.pop_item() == ANSWER
    assert await WakefulSession("agents-1", store).get_items() == [USER]
    assert [m.text() for m in store.messages("agents-1")] == ["What is 2 + 3?"]
    hidden = [e.event for e in store.events("agents-1", types=["messages.hidden"])]
    assert len(hidden) == 1 and hidden[0].reason == "pop_item"  # type: ignore[union-attr]
    assert store.search("It is").hits == []  # a hidden message is no longer searchable
    assert await session.pop_item() == USER
    assert await session.pop_item() is None


async def test_clear_session_is_durable_and_the_log_keeps_history(
    session: WakefulSession, store: SqlStore
) -> None:
    await session.add_items(ITEMS)
    await session.clear_session()
    assert await session.get_items() == []
    assert store.messages("agents-1") == []
    assert len(store.events("agents-1", types=["message.added"])) == len(ITEMS)
    await session.add_items([USER])  # the session goes on after a clear
    assert await session.get_items() == [USER]


# -- a real Runner.run against a local Chat Completions server --------------------------------


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class _Chat(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's spelling)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        last = body["messages"][-1]
        if last["role"] == "tool":
            reply = _completion({"role": "assistant", "content": f"It is {last['content']}."})
        else:
            call = {
                "id": "call_9",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            }
            reply = _completion({"role": "assistant", "content": None, "tool_calls": [call]})
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def chat_server() -> Iterator[str]:
    _Chat.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    thread.join()


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_runner_run_keeps_its_conversation_in_wakeful(
    chat_server: str, store: SqlStore
) -> None:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=chat_server, api_key="test")
    model = OpenAIChatCompletionsModel(model="fake", openai_client=client)
    agent = Agent(name="calc", instructions="Add.", model=model, tools=[add])
    session = WakefulSession("run-1", store)
    first = await Runner.run(agent, "What is 2 + 3?", session=session)
    assert first.final_output == "It is 5."
    items = await session.get_items()
    kinds = [i.get("type", "message") for i in items]
    assert kinds == ["message", "function_call", "function_call_output", "message"]
    messages = store.messages("run-1")
    assert messages[1].tool_calls()[0].name == "add" and messages[2].tool_results()[0].output == "5"
    assert messages[-1].text() == "It is 5."
    await client.close()
    # the second run sends the stored history to the model
    client = AsyncOpenAI(base_url=chat_server, api_key="test")
    agent = agent.clone(model=OpenAIChatCompletionsModel(model="fake", openai_client=client))
    await Runner.run(agent, "And again?", session=WakefulSession("run-1", store))
    sent = _Chat.requests[2]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert len(await session.get_items()) == 8
    await client.close()


def test_session_show_reads_an_agents_conversation(store: SqlStore, db_url: str) -> None:
    WakefulSession("show-1", store).add_items_sync([USER, CALL, OUTPUT, ANSWER])
    done = subprocess.run(
        [sys.executable, "-m", "wakeful", "session", "show", "show-1", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "What is 2 + 3?" in done.stdout and "It is 5." in done.stdout
    WakefulSession("show-1", store).pop_item_sync()
    log = subprocess.run(
        [sys.executable, "-m", "wakeful", "log", "--session", "show-1", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert log.returncode == 0, log.stderr
    assert log.stdout.count("message.added") == 4 and "messages.hidden" in log.stdout


# -- two processes appending to one session ---------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys
    from wakeful.integrations.openai_agents import WakefulSession
    session = WakefulSession("shared", sys.argv[1])
    for k in range(int(sys.argv[3])):
        text = f"{sys.argv[2]}-{k}"
        session.add_items_sync([{"role": "user", "content": text},
                                {"role": "assistant", "content": text + "!"}])
    session.close()
    """
)


def test_two_processes_appending_to_one_session_both_land(db_url: str) -> None:
    n = 40
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, db_url, name, str(n)], cwd=ROOT)
        for name in ("a", "b")
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    session = WakefulSession("shared", db_url)
    texts = [item["content"] for item in session.get_items_sync()]
    session.close()
    assert len(texts) == 4 * n
    for name in ("a", "b"):
        mine = [t for t in texts if t.startswith(f"{name}-")]
        assert mine == [x for k in range(n) for x in (f"{name}-{k}", f"{name}-{k}!")]
    for k in range(0, len(texts), 2):  # each batch stays contiguous
        assert texts[k + 1] == texts[k] + "!"


# -- the server (the API the inspector reads) -------------------------------------------------

from tests.server.conftest import MakeServer, make_server, wait_for  # noqa: E402,F401


def test_the_api_serves_an_agents_conversation(make_server: MakeServer) -> None:  # noqa: F811
    served = make_server()
    session = WakefulSession("api-1", served.store)
    session.add_items_sync([USER, CALL, OUTPUT, ANSWER])
    session.pop_item_sync()
    c = served.client()
    got = c.get("/sessions/api-1/messages").json()["messages"]
    assert [m["message"]["blocks"][0]["type"] for m in got] == ["text", "tool_call", "tool_result"]
    # wakeful drives the same session; the SDK reads wakeful's turn back as Responses items
    r = c.post("/sessions/api-1/prompt", json={"text": "And now?"})
    assert r.status_code == 202, r.text
    items = wait_for(lambda: (got := session.get_items_sync())[4:] and got, what="the reply")
    assert items[:3] == [USER, CALL, OUTPUT]
    assert items[3]["role"] == "user" and items[3]["content"][0]["text"] == "And now?"
    assert items[-1] == {
        "type": "message",
        "role": "assistant",
        "content": "hello from the scripted model",
    }


async def test_an_item_that_is_not_json_is_refused_and_nothing_is_written(
    session: WakefulSession, store: SqlStore
) -> None:
    with pytest.raises(UsageError, match="JSON"):
        await session.add_items([USER, {"role": "user", "content": object()}])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="JSON object"):
        await session.add_items(["just a string"])  # type: ignore[list-item]
    assert await session.get_items() == []
    with pytest.raises(UsageError):
        WakefulSession("", store)
