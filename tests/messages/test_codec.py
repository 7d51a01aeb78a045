import json
from pathlib import Path

import pytest

from wakeful.errors import InvalidMessageError
from wakeful.messages import (
    ImageBlock,
    Message,
    TextBlock,
    dump_messages,
    load_message,
    load_messages,
    message_from_dict,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "messages_v1.json"
ALL_KINDS = {
    "text",
    "image",
    "audio",
    "video",
    "document",
    "tool_call",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "provider_reasoning",
    "server_tool_use",
    "server_tool_result",
    "compact_summary",
}


def test_frozen_fixture_round_trips_exactly():
    raw = FIXTURE.read_text()
    messages = load_messages(raw)
    assert json.loads(dump_messages(messages)) == json.loads(raw)
    assert load_messages(dump_messages(messages)) == messages


def test_fixture_covers_every_block_kind():
    kinds = {b.type for m in load_messages(FIXTURE.read_text()) for b in m.blocks}
    assert kinds == ALL_KINDS


def test_messages_are_frozen():
    m = Message(role="user", blocks=(TextBlock(text="x"),))
    with pytest.raises(ValueError):
        m.role = "assistant"  # type: ignore[misc]


def test_media_needs_exactly_one_source():
    with pytest.raises(ValueError):
        ImageBlock(media_type="image/png")
    with pytest.raises(ValueError):
        ImageBlock(media_type="image/png", data="x", ref="y")


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"role": "robot", "blocks": []}, "role"),
        ({"role": "user", "blocks": [{"type": "sparkle"}]}, "blocks.0"),
        (
            {"role": "user", "blocks": [{"type": "tool_call", "id": "", "name": "x"}]},
            "blocks.0.tool_call.id",
        ),
    ],
)
def test_bad_input_names_the_field(payload, field):
    with pytest.raises(InvalidMessageError) as info:
        message_from_dict(payload)
    assert info.value.field == field
    assert field in str(info.value)


def test_load_message_rejects_garbage():
    with pytest.raises(InvalidMessageError):
        load_message("{not json")
