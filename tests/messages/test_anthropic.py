"""The Anthropic converter on hand-written cases: the decisions of docs/messages.md."""

from __future__ import annotations

import base64

import pytest

from wakeful.errors import InvalidMessageError
from wakeful.messages import (
    AudioBlock,
    CompactSummaryBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderReasoningBlock,
    TextBlock,
    TextOrigin,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
    from_anthropic,
    system,
    to_anthropic,
    user,
)

from .sdk import assert_anthropic_valid


def test_leading_system_messages_become_the_system_parameter() -> None:
    payload = to_anthropic([system("Be careful."), system("Be brief."), user("hi")])
    assert payload.system == [
        {"type": "text", "text": "Be careful."},
        {"type": "text", "text": "Be brief."},
    ]
    assert payload.messages == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_a_later_system_message_keeps_its_place_as_user_text() -> None:
    payload = to_anthropic([user("hi"), system("New rule.")])
    assert payload.system == []
    assert payload.messages[1] == {
        "role": "user",
        "content": [{"type": "text", "text": "[system message]\nNew rule."}],
    }


def test_origin_and_summary_are_spelled_as_text() -> None:
    origin = TextOrigin(kind="signal", source="slack", sender="ana", message_id="S1")
    m = Message(
        role="user",
        blocks=(
            TextBlock(text="deploy?", origin=origin),
            CompactSummaryBlock(summary="## Goal\nship", through_seq=3),
        ),
    )
    (wire,) = to_anthropic([m]).messages
    assert [b["text"] for b in wire["content"]] == [
        "[signal from slack, sender ana]\ndeploy?",
        "Summary of earlier conversation:\n## Goal\nship",
    ]


def test_tool_results_go_first_in_their_user_message() -> None:
    m = Message(
        role="user",
        blocks=(
            TextBlock(text="and also"),
            ToolResultBlock(call_id="c1", output="ok", is_error=True),
        ),
    )
    (wire,) = to_anthropic([m]).messages
    assert wire["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "ok",
        "is_error": True,
    }
    assert wire["content"][1] == {"type": "text", "text": "and also"}


def test_tool_result_media_stays_inside_where_anthropic_takes_it() -> None:
    output = (
        TextBlock(text="shot:"),
        ImageBlock(media_type="image/png", data="iVBO"),
        AudioBlock(media_type="audio/wav", data="UklG", name="a.wav"),
        DocumentBlock(media_type="application/pdf", data="JVBE", name="r.pdf"),
    )
    m = Message(role="user", blocks=(ToolResultBlock(call_id="c1", output=output),))
    (wire,) = to_anthropic([m]).messages
    assert_anthropic_valid(wire)
    assert [p["type"] for p in wire["content"][0]["content"]] == [
        "text",
        "image",
        "text",
        "document",
    ]
    assert wire["content"][0]["content"][2]["text"] == "[audio audio/wav a.wav]"


def test_foreign_and_unsigned_reasoning_is_dropped() -> None:
    m = Message(
        role="assistant",
        blocks=(
            ThinkingBlock(text="unsigned"),
            ThinkingBlock(text="signed", signature="sig"),
            ProviderReasoningBlock(provider="openrouter", data={"reasoning_details": []}),
            ToolCallBlock(id="c1", name="read", input={"path": "x"}),
        ),
    )
    (wire,) = to_anthropic([m]).messages
    assert wire["content"] == [
        {"type": "thinking", "thinking": "signed", "signature": "sig"},
        {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "x"}},
    ]


def test_media_anthropic_cannot_take_becomes_a_label() -> None:
    m = Message(
        role="user",
        blocks=(
            ImageBlock(media_type="image/bmp", data="Qk0=", name="x.bmp"),
            VideoBlock(media_type="video/mp4", ref="sha256:ab"),
        ),
    )
    (wire,) = to_anthropic([m]).messages
    assert wire["content"] == [
        {"type": "text", "text": "[image image/bmp x.bmp]"},
        {"type": "text", "text": "[video video/mp4]"},
    ]


def test_text_documents_go_as_text_sources() -> None:
    data = base64.b64encode("héllo".encode()).decode()
    m = Message(role="user", blocks=(DocumentBlock(media_type="text/plain", data=data, name="n"),))
    (wire,) = to_anthropic([m]).messages
    assert wire["content"][0] == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "héllo"},
        "title": "n",
    }
    assert from_anthropic(wire).blocks[0] == DocumentBlock(
        media_type="text/plain", data=data, name="n"
    )


def test_media_with_only_a_ref_cannot_be_sent() -> None:
    m = Message(
        role="user",
        blocks=(TextBlock(text="x"), ImageBlock(media_type="image/png", ref="sha256:1")),
    )
    with pytest.raises(InvalidMessageError) as info:
        to_anthropic([m])
    assert info.value.field == "messages[0].blocks[1].ref"


def test_a_block_in_the_wrong_role_is_refused() -> None:
    m = Message(role="user", blocks=(ToolCallBlock(id="c", name="n"),))
    with pytest.raises(InvalidMessageError) as info:
        to_anthropic([m])
    assert info.value.field == "messages[0].blocks[0].type"


def test_empty_text_and_emptied_messages_are_left_out() -> None:
    payload = to_anthropic([user(""), user("x")])
    assert payload.messages == [{"role": "user", "content": [{"type": "text", "text": "x"}]}]


def test_from_anthropic_reads_string_content_and_server_tools() -> None:
    assert from_anthropic({"role": "user", "content": "hi"}).blocks == (TextBlock(text="hi"),)
    m = from_anthropic(
        {
            "role": "assistant",
            "content": [
                {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"q": "x"}},
                {"type": "web_fetch_tool_result", "tool_use_id": "s1", "content": {"a": 1}},
                {"type": "text", "text": "done", "citations": None},
            ],
        }
    )
    assert [b.type for b in m.blocks] == ["server_tool_use", "server_tool_result", "text"]
    assert m.blocks[1].wire_type == "web_fetch_tool_result"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("wire", "field"),
    [
        (
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "x"}]},
            "content[1].type",
        ),
        ({"role": "robot", "content": "hi"}, "role"),
        ({"content": "hi"}, "role"),
        ({"role": "user", "content": 3}, "content"),
        ({"role": "user"}, "content"),
        ({"role": "user", "content": ["text"]}, "content[0]"),
        (
            {"role": "assistant", "content": [{"type": "tool_use", "name": "n", "input": {}}]},
            "content[0].id",
        ),
        (
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "", "name": "n", "input": {}}],
            },
            "content[0].id",
        ),
        (
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "i", "name": "n", "input": []}],
            },
            "content[0].input",
        ),
        (
            {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
            "content[0].tool_use_id",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "video"}]}
                ],
            },
            "content[0].content[0].type",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}],
            },
            "content[0].is_error",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "image", "source": {"type": "url", "url": "https://x"}}],
            },
            "content[0].source.type",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "tool_use", "id": "i", "name": "n", "input": {}}],
            },
            "content[0].type",
        ),
        (
            {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
            "content[0].type",
        ),
    ],
)
def test_bad_anthropic_input_names_the_field(wire: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        from_anthropic(wire)
    assert info.value.field == field
    assert field in str(info.value)
