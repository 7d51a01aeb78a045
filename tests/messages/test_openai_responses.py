"""The Responses API converter on hand-written cases: the decisions of docs/messages.md."""

from __future__ import annotations

import pytest

from wakeful.errors import InvalidMessageError
from wakeful.messages import (
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderReasoningBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    from_openai_responses,
    system,
    to_openai_responses,
    user,
)

from .sdk import RESPONSES_ITEM, assert_sdk_valid

REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "s"}],
    "encrypted_content": "enc",
}


def test_a_tool_round_in_items() -> None:
    messages = [
        system("rules"),
        user("go"),
        Message(
            role="assistant",
            blocks=(
                ThinkingBlock(text="t", signature="s"),
                ProviderReasoningBlock(provider="openai-responses", data=REASONING),
                ProviderReasoningBlock(provider="openrouter", data={"reasoning_details": []}),
                TextBlock(text="calling"),
                ToolCallBlock(id="c1", name="read", input={"p": 1}),
            ),
        ),
        Message(
            role="user",
            blocks=(
                ToolResultBlock(
                    call_id="c1",
                    output=(TextBlock(text="x"), ImageBlock(media_type="image/png", data="iVBO")),
                    is_error=True,
                ),
            ),
        ),
    ]
    items = to_openai_responses(messages)
    for item in items:
        assert_sdk_valid(RESPONSES_ITEM, item)
    assert items == [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "rules"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        REASONING,
        {"type": "message", "role": "assistant", "content": "calling"},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"p": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "Error: x\n[image image/png]"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Attachments from tool call c1:"},
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBO",
                    "detail": "auto",
                },
            ],
        },
    ]
    assert items[2] is not REASONING  # a copy: the caller may mutate the items


def test_reading_groups_items_by_role() -> None:
    messages = from_openai_responses(
        [
            {"role": "developer", "content": "rules"},
            {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
            REASONING,
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            },
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [{"type": "input_text", "text": "r"}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "input_file",
                        "file_data": "data:application/pdf;base64,JVBE",
                        "filename": "a.pdf",
                    }
                ],
            },
        ]
    )
    assert [(m.role, [b.type for b in m.blocks]) for m in messages] == [
        ("system", ["text"]),
        ("user", ["text"]),
        ("assistant", ["provider_reasoning", "text", "tool_call"]),
        ("user", ["tool_result", "document"]),
    ]
    assert messages[3].blocks == (
        ToolResultBlock(call_id="c1", output=(TextBlock(text="r"),)),
        DocumentBlock(media_type="application/pdf", data="JVBE", name="a.pdf"),
    )


@pytest.mark.parametrize(
    ("items", "field"),
    [
        (
            [{"role": "user", "content": "a"}, {"type": "web_search_call", "id": "w"}],
            "items[1].type",
        ),
        ([{"type": "function_call_output", "output": "x"}], "items[0].call_id"),
        (
            [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "nope"}],
            "items[0].arguments",
        ),
        ([{"type": "function_call", "call_id": "c", "arguments": "{}"}], "items[0].name"),
        ([{"role": "user", "content": [{"type": "input_audio"}]}], "items[0].content[0].type"),
        (
            [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}],
            "items[0].content[0].image_url",
        ),
        ([{"role": "critic", "content": "x"}], "items[0].role"),
        ([{"role": "user", "content": 5}], "items[0].content"),
        ([{"type": "reasoning", "summary": []}], "items[0].id"),
        (["text"], "items[0]"),
        ("text", "items"),
    ],
)
def test_bad_responses_input_names_the_field(items: object, field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        from_openai_responses(items)  # type: ignore[arg-type]
    assert info.value.field == field


def test_reasoning_for_responses_must_be_a_reasoning_item() -> None:
    bad = ProviderReasoningBlock(provider="openai-responses", data={"type": "message"})
    with pytest.raises(InvalidMessageError) as info:
        to_openai_responses([Message(role="assistant", blocks=(bad,))])
    assert info.value.field == "messages[0].blocks[0].data"
