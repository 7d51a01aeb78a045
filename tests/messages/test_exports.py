"""The names and signatures other packages code against (the brief of the Foundation issue)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import wakeful.messages as messages

API = {
    "WireMessage",
    "AnthropicPayload",
    "to_anthropic",
    "from_anthropic",
    "to_openai_chat",
    "from_openai_chat",
    "to_openai_responses",
    "from_openai_responses",
    "auto_detect",
    "to_wire",
    "drop_invalid_pairings",
    "Repair",
    "PairingDrop",
    "SYNTHETIC_TOOL_RESULT",
    "DEFAULT_USER_TAIL_DIRECTIVE",
    "is_wire_valid",
    "WireBuilder",
}


def test_the_api_is_exported() -> None:
    assert set(messages.__all__) >= API
    for name in messages.__all__:
        assert hasattr(messages, name), name


def params(fn: object) -> list[tuple[str, str]]:
    return [(p.name, p.kind.name) for p in inspect.signature(fn).parameters.values()]  # type: ignore[arg-type]


def test_signatures() -> None:
    assert params(messages.to_wire) == [
        ("messages", "POSITIONAL_OR_KEYWORD"),
        ("provider", "POSITIONAL_OR_KEYWORD"),
        ("on_repair", "KEYWORD_ONLY"),
        ("user_tail_directive", "KEYWORD_ONLY"),
    ]
    assert params(messages.drop_invalid_pairings) == [
        ("messages", "POSITIONAL_OR_KEYWORD"),
        ("on_drop", "KEYWORD_ONLY"),
        ("lane_for", "KEYWORD_ONLY"),
    ]
    assert params(messages.to_openai_chat) == [
        ("messages", "POSITIONAL_OR_KEYWORD"),
        ("provider", "KEYWORD_ONLY"),
        ("string_content", "KEYWORD_ONLY"),
    ]
    for fn in (messages.to_anthropic, messages.to_openai_responses, messages.is_wire_valid):
        assert len(params(fn)) == 1


@pytest.mark.parametrize("cls", [messages.Repair, messages.PairingDrop, messages.AnthropicPayload])
def test_records_are_frozen_dataclasses(cls: type) -> None:
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_every_public_function_has_a_docstring() -> None:
    for name in messages.__all__:
        obj = getattr(messages, name)
        if inspect.isfunction(obj):
            assert obj.__doc__ and obj.__doc__.strip(), name
