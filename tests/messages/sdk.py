"""Validation of converter output against the official SDKs' own request param types.

The SDK params are TypedDicts; pydantic validates them, but lazily for `Iterable[...]` fields and
silently dropping unknown keys. `assert_sdk_valid` therefore consumes every lazy iterator and then
requires the validated value to equal the input, so an unknown key, a missing one, a wrong literal
or a block that only matches a *response* model all fail.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anthropic.types as anthropic_types
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import BaseModel, TypeAdapter

ANTHROPIC_MESSAGE = TypeAdapter(anthropic_types.MessageParam)
ANTHROPIC_BLOCK = TypeAdapter(anthropic_types.ContentBlockParam)  # request params only
ANTHROPIC_SYSTEM_BLOCK = TypeAdapter(anthropic_types.TextBlockParam)
CHAT_MESSAGE = TypeAdapter(ChatCompletionMessageParam)
RESPONSES_ITEM = TypeAdapter(ResponseInputItemParam)

# Keys a chat server other than OpenAI reads on an assistant message (replayed reasoning).
CHAT_EXTENSION_KEYS = ("reasoning_details", "reasoning_content", "reasoning")


def materialise(value: Any) -> Any:
    """Turn validated output into plain JSON, consuming (and so validating) lazy iterators."""
    if isinstance(value, dict):
        return {k: materialise(v) for k, v in value.items()}
    if isinstance(value, str | bytes | int | float | bool | BaseModel) or value is None:
        return value
    if isinstance(value, Iterable):
        return [materialise(v) for v in value]
    return value


def assert_sdk_valid(adapter: TypeAdapter[Any], wire: dict[str, Any]) -> None:
    """Fail unless `wire` validates against `adapter` exactly, with nothing dropped or coerced."""
    validated = materialise(adapter.validate_python(wire))
    assert validated == wire, f"SDK type changed the value:\n{validated!r}\n!=\n{wire!r}"


def assert_anthropic_valid(wire: dict[str, Any]) -> None:
    """An Anthropic message: the envelope by `MessageParam`, each block by the param-only union.

    (`MessageParam`'s content union also admits *response* models, which pydantic's smart union
    sometimes prefers; checking blocks against `ContentBlockParam` keeps the test about params.)
    """
    assert set(wire) == {"role", "content"} and wire["role"] in ("user", "assistant")
    ANTHROPIC_MESSAGE.validate_python(wire)
    assert isinstance(wire["content"], list) and wire["content"]
    for block in wire["content"]:
        assert_sdk_valid(ANTHROPIC_BLOCK, block)


def assert_chat_valid(wire: dict[str, Any]) -> None:
    """Chat validation, allowing the reasoning keys OpenRouter-style servers read."""
    core = {k: v for k, v in wire.items() if k not in CHAT_EXTENSION_KEYS}
    if core != wire:
        assert core["role"] == "assistant"
    assert_sdk_valid(CHAT_MESSAGE, core)
