"""The Chat Completions converter on hand-written cases: the decisions of docs/messages.md."""

from __future__ import annotations

import pytest

from wakeful.errors import InvalidMessageError
from wakeful.messages import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderReasoningBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
    from_openai_chat,
    label_media,
    system,
    to_openai_chat,
)

from .sdk import assert_chat_valid

OPENROUTER = ProviderReasoningBlock(
    provider="openrouter", data={"reasoning_details": [{"type": "reasoning.text", "text": "a"}]}
)


def _assistant(*blocks: object) -> Message:
    return Message(role="assistant", blocks=blocks)  # type: ignore[arg-type]


def test_tool_results_become_tool_messages_and_media_a_companion_user_message() -> None:
    m = Message(
        role="user",
        blocks=(
            ToolResultBlock(
                call_id="c1",
                output=(TextBlock(text="see"), ImageBlock(media_type="image/png", data="iVBO")),
            ),
            ToolResultBlock(call_id="c2", output="boom", is_error=True),
            TextBlock(text="thanks"),
        ),
    )
    wire = to_openai_chat([m])
    for w in wire:
        assert_chat_valid(w)
    assert wire == [
        {"role": "tool", "tool_call_id": "c1", "content": "see\n[image image/png]"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: boom"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attachments from tool call c1:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                {"type": "text", "text": "thanks"},
            ],
        },
    ]


def test_reasoning_goes_back_only_to_its_own_provider() -> None:
    m = _assistant(
        ThinkingBlock(text="t", signature="s"),
        RedactedThinkingBlock(data="r"),
        OPENROUTER,
        ProviderReasoningBlock(provider="openrouter", data={"reasoning_details": [{"n": 2}]}),
        TextBlock(text="hi"),
    )
    (plain,) = to_openai_chat([m])
    assert plain == {"role": "assistant", "content": "hi"}
    (routed,) = to_openai_chat([m], provider="openrouter")
    assert routed["reasoning_details"] == [{"type": "reasoning.text", "text": "a"}, {"n": 2}]
    back = from_openai_chat(routed, provider="openrouter")
    assert back.blocks[0] == ProviderReasoningBlock(
        provider="openrouter", data={"reasoning_details": routed["reasoning_details"]}
    )


def test_reasoning_may_not_overwrite_message_fields() -> None:
    bad = ProviderReasoningBlock(provider="vllm", data={"content": "x"})
    with pytest.raises(InvalidMessageError) as info:
        to_openai_chat([_assistant(bad)], provider="vllm")
    assert info.value.field == "messages[0].blocks[0].data"


def test_assistant_tool_calls_carry_json_arguments_and_empty_content() -> None:
    # `""`, not null: llama.cpp's Python server answers 500 to null or absent content (issue 19)
    (wire,) = to_openai_chat([_assistant(ToolCallBlock(id="c1", name="read", input={"p": "é"}))])
    assert_chat_valid(wire)
    assert wire == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"p": "é"}'},
            }
        ],
    }


def test_string_content_joins_text_only_parts_and_keeps_lists_that_hold_media() -> None:
    texts = Message(role="user", blocks=(TextBlock(text="one"), TextBlock(text="two")))
    with_image = Message(
        role="user", blocks=(TextBlock(text="look"), ImageBlock(media_type="image/png", data="x"))
    )
    said = _assistant(TextBlock(text="a"), TextBlock(text="b"), ToolCallBlock(id="c", name="f"))
    plain = to_openai_chat([texts, with_image, said])
    joined = to_openai_chat([texts, with_image, said], string_content=True)
    assert isinstance(plain[0]["content"], list) and isinstance(plain[2]["content"], list)
    assert joined[0]["content"] == "one\n\ntwo"
    assert joined[1]["content"] == plain[1]["content"]  # media keeps the list form
    assert joined[2]["content"] == "a\n\nb" and joined[2]["tool_calls"] == plain[2]["tool_calls"]
    for w in joined:
        assert_chat_valid(w)


def test_label_media_replaces_what_a_server_cannot_take_and_changes_nothing_else() -> None:
    doc = DocumentBlock(media_type="application/pdf", data="JVBE", name="a.pdf")
    image = ImageBlock(media_type="image/png", data="iVBO")
    audio = AudioBlock(media_type="audio/wav", data="UklG")
    m = Message(
        role="user",
        blocks=(TextBlock(text="see"), image, doc, ToolResultBlock(call_id="c", output=(audio,))),
    )
    untouched = Message(role="user", blocks=(TextBlock(text="only text"),))
    labelled, same = label_media([m, untouched], frozenset({"image"}))
    assert same is untouched
    assert labelled.id == m.id and m.blocks[2] is doc  # the original keeps its media
    assert labelled.blocks[:3] == (
        TextBlock(text="see"),
        image,
        TextBlock(text="[document application/pdf a.pdf]"),
    )
    result = labelled.blocks[3]
    assert isinstance(result, ToolResultBlock)
    assert result.output == (TextBlock(text="[audio audio/wav]"),)
    assert label_media([m], frozenset({"image", "audio", "video", "document"})) == [m]


def test_user_media_parts() -> None:
    m = Message(
        role="user",
        blocks=(
            AudioBlock(media_type="audio/mpeg", data="SUQz"),
            AudioBlock(media_type="audio/ogg", data="T2dn"),
            VideoBlock(media_type="video/mp4", ref="sha256:x"),
            DocumentBlock(media_type="application/pdf", data="JVBE"),
        ),
    )
    (wire,) = to_openai_chat([m])
    assert_chat_valid(wire)
    assert wire["content"] == [
        {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
        {"type": "text", "text": "[audio audio/ogg]"},
        {"type": "text", "text": "[video video/mp4]"},
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "document.pdf"},
        },
    ]


def test_system_messages_keep_their_role_and_place() -> None:
    assert to_openai_chat([system("a")]) == [{"role": "system", "content": "a"}]
    assert (
        from_openai_chat({"role": "developer", "content": [{"type": "text", "text": "b"}]}).role
        == "system"
    )


def test_from_chat_reads_tool_and_assistant_messages() -> None:
    tool = from_openai_chat(
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]}
    )
    assert tool.role == "user" and tool.blocks == (ToolResultBlock(call_id="c1", output="ok"),)
    reply = from_openai_chat(
        {
            "role": "assistant",
            "content": None,
            "refusal": "no",
            "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": ""}}
            ],
            "reasoning_content": "hmm",
        },
        provider="vllm",
    )
    assert reply.blocks == (
        ProviderReasoningBlock(provider="vllm", data={"reasoning_content": "hmm"}),
        TextBlock(text="no"),
        ToolCallBlock(id="c2", name="f", input={}),
    )


def _call(arguments: object) -> dict[str, object]:
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
        ],
    }


@pytest.mark.parametrize(
    ("wire", "field"),
    [
        (_call("{not json"), "tool_calls[0].function.arguments"),
        (_call("[1, 2]"), "tool_calls[0].function.arguments"),
        (_call({"a": 1}), "tool_calls[0].function.arguments"),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "", "function": {"name": "f", "arguments": "{}"}}],
            },
            "tool_calls[0].id",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]},
            "tool_calls[0].type",
        ),
        ({"role": "assistant", "tool_calls": "x"}, "tool_calls"),
        (
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "video"}]},
            "content[1].type",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
            },
            "content[0].image_url.url",
        ),
        (
            {"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]},
            "content[0].file.file_data",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": "x", "format": "flac"}}
                ],
            },
            "content[0].input_audio.format",
        ),
        ({"role": "user", "content": 7}, "content"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "function", "name": "f", "content": "x"}, "role"),
        (
            {
                "role": "system",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
                ],
            },
            "content[0].type",
        ),
    ],
)
def test_bad_chat_input_names_the_field(wire: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        from_openai_chat(wire)
    assert info.value.field == field
