"""Replies of the loopback servers (`tests/providers/fake_servers.py`) in the two wire
protocols: a text answer and a shell tool call, each with its usage."""

from __future__ import annotations

import json

from tests.providers.fake_servers import (
    A_MESSAGE_STOP,
    Reply,
    a_block_start,
    a_block_stop,
    a_delta,
    a_message_delta,
    a_message_start,
    anthropic_events,
    o_chunk,
    openai_events,
)

O_USAGE = {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}


def a_text(text: str, tokens: int = 7) -> Reply:
    """An Anthropic Messages stream answering `text`."""
    return Reply(
        events=anthropic_events(
            a_message_start(input_tokens=40),
            a_block_start(0, {"type": "text", "text": ""}),
            a_delta(0, {"type": "text_delta", "text": text}),
            a_block_stop(0),
            a_message_delta("end_turn", tokens),
            A_MESSAGE_STOP,
        )
    )


def a_tool_call(call_id: str, command: str) -> Reply:
    """An Anthropic Messages stream calling `shell` with `command`."""
    return Reply(
        events=anthropic_events(
            a_message_start(input_tokens=30),
            a_block_start(0, {"type": "tool_use", "id": call_id, "name": "shell", "input": {}}),
            a_delta(
                0, {"type": "input_json_delta", "partial_json": json.dumps({"command": command})}
            ),
            a_block_stop(0),
            a_message_delta("tool_use", 5),
            A_MESSAGE_STOP,
        )
    )


def o_text(text: str) -> Reply:
    """A Chat Completions stream answering `text`."""
    return Reply(
        events=openai_events(
            o_chunk({"role": "assistant", "content": text}),
            o_chunk({}, finish_reason="stop"),
            o_chunk(usage=O_USAGE),
        )
    )


def o_call(call_id: str, command: str) -> Reply:
    """A Chat Completions stream calling `shell` with `command`."""
    call = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "shell", "arguments": json.dumps({"command": command})},
    }
    return Reply(
        events=openai_events(
            o_chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
            o_chunk({}, finish_reason="tool_calls"),
            o_chunk(usage=O_USAGE),
        )
    )
