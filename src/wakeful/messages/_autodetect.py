"""Reading one wire message of unknown origin: Anthropic, OpenAI chat, a Responses item, or ours.

Owns the detection rules, and nothing else: it decides which reader to call, the readers do the
work. Invariant: detection looks only at keys and block types that one format alone uses, and
falls back to Anthropic (the spec's default), whose reading of plain text is the same as chat's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._anthropic import from_anthropic
from ._blocks import Message
from ._codec import message_from_dict
from ._openai_chat import REASONING_KEYS, from_openai_chat
from ._openai_responses import from_openai_responses
from ._wire import as_mapping

_CHAT_PART_TYPES = frozenset({"image_url", "input_audio", "file", "refusal"})
_RESPONSES_PART_TYPES = frozenset({"input_text", "output_text", "input_image", "input_file"})
_CHAT_ROLES = frozenset({"tool", "developer", "function"})


def _part_types(content: object) -> set[str]:
    if not isinstance(content, list):
        return set()
    return {str(p.get("type")) for p in content if isinstance(p, Mapping)}


def _detect(wire: Mapping[str, Any]) -> str:
    if "blocks" in wire:
        return "wakeful"
    if "type" in wire:
        return "responses"
    if wire.get("role") in _CHAT_ROLES or "tool_calls" in wire:
        return "chat"
    if any(key in wire for key in REASONING_KEYS):
        return "chat"
    kinds = _part_types(wire.get("content"))
    if kinds & _RESPONSES_PART_TYPES:
        return "responses"
    if kinds & _CHAT_PART_TYPES:
        return "chat"
    return "anthropic"


def auto_detect(wire: Mapping[str, Any]) -> Message:
    """Convert one wire message of unknown origin to a Message.

    Our own JSON shape (a `blocks` key) goes through the codec; a Responses item (a `type` key,
    or `input_text`/`input_image`-style parts) through `from_openai_responses`; an OpenAI chat
    message (`tool`/`developer` role, `tool_calls`, reasoning fields, or chat-only part types)
    through `from_openai_chat` (with `reasoning_details` read as provider `openrouter`);
    anything else through `from_anthropic`. Raises `InvalidMessageError` as those readers do.
    """
    msg = as_mapping(wire, "")
    kind = _detect(msg)
    if kind == "wakeful":
        return message_from_dict(dict(msg))
    if kind == "responses":
        return from_openai_responses([msg])[0]  # one item always reads as one message
    if kind == "chat":
        provider = "openrouter" if "reasoning_details" in msg else "openai"
        return from_openai_chat(msg, provider=provider)
    return from_anthropic(msg)


__all__ = ["auto_detect"]
