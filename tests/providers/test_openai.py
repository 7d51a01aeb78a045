"""The Chat Completions adapter (`openai` and `openai-compatible`), driven through the official
SDK against a local server speaking the Chat Completions streaming protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.providers.fake_servers import (
    FakeServer,
    Reply,
    o_chunk,
    openai_error,
    openai_events,
    sse,
)
from wakeful.errors import (
    AuthenticationError,
    ContentFilterError,
    ContextOverflowError,
    IncompleteStreamError,
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
    TransportError,
)
from wakeful.messages import (
    Message,
    ProviderReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    user,
)
from wakeful.providers import (
    Finish,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    UsageReport,
    estimate_request_tokens,
    make_provider,
)

REQUEST = ModelRequest(model="gpt-test", system="Be brief.", messages=(user("Hi"),))
USAGE = {
    "prompt_tokens": 30,
    "completion_tokens": 5,
    "total_tokens": 35,
    "prompt_tokens_details": {"cached_tokens": 20},
}


@pytest.fixture
async def gpt(server: FakeServer) -> AsyncIterator:
    provider = make_provider("openai:gpt-test", api_key="sk-test", base_url=f"{server.url}/v1")
    yield provider
    await provider.aclose()


@pytest.fixture
async def compatible(server: FakeServer) -> AsyncIterator:
    provider = make_provider(f"openai-compatible:qwen3@{server.url}/v1")
    yield provider
    await provider.aclose()


async def collect(provider, request=REQUEST) -> list:
    return [event async for event in provider.stream(request)]


async def collect_until_error(provider, request=REQUEST) -> tuple[list, ProviderError]:
    events: list = []
    with pytest.raises(ProviderError) as info:
        async for event in provider.stream(request):
            events.append(event)
    return events, info.value


def text_chunks(pieces: list[str], finish: str = "stop") -> list[dict]:
    return [
        o_chunk({"role": "assistant", "content": ""}),
        *[o_chunk({"content": p}) for p in pieces],
        o_chunk({}, finish_reason=finish),
        o_chunk(usage=USAGE),
    ]


async def test_a_text_stream_yields_deltas_usage_and_the_whole_message(gpt, server):
    server.enqueue(Reply(events=openai_events(*text_chunks(["Hel", "lo"]))))
    events = await collect(gpt)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    assert events[-2] == UsageReport(usage=Usage(30, 5, cache_read_tokens=20))
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.reason == "stop"
    assert finish.message.blocks == (TextBlock(text="Hello"),)
    assert finish.usage == Usage(30, 5, cache_read_tokens=20)
    [received] = server.requests
    assert (received.method, received.path) == ("POST", "/v1/chat/completions")
    assert received.headers["authorization"] == "Bearer sk-test"


async def test_wire_request_is_exactly_the_body_the_server_received(gpt, server):
    request = ModelRequest(
        model="gpt-test",
        system="You are terse.",
        messages=(
            user("List the files"),
            Message(
                role="assistant",
                blocks=(ToolCallBlock(id="call_1", name="ls", input={"dir": "."}),),
            ),
            Message(role="user", blocks=(ToolResultBlock(call_id="call_1", output="a.py"),)),
            assistant("One file."),
            user("Thanks"),
        ),
        tools=(
            ToolSpec(name="ls", description="List a directory", input_schema={"type": "object"}),
        ),
        max_output_tokens=200,
        temperature=0.0,
    )
    server.enqueue(Reply(events=openai_events(*text_chunks(["ok"]))))
    wire = gpt.wire_request(request)
    await collect(gpt, request)
    assert server.requests[0].json() == wire
    assert wire["messages"][0] == {"role": "system", "content": "You are terse."}
    assert wire["stream_options"] == {"include_usage": True}
    assert wire["max_completion_tokens"] == 200
    assert wire["temperature"] == 0.0
    assert wire["tools"][0]["function"]["name"] == "ls"


async def test_parallel_tool_call_deltas_assemble_into_tool_call_blocks(gpt, server):
    server.enqueue(
        Reply(
            events=openai_events(
                o_chunk({"role": "assistant", "content": None}),
                o_chunk({"content": "Checking."}),
                o_chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_a",
                                "type": "function",
                                "function": {"name": "read", "arguments": ""},
                            }
                        ]
                    }
                ),
                o_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]}),
                o_chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 1,
                                "id": "call_b",
                                "type": "function",
                                "function": {"name": "ls", "arguments": "{}"},
                            }
                        ]
                    }
                ),
                o_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"/etc"}'}}]}),
                o_chunk({}, finish_reason="tool_calls"),
                o_chunk(usage=USAGE),
            )
        )
    )
    events = await collect(gpt)
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert (
        "".join(d.input_json_fragment for d in deltas if d.call_id == "call_a")
        == '{"path": "/etc"}'
    )
    assert {d.name for d in deltas if d.call_id == "call_b"} == {"ls"}
    finish = events[-1]
    assert finish.reason == "tool_calls"
    assert finish.message.blocks == (
        TextBlock(text="Checking."),
        ToolCallBlock(id="call_a", name="read", input={"path": "/etc"}),
        ToolCallBlock(id="call_b", name="ls", input={}),
    )


@pytest.mark.parametrize("finish_reason", ["length", "content_filter"])
async def test_finish_reasons_pass_through(gpt, server, finish_reason):
    server.enqueue(Reply(events=openai_events(*text_chunks(["x"], finish=finish_reason))))
    assert (await collect(gpt))[-1].reason == finish_reason


async def test_compatible_servers_stream_reasoning_and_need_no_usage_chunk(
    compatible, server, monkeypatch
):
    server.enqueue(
        Reply(
            events=openai_events(
                o_chunk({"role": "assistant", "reasoning_content": "Thinking "}),
                o_chunk({"reasoning_content": "hard."}),
                o_chunk({"content": "Answer."}),
                o_chunk({}, finish_reason="stop"),
            )
        )
    )
    request = ModelRequest(model="qwen3", system="", messages=(user("q"),))
    events = await collect(compatible, request)
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["Thinking ", "hard."]
    finish = events[-1]
    assert finish.message.blocks == (
        ProviderReasoningBlock(
            provider="openai-compatible", data={"reasoning_content": "Thinking hard."}
        ),
        TextBlock(text="Answer."),
    )
    # no usage reported (llama-cpp-python): estimated, "Thinking hard.Answer." is 21 chars
    assert finish.usage == Usage(estimate_request_tokens(request), 6)
    assert finish.usage.input_tokens > 0
    body = server.requests[0].json()
    assert body["max_tokens"] == 4096
    assert "max_completion_tokens" not in body


async def test_compatible_servers_never_get_the_openai_key(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-openai")
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    provider = make_provider(f"openai-compatible:llama@{server.url}/v1")
    server.enqueue(Reply(events=openai_events(*text_chunks(["ok"]))))
    try:
        await collect(provider)
    finally:
        await provider.aclose()
    assert server.requests[0].headers["authorization"] == "Bearer sk-no-key-required"
    assert provider.name == "openai-compatible"


async def test_reasoning_replays_to_the_same_compatible_server(compatible, server):
    earlier = Message(
        role="assistant",
        blocks=(
            ProviderReasoningBlock(provider="openai-compatible", data={"reasoning_content": "r"}),
            TextBlock(text="a"),
        ),
    )
    request = ModelRequest(model="qwen3", system="", messages=(user("q"), earlier, user("more")))
    wire = compatible.wire_request(request)
    assert wire["messages"][1]["reasoning_content"] == "r"


@pytest.mark.parametrize(
    ("status", "headers", "error", "expected", "retry_ms"),
    [
        (
            429,
            {"retry-after": "2"},
            openai_error("Rate limit reached", "requests", "rate_limit_exceeded"),
            RateLimitError,
            2000,
        ),
        (
            429,
            {"retry-after-ms": "250"},
            openai_error("slow", "tokens", "rate_limit_exceeded"),
            RateLimitError,
            250,
        ),
        (
            429,
            {},
            openai_error(
                "You exceeded your current quota", "insufficient_quota", "insufficient_quota"
            ),
            AuthenticationError,
            None,
        ),
        (500, {}, openai_error("The server had an error", "server_error"), ServerError, None),
        (
            503,
            {"retry-after": "1"},
            openai_error("Slow Down", "server_error"),
            OverloadedError,
            1000,
        ),
        (
            401,
            {},
            openai_error("Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
            AuthenticationError,
            None,
        ),
        (
            400,
            {},
            openai_error(
                "This model's maximum context length is 128000 tokens.",
                "invalid_request_error",
                "context_length_exceeded",
            ),
            ContextOverflowError,
            None,
        ),
        (
            400,
            {},
            openai_error("maximum context length exceeded, but no code", "invalid_request_error"),
            InvalidRequestError,
            None,
        ),
        (
            400,
            {},
            openai_error(
                "Your request was rejected", "invalid_request_error", "content_policy_violation"
            ),
            ContentFilterError,
            None,
        ),
        (
            404,
            {},
            openai_error(
                "The model `gpt-nope` does not exist", "invalid_request_error", "model_not_found"
            ),
            InvalidRequestError,
            None,
        ),
        (422, {}, openai_error("bad field", "invalid_request_error"), InvalidRequestError, None),
    ],
)
async def test_error_statuses_raise_typed_errors(
    gpt, server, status, headers, error, expected, retry_ms
):
    server.enqueue(Reply(status=status, headers=headers, json_body=error))
    events, err = await collect_until_error(gpt)
    assert events == []
    assert type(err) is expected
    assert err.retry_after_ms == retry_ms
    assert len(server.requests) == 1  # the SDK's own retries are off


@pytest.mark.parametrize(
    "body",
    [
        # vLLM: no structured code, the overflow is only said in words
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        # llama.cpp server: a structured type
        {
            "error": {
                "code": 400,
                "message": "request exceeds the available context size",
                "type": "exceed_context_size_error",
            }
        },
    ],
)
async def test_compatible_servers_report_overflow_their_own_way(compatible, server, body):
    server.enqueue(Reply(status=400, json_body=body))
    _, err = await collect_until_error(compatible)
    assert isinstance(err, ContextOverflowError)


async def test_an_error_inside_the_stream_is_typed(gpt, server):
    frames = openai_events(o_chunk({"content": "partial"}), done=False)
    frames.append(
        sse({"error": {"message": "The server had an error", "type": "server_error", "code": None}})
    )
    server.enqueue(Reply(events=frames))
    events, err = await collect_until_error(gpt)
    assert isinstance(err, OverloadedError)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["partial"]


async def test_a_stream_cut_in_the_middle_is_incomplete(gpt, server):
    frames = openai_events(*text_chunks(["one ", "two ", "three"]), done=False)[:3]
    server.enqueue(Reply(events=frames, cut=True))
    events, err = await collect_until_error(gpt)
    assert isinstance(err, IncompleteStreamError)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["one ", "two "]
    assert not any(isinstance(e, Finish) for e in events)


async def test_a_stream_without_finish_reason_is_incomplete(gpt, server):
    server.enqueue(Reply(events=openai_events(o_chunk({"content": "one"}))))
    _, err = await collect_until_error(gpt)
    assert isinstance(err, IncompleteStreamError)
    assert "finish_reason" in str(err)


async def test_openai_without_the_usage_chunk_is_incomplete(gpt, server):
    server.enqueue(Reply(events=openai_events(*text_chunks(["x"])[:-1], done=False)))
    _, err = await collect_until_error(gpt)
    assert isinstance(err, IncompleteStreamError)
    assert "usage" in str(err)


async def test_a_refused_connection_is_an_unsent_transport_error(refused_url):
    provider = make_provider("openai:gpt-test", api_key="k", base_url=f"{refused_url}/v1")
    try:
        _, err = await collect_until_error(provider)
    finally:
        await provider.aclose()
    assert isinstance(err, TransportError)
    assert err.delivered is False


async def test_a_server_that_hangs_up_after_reading_the_request_has_unknown_delivery(gpt, server):
    server.enqueue(Reply(hang_up=True))
    _, err = await collect_until_error(gpt)
    assert isinstance(err, TransportError)
    assert err.delivered is None


async def test_a_missing_openai_key_is_an_authentication_error_and_sends_nothing(
    server, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = make_provider("openai:gpt-test", base_url=f"{server.url}/v1")
    try:
        _, err = await collect_until_error(provider)
    finally:
        await provider.aclose()
    assert isinstance(err, AuthenticationError)
    assert server.requests == []


async def test_a_garbled_chunk_is_incomplete(gpt, server):
    server.enqueue(Reply(events=[b"data: {oops\n\n"]))
    _, err = await collect_until_error(gpt)
    assert isinstance(err, IncompleteStreamError)


async def test_tool_calls_without_an_id_get_a_unique_one(compatible, server):
    call = {"index": 0, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    server.enqueue(
        Reply(
            events=openai_events(
                o_chunk({"role": "assistant", "tool_calls": [call]}),
                o_chunk({"tool_calls": [{**call, "index": 1}]}),
                o_chunk({}, finish_reason="tool_calls"),
            )
        )
    )
    events = await collect(compatible)
    first, second = events[-1].message.tool_calls()
    assert first.id.startswith("call_") and second.id.startswith("call_")
    assert first.id != second.id


async def test_llama_server_timings_give_the_usage_when_no_usage_is_sent(compatible, server):
    last = o_chunk({}, finish_reason="stop")
    last["timings"] = {"prompt_n": 12, "cache_n": 30, "predicted_n": 7, "predicted_ms": 80.5}
    server.enqueue(Reply(events=openai_events(o_chunk({"content": "Hi."}), last)))
    events = await collect(compatible)
    assert UsageReport(usage=Usage(42, 7, cache_read_tokens=30)) in events
    assert events[-1].usage == Usage(42, 7, cache_read_tokens=30)


async def test_a_compatible_server_500_is_a_server_error_naming_status_and_message(
    compatible, server
):
    server.enqueue(Reply(status=500, json_body={"error": {"code": 500, "message": "boom: KV"}}))
    _, err = await collect_until_error(compatible)
    assert isinstance(err, ServerError) and err.retryable
    assert err.kind == "server_error" and err.status_code == 500
    assert str(err) == "server error (HTTP 500): boom: KV"


async def test_an_empty_stream_whose_probe_gets_a_500_is_a_server_error(compatible, server):
    detail = {"detail": "llama_decode returned -1"}  # FastAPI's shape (llama-cpp-python)
    server.enqueue(Reply(stream=True), Reply(status=500, json_body=detail))
    _, err = await collect_until_error(compatible)
    assert isinstance(err, ServerError) and err.kind == "server_error"
    assert "empty stream" in str(err) and "HTTP 500" in str(err)
    assert "llama_decode returned -1" in str(err) and "Error code" not in str(err)
