"""What OpenAI-compatible servers need (llama.cpp, vLLM, Ollama), through the official SDK against
a local server speaking Chat Completions: the wire forms they accept, the settings of
`[providers]` (`tool_choice`, `accepts`), their error bodies, and the empty 200 stream that
llama.cpp's Python server sends for a prompt over its window."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from tests.providers.fake_servers import (
    LLAMA_CPP_VALIDATION_500,
    FakeServer,
    Reply,
    o_chunk,
    openai_error,
    openai_events,
)
from wakeful.errors import (
    ContextOverflowError,
    IncompleteStreamError,
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    UsageError,
)
from wakeful.messages import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    user,
)
from wakeful.providers import Finish, ModelRequest, Provider, ToolSpec, make_provider

TOOL = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})
PDF = DocumentBlock(media_type="application/pdf", data="JVBERi0=", name="a.pdf")
PNG = ImageBlock(media_type="image/png", data="iVBORw0KGgo=")
WAV = AudioBlock(media_type="audio/wav", data="UklGRg==")


def request(*messages: Message, tools: tuple[ToolSpec, ...] = ()) -> ModelRequest:
    return ModelRequest(model="m", system="sys", messages=messages or (user("hi"),), tools=tools)


def text_reply(text: str = "ok", finish: str = "stop") -> Reply:
    usage = {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}
    chunks = [o_chunk({"role": "assistant", "content": text}), o_chunk({}, finish_reason=finish)]
    return Reply(events=openai_events(*chunks, o_chunk(usage=usage)))


async def run(provider: Provider, req: ModelRequest) -> Finish:
    events = [e async for e in provider.stream(req)]
    assert isinstance(events[-1], Finish)
    return events[-1]


async def fail(provider: Provider, req: ModelRequest) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        async for _ in provider.stream(req):
            pass
    return info.value


Make = Callable[..., Provider]


@pytest.fixture
async def make(server: FakeServer) -> AsyncIterator[Make]:
    made: list[Provider] = []

    def build(family: str = "openai-compatible", **options: object) -> Provider:
        if family == "openai-compatible":
            provider = make_provider(f"openai-compatible:m@{server.url}/v1", **options)
        else:
            provider = make_provider(f"{family}:m", api_key="k", base_url=server.url, **options)
        made.append(provider)
        return provider

    yield build
    for provider in made:
        await provider.aclose()


async def test_a_textless_tool_call_goes_out_as_empty_content(
    make: Make, server: FakeServer
) -> None:
    call = Message(role="assistant", blocks=(ToolCallBlock(id="c1", name="read_file"),))
    result = Message(role="user", blocks=(ToolResultBlock(call_id="c1", output="data"),))
    req = request(user("read it"), call, result)
    server.enqueue(text_reply())
    await run(make(), req)
    sent = server.requests[0].json()["messages"]
    assert sent[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        ],
    }


async def test_compatible_servers_get_text_only_content_as_one_string(
    make: Make, server: FakeServer
) -> None:
    two = Message(role="user", blocks=(TextBlock(text="one"), TextBlock(text="two")))
    server.enqueue(text_reply(), text_reply())
    await run(make(), request(two))
    await run(make("openai"), request(two))
    compatible, openai = (r.json()["messages"][1]["content"] for r in server.requests)
    assert compatible == "one\n\ntwo"
    assert openai == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]


async def test_media_a_server_does_not_accept_goes_out_as_a_label(
    make: Make, server: FakeServer
) -> None:
    stored = Message(role="user", blocks=(TextBlock(text="see"), PNG, PDF, WAV))
    server.enqueue(text_reply(), text_reply(), text_reply())
    await run(make(), request(stored))  # default: images only
    await run(make(accepts=[]), request(stored))  # a text-only model
    await run(make("openai"), request(stored))  # OpenAI takes all three
    default, text_only, openai = (r.json()["messages"][1]["content"] for r in server.requests)
    assert [p["type"] for p in default] == ["text", "image_url", "text", "text"]
    assert default[2:] == [
        {"type": "text", "text": "[document application/pdf a.pdf]"},
        {"type": "text", "text": "[audio audio/wav]"},
    ]
    assert text_only == "see\n\n[image image/png]\n\n[document application/pdf a.pdf]\n\n" + (
        "[audio audio/wav]"
    )
    assert [p["type"] for p in openai] == ["text", "image_url", "file", "input_audio"]
    assert stored.blocks[1:] == (PNG, PDF, WAV)  # the transcript keeps its media


async def test_tool_choice_is_sent_with_the_tools_only(make: Make, server: FakeServer) -> None:
    server.enqueue(text_reply(), text_reply(), text_reply())
    provider = make(tool_choice="required")
    await run(provider, request(tools=(TOOL,)))
    await run(provider, request())
    await run(make(), request(tools=(TOOL,)))
    with_tools, without, unset = (r.json() for r in server.requests)
    assert with_tools["tool_choice"] == "required"
    assert "tool_choice" not in without and "tool_choice" not in unset
    assert provider.wire_request(request(tools=(TOOL,))) == with_tools


def test_anthropic_spells_tool_choice_its_own_way(make: Make) -> None:
    body = make("anthropic", tool_choice="required").wire_request(request(tools=(TOOL,)))
    assert body["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tool_choice": "always"}, "tool_choice: expected one of auto, required, none"),
        ({"accepts": ["image", "pdf"]}, r"accepts: unknown media kind\(s\) 'pdf'"),
        ({"accepts": "image"}, "accepts: expected a list"),
    ],
)
def test_bad_settings_are_usage_errors(
    make: Make, options: dict[str, object], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        make(**options)


def test_local_and_scripted_take_no_wire_settings() -> None:
    with pytest.raises(UsageError, match="unknown option"):
        make_provider("local", tool_choice="auto")


async def test_a_500_that_says_the_request_is_invalid_is_not_overloaded(
    make: Make, server: FakeServer
) -> None:
    server.enqueue(Reply(status=500, json_body=LLAMA_CPP_VALIDATION_500))
    err = await fail(make(), request())
    assert isinstance(err, InvalidRequestError) and not err.retryable
    assert "HTTP 500" in str(err) and "validation errors" in str(err)


async def test_a_500_that_blames_the_server_stays_overloaded(
    make: Make, server: FakeServer
) -> None:
    server.enqueue(Reply(status=500, json_body=openai_error("out of memory", "server_error")))
    assert isinstance(await fail(make(), request()), OverloadedError)


async def test_an_empty_stream_is_checked_with_a_probe_that_finds_the_overflow(
    make: Make, server: FakeServer
) -> None:
    overflow = openai_error(
        "This model's maximum context length is 512 tokens. However, you requested 836 tokens",
        "invalid_request_error",
        "context_length_exceeded",
    )
    server.enqueue(Reply(stream=True), Reply(status=400, json_body=overflow))
    provider = make()
    req = request(tools=(TOOL,))
    err = await fail(provider, req)
    assert isinstance(err, ContextOverflowError)
    assert "empty stream" in str(err) and "maximum context length" in str(err)
    streamed, probe = (r.json() for r in server.requests)
    assert streamed == provider.wire_request(req)
    expected = {k: v for k, v in streamed.items() if k not in ("stream", "stream_options")}
    assert probe == expected | {"max_tokens": 1}  # the same messages, not streamed


async def test_an_empty_stream_whose_probe_is_accepted_is_incomplete(
    make: Make, server: FakeServer
) -> None:
    accepted = {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "h"},
                "finish_reason": "length",
                "logprobs": None,
            }
        ],
    }
    server.enqueue(Reply(stream=True), Reply(json_body=accepted))
    err = await fail(make(), request())
    assert isinstance(err, IncompleteStreamError) and err.retryable
    assert len(server.requests) == 2


async def test_an_empty_stream_after_a_request_over_the_window_is_an_overflow(
    make: Make, server: FakeServer
) -> None:
    server.enqueue(Reply(stream=True))
    err = await fail(make(context_window=100), request(user("word " * 200)))
    assert isinstance(err, ContextOverflowError)
    assert len(server.requests) == 1  # the estimate settles it: no probe


async def test_openai_itself_is_never_probed(make: Make, server: FakeServer) -> None:
    server.enqueue(Reply(stream=True))
    assert isinstance(await fail(make("openai"), request()), IncompleteStreamError)
    assert len(server.requests) == 1


async def test_a_tool_call_cut_by_the_output_limit_is_dropped_not_retried(
    make: Make, server: FakeServer
) -> None:
    chunks = [
        o_chunk({"role": "assistant", "content": "Let me look."}),
        o_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "RE'},
                    }
                ]
            }
        ),
        o_chunk({}, finish_reason="length"),
    ]
    server.enqueue(Reply(events=openai_events(*chunks)))
    finish = await run(make(), request(tools=(TOOL,)))
    assert finish.reason == "length"
    assert finish.message.blocks == (TextBlock(text="Let me look."),)


def test_anthropic_labels_the_media_it_is_told_it_cannot_take(make: Make) -> None:
    body = make("anthropic", accepts=[], prompt_cache=False).wire_request(
        request(Message(role="user", blocks=(PNG,)))
    )
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "[image image/png]"}]}
    ]
