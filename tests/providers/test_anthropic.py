"""The Anthropic adapter, driven through the official SDK against a local Messages API server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tests.providers.fake_servers import (
    A_MESSAGE_STOP,
    FakeServer,
    Reply,
    a_block_start,
    a_block_stop,
    a_delta,
    a_message_delta,
    a_message_start,
    anthropic_error,
    anthropic_events,
)
from wakeful.errors import (
    AuthenticationError,
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
    RedactedThinkingBlock,
    ServerToolResultBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    system,
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
    make_provider,
)

REQUEST = ModelRequest(model="claude-test", system="Be brief.", messages=(user("Hi"),))


@pytest.fixture
async def claude(server: FakeServer) -> AsyncIterator:
    provider = make_provider("anthropic:claude-test", api_key="test-key", base_url=server.url)
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


def api_key_sent(received) -> str | None:
    """The key as sent: SDK versions use `x-api-key` or `Authorization: Bearer`."""
    bearer = received.headers.get("authorization", "").removeprefix("Bearer ")
    return received.headers.get("x-api-key") or bearer or None


def text_stream(text_pieces: list[str], stop_reason: str = "end_turn") -> list[bytes]:
    return anthropic_events(
        a_message_start(input_tokens=12),
        a_block_start(0, {"type": "text", "text": ""}),
        *[a_delta(0, {"type": "text_delta", "text": t}) for t in text_pieces],
        a_block_stop(0),
        a_message_delta(stop_reason, output_tokens=7),
        A_MESSAGE_STOP,
    )


async def test_a_text_stream_yields_deltas_usage_and_the_whole_message(claude, server):
    server.enqueue(Reply(events=text_stream(["Hel", "lo", "!"])))
    events = await collect(claude)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo", "!"]
    assert isinstance(events[0], UsageReport)
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.reason == "stop"
    assert finish.message.role == "assistant"
    assert finish.message.blocks == (TextBlock(text="Hello!"),)
    assert finish.usage == Usage(input_tokens=12, output_tokens=7)
    [received] = server.requests
    assert (received.method, received.path) == ("POST", "/v1/messages")
    assert api_key_sent(received) == "test-key"


async def test_wire_request_is_exactly_the_body_the_server_received(claude, server):
    request = ModelRequest(
        model="claude-test",
        system="You are terse.",
        messages=(
            system("Project rules changed."),
            user("List the files"),
            Message(
                role="assistant",
                blocks=(ToolCallBlock(id="toolu_1", name="ls", input={"dir": "."}),),
            ),
            Message(role="user", blocks=(ToolResultBlock(call_id="toolu_1", output="a.py b.py"),)),
            assistant("Two files."),
            user("Thanks"),
        ),
        tools=(
            ToolSpec(
                name="ls",
                description="List a directory",
                input_schema={"type": "object", "properties": {"dir": {"type": "string"}}},
            ),
        ),
        max_output_tokens=300,
        temperature=0.25,
    )
    server.enqueue(Reply(events=text_stream(["ok"])))
    wire = claude.wire_request(request)
    await collect(claude, request)
    assert server.requests[0].json() == wire
    assert wire["max_tokens"] == 300
    assert wire["temperature"] == 0.25
    assert wire["stream"] is True
    assert wire["system"][0] == {"type": "text", "text": "You are terse."}
    assert wire["tools"][0]["input_schema"]["properties"]["dir"] == {"type": "string"}


async def test_thinking_redacted_thinking_text_and_tool_use_assemble_in_order(server):
    provider = make_provider(
        "anthropic:claude-test",
        api_key="k",
        base_url=server.url,
        thinking={"type": "enabled", "budget_tokens": 2048},
    )
    server.enqueue(
        Reply(
            events=anthropic_events(
                a_message_start(input_tokens=20, cache_read=100, cache_write=30),
                a_block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                a_delta(0, {"type": "thinking_delta", "thinking": "Let me "}),
                a_delta(0, {"type": "thinking_delta", "thinking": "look."}),
                a_delta(0, {"type": "signature_delta", "signature": "sig=="}),
                a_block_stop(0),
                a_block_start(1, {"type": "redacted_thinking", "data": "opaque"}),
                a_block_stop(1),
                a_block_start(2, {"type": "text", "text": ""}),
                a_delta(2, {"type": "text_delta", "text": "Reading it."}),
                a_block_stop(2),
                a_block_start(
                    3, {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {}}
                ),
                a_delta(3, {"type": "input_json_delta", "partial_json": ""}),
                a_delta(3, {"type": "input_json_delta", "partial_json": '{"path": "/e'}),
                a_delta(3, {"type": "input_json_delta", "partial_json": 'tc/hosts", "n": 2}'}),
                a_block_stop(3),
                a_message_delta("tool_use", output_tokens=42),
                A_MESSAGE_STOP,
            )
        )
    )
    try:
        events = await collect(provider)
        assert server.requests[0].json()["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    finally:
        await provider.aclose()
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["Let me ", "look."]
    fragments = [e for e in events if isinstance(e, ToolCallDelta)]
    assert {(e.call_id, e.name) for e in fragments} == {("toolu_9", "read")}
    assert "".join(e.input_json_fragment for e in fragments) == '{"path": "/etc/hosts", "n": 2}'
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ReasoningDelta") < kinds.index("TextDelta") < kinds.index("ToolCallDelta")
    finish = events[-1]
    assert finish.reason == "tool_calls"
    assert finish.message.blocks == (
        ThinkingBlock(text="Let me look.", signature="sig=="),
        RedactedThinkingBlock(data="opaque"),
        TextBlock(text="Reading it."),
        ToolCallBlock(id="toolu_9", name="read", input={"path": "/etc/hosts", "n": 2}),
    )
    assert finish.usage == Usage(
        input_tokens=150, output_tokens=42, cache_read_tokens=100, cache_write_tokens=30
    )


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [("max_tokens", "length"), ("refusal", "content_filter"), ("stop_sequence", "stop")],
)
async def test_stop_reasons_map_to_finish_reasons(claude, server, stop_reason, finish_reason):
    server.enqueue(Reply(events=text_stream(["x"], stop_reason=stop_reason)))
    assert (await collect(claude))[-1].reason == finish_reason


@pytest.mark.parametrize(
    ("status", "headers", "error_type", "message", "expected", "retry_ms"),
    [
        (429, {"retry-after": "7"}, "rate_limit_error", "slow down", RateLimitError, 7000),
        (
            429,
            {"retry-after-ms": "1500", "retry-after": "2"},
            "rate_limit_error",
            "slow",
            RateLimitError,
            1500,
        ),
        (529, {}, "overloaded_error", "Overloaded", OverloadedError, None),
        (500, {}, "api_error", "Internal server error", ServerError, None),
        (503, {"retry-after": "3"}, "api_error", "unavailable", OverloadedError, 3000),
        (401, {}, "authentication_error", "invalid x-api-key", AuthenticationError, None),
        (403, {}, "permission_error", "no access", AuthenticationError, None),
        (
            400,
            {},
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            ContextOverflowError,
            None,
        ),
        (
            400,
            {},
            "invalid_request_error",
            "messages.0.content: field required",
            InvalidRequestError,
            None,
        ),
        (404, {}, "not_found_error", "model: claude-nope", InvalidRequestError, None),
        (
            413,
            {},
            "request_too_large",
            "Request exceeds the maximum size",
            ContextOverflowError,
            None,
        ),
    ],
)
async def test_error_statuses_raise_typed_errors(
    claude, server, status, headers, error_type, message, expected, retry_ms
):
    server.enqueue(
        Reply(status=status, headers=headers, json_body=anthropic_error(error_type, message))
    )
    events, err = await collect_until_error(claude)
    assert events == []
    assert type(err) is expected
    assert err.retry_after_ms == retry_ms
    assert len(server.requests) == 1  # the SDK's own retries are off


async def test_an_error_event_inside_the_stream_is_typed(claude, server):
    frames = text_stream(["partial "])[:3]
    frames.append(
        b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n'
    )
    server.enqueue(Reply(events=frames))
    events, err = await collect_until_error(claude)
    assert isinstance(err, OverloadedError)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["partial "]


async def test_a_stream_cut_in_the_middle_is_incomplete(claude, server):
    server.enqueue(Reply(events=text_stream(["one ", "two ", "three"])[:4], cut=True))
    events, err = await collect_until_error(claude)
    assert isinstance(err, IncompleteStreamError)
    assert "connection lost" in str(err)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["one ", "two "]
    assert not any(isinstance(e, Finish) for e in events)


async def test_a_stream_that_ends_without_message_stop_is_incomplete(claude, server):
    server.enqueue(Reply(events=text_stream(["one"])[:-1]))
    _, err = await collect_until_error(claude)
    assert isinstance(err, IncompleteStreamError)
    assert "message_stop" in str(err)


async def test_tool_input_cut_short_is_incomplete(claude, server):
    server.enqueue(
        Reply(
            events=anthropic_events(
                a_message_start(),
                a_block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}),
                a_delta(0, {"type": "input_json_delta", "partial_json": '{"a": '}),
                a_block_stop(0),
                a_message_delta("tool_use", 3),
                A_MESSAGE_STOP,
            )
        )
    )
    _, err = await collect_until_error(claude)
    assert isinstance(err, IncompleteStreamError)


async def test_a_refused_connection_is_an_unsent_transport_error(refused_url):
    provider = make_provider("anthropic:claude-test", api_key="k", base_url=refused_url)
    try:
        _, err = await collect_until_error(provider)
    finally:
        await provider.aclose()
    assert isinstance(err, TransportError)
    assert err.delivered is False
    assert err.retryable


async def test_a_server_that_hangs_up_after_reading_the_request_has_unknown_delivery(
    claude, server
):
    server.enqueue(Reply(hang_up=True))
    _, err = await collect_until_error(claude)
    assert isinstance(err, TransportError)
    assert err.delivered is None
    assert len(server.requests) == 1


async def test_a_missing_api_key_is_an_authentication_error_and_sends_nothing(server, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = make_provider("anthropic:claude-test", base_url=server.url)
    try:
        _, err = await collect_until_error(provider)
    finally:
        await provider.aclose()
    assert isinstance(err, AuthenticationError)
    assert "ANTHROPIC_API_KEY" in str(err)
    assert server.requests == []


async def test_the_api_key_comes_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    provider = make_provider("anthropic:claude-test", base_url=server.url)
    server.enqueue(Reply(events=text_stream(["ok"])))
    try:
        await collect(provider)
    finally:
        await provider.aclose()
    assert api_key_sent(server.requests[0]) == "env-key"


def test_prompt_caching_can_be_turned_off():
    provider = make_provider("anthropic:claude-test", api_key="k", prompt_cache=False)
    assert "cache_control" not in json.dumps(provider.wire_request(REQUEST))
    cached = make_provider("anthropic:claude-test", api_key="k")
    assert "cache_control" in json.dumps(cached.wire_request(REQUEST))


def test_breakpoints_sit_on_the_tools_the_system_and_the_newest_settled_message():
    tools = (
        ToolSpec("a", "first", {"type": "object"}),
        ToolSpec("b", "second", {"type": "object"}),
    )
    note = system("## todos\n- [pending] x")
    request = ModelRequest(
        model="claude-test",
        system="Be brief.",
        tools=tools,
        volatile=1,
        messages=(user("Hi"), assistant("Hello"), user("again"), note),
    )
    body = make_provider("anthropic:claude-test", api_key="k").wire_request(request)
    mark = {"type": "ephemeral"}
    assert "cache_control" not in body
    assert [t.get("cache_control") for t in body["tools"]] == [None, mark]
    assert body["system"][-1]["cache_control"] == mark
    marked = [
        (i, b["text"])
        for i, m in enumerate(body["messages"])
        for b in m["content"]
        if "cache_control" in b
    ]
    assert marked == [(2, "again")]  # the newest settled message, not the note after it
    assert body["messages"][3]["content"][0]["text"].endswith("- [pending] x")
    assert "cache_control" not in json.dumps(body["messages"][3])


async def test_a_garbled_event_is_incomplete(claude, server):
    server.enqueue(Reply(events=[b"event: message_start\ndata: {not json\n\n"]))
    _, err = await collect_until_error(claude)
    assert isinstance(err, IncompleteStreamError)


async def test_server_tools_become_server_tool_blocks(claude, server):
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.org",
                "title": "Ex",
                "encrypted_content": "e",
                "page_age": None,
            }
        ],
    }
    server.enqueue(
        Reply(
            events=anthropic_events(
                a_message_start(),
                a_block_start(
                    0,
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {},
                    },
                ),
                a_delta(0, {"type": "input_json_delta", "partial_json": '{"query": "wakeful"}'}),
                a_block_stop(0),
                a_block_start(1, result),
                a_block_stop(1),
                a_block_start(2, {"type": "text", "text": "Found it."}),
                a_block_stop(2),
                a_message_delta("end_turn", 9),
                A_MESSAGE_STOP,
            )
        )
    )
    events = await collect(claude)
    assert not any(isinstance(e, ToolCallDelta) for e in events)  # not ours to run
    use, found, text = events[-1].message.blocks
    assert use == ServerToolUseBlock(id="srvtoolu_1", name="web_search", input={"query": "wakeful"})
    assert isinstance(found, ServerToolResultBlock)
    assert (found.tool_use_id, found.wire_type) == ("srvtoolu_1", "web_search_tool_result")
    assert found.content[0]["url"] == "https://example.org"
    assert text == TextBlock(text="Found it.")
