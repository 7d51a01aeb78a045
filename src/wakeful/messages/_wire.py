"""What the three wire converters share: how our blocks read as text, data URLs, strict readers.

This module owns the spelling decisions every provider shares (the origin prefix, the compact-summary
text, media labels, which block may sit in which role) so a conversation says the same thing to
every provider, and the readers that turn a malformed wire payload into an `InvalidMessageError`
naming the offending field. Invariant: a reader returns what the payload says or raises; it never
guesses a value.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import InvalidMessageError
from ._blocks import (
    AudioBlock,
    Block,
    CompactSummaryBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    VideoBlock,
)

WireMessage: TypeAlias = dict[str, Any]
"""One JSON object in a provider's own wire shape (a message, a content block, an input item)."""

MediaBlock: TypeAlias = ImageBlock | AudioBlock | VideoBlock | DocumentBlock
MEDIA_TYPES = frozenset({"image", "audio", "video", "document"})

SUMMARY_PREFIX = "Summary of earlier conversation:\n"
SYSTEM_PREFIX = "[system message]\n"
ERROR_PREFIX = "Error: "

# Which block kinds a message of each role may hold, for every converter, both directions.
# Media in an assistant message is allowed in the model but goes on the wire as a text label.
_ALLOWED: dict[str, frozenset[str]] = {
    "system": frozenset({"text", "compact_summary"}),
    "user": frozenset({"text", "compact_summary", "tool_result"}) | MEDIA_TYPES,
    "assistant": frozenset(
        {
            "text",
            "compact_summary",
            "tool_call",
            "thinking",
            "redacted_thinking",
            "provider_reasoning",
            "server_tool_use",
            "server_tool_result",
        }
    )
    | MEDIA_TYPES,
}

M = TypeVar("M", bound=BaseModel)


# --- how blocks read as text ---------------------------------------------------------------


def render_text(block: TextBlock) -> str:
    """The text a provider sees: a text block with an `origin` gets a one-line bracketed prefix."""
    origin = block.origin
    if origin is None:
        return block.text
    sender = f", sender {origin.sender}" if origin.sender else ""
    return f"[{origin.kind} from {origin.source}{sender}]\n{block.text}"


def render_summary(block: CompactSummaryBlock) -> str:
    """The text that stands in for a compact summary on the wire."""
    return SUMMARY_PREFIX + block.summary


def media_label(block: MediaBlock) -> str:
    """A bracketed label for media a provider cannot take (same spelling as `tool_result_text`)."""
    name = f" {block.name}" if block.name else ""
    return f"[{block.type} {block.media_type}{name}]"


def label_media(messages: Sequence[Message], accepts: frozenset[str]) -> list[Message]:
    """Replace media a provider cannot take with its text label, for one request's wire only.

    Every image, audio, video or document block whose `type` is not in `accepts` becomes a text
    block holding `media_label(block)`, in messages and inside tool results alike. Pure: the
    messages given are not changed (the stored transcript keeps its media), and a message with
    nothing to replace is returned as the same object.
    """
    return [_label_message(m, accepts) for m in messages]


def _label_message(message: Message, accepts: frozenset[str]) -> Message:
    blocks = tuple(_label_block(b, accepts) for b in message.blocks)
    if all(new is old for new, old in zip(blocks, message.blocks, strict=True)):
        return message
    return message.model_copy(update={"blocks": blocks})


def _label_block(block: Block, accepts: frozenset[str]) -> Block:
    if isinstance(block, ImageBlock | AudioBlock | VideoBlock | DocumentBlock):
        return block if block.type in accepts else TextBlock(text=media_label(block))
    if isinstance(block, ToolResultBlock) and not isinstance(block.output, str):
        output = tuple(_label_block(part, accepts) for part in block.output)
        if any(new is not old for new, old in zip(output, block.output, strict=True)):
            return block.model_copy(update={"output": output})
    return block


def flatten_output(output: str | tuple[Any, ...], is_error: bool) -> str:
    """A tool result's output as one string: text parts joined, media parts as labels."""
    if isinstance(output, str):
        text = output
    else:
        text = "\n".join(
            render_text(p) if isinstance(p, TextBlock) else media_label(p) for p in output
        )
    return ERROR_PREFIX + text if is_error else text


def require_data(block: MediaBlock, field: str) -> str:
    """Return the inline base64 data of a media block; a `ref`-only block cannot be sent."""
    if block.data is None:
        raise InvalidMessageError(
            f"this {block.type} holds only a blob ref ({block.ref}); "
            "resolve refs to inline data before converting",
            field=f"{field}.ref",
        )
    return block.data


def document_text(block: DocumentBlock, field: str) -> str:
    """Decode a text document's base64 data (`encoding` names its charset; default UTF-8)."""
    data = require_data(block, field)
    charset = "utf-8" if block.encoding in (None, "base64") else block.encoding
    try:
        return base64.b64decode(data, validate=True).decode(charset)
    except (binascii.Error, UnicodeDecodeError, LookupError) as err:
        raise InvalidMessageError(
            f"not base64 {charset} text: {err}", field=f"{field}.data"
        ) from None


def text_to_base64(text: str) -> str:
    """Base64 of the UTF-8 bytes of `text` (how a text document is held in the model)."""
    return base64.b64encode(text.encode()).decode()


def data_url(media_type: str, data: str) -> str:
    """A `data:` URL for base64 data."""
    return f"data:{media_type};base64,{data}"


_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


def parse_data_url(url: object, field: str) -> tuple[str, str]:
    """Split a base64 `data:` URL into (media type, data); any other URL cannot be represented."""
    if not isinstance(url, str):
        raise InvalidMessageError("expected a string", field=field)
    found = _DATA_URL.fullmatch(url)
    if found is None:
        raise InvalidMessageError(
            "only inline base64 data: URLs can be represented (fetch remote media first)",
            field=field,
        )
    return found.group(1), found.group(2)


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value, so wire output never aliases a block's mutable data."""
    return copy.deepcopy(value)


def dump_arguments(value: Mapping[str, Any]) -> str:
    """Tool-call input as the JSON string OpenAI-style APIs carry."""
    return json.dumps(value, ensure_ascii=False)


def parse_arguments(text: object, field: str) -> dict[str, Any]:
    """Parse a tool call's JSON `arguments` into an object ("" reads as {})."""
    if not isinstance(text, str):
        raise InvalidMessageError("expected a JSON string", field=field)
    if text.strip() == "":
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise InvalidMessageError(f"not valid JSON: {err.msg}", field=field) from None
    if not isinstance(value, dict):
        raise InvalidMessageError("tool-call arguments must be a JSON object", field=field)
    return value


# --- role placement --------------------------------------------------------------------------


def check_placement(message: Message, field: str, block_key: str = "blocks") -> None:
    """Raise unless every block of `message` may sit in a message of its role."""
    check_blocks(message.role, message.blocks, field, block_key)


def check_blocks(role: str, blocks: Sequence[Block], field: str, block_key: str) -> None:
    """Raise unless every one of `blocks` may sit in a message of `role`; name the first misfit."""
    allowed = _ALLOWED[role]
    for j, block in enumerate(blocks):
        if block.type not in allowed:
            raise InvalidMessageError(
                f"a {block.type} block cannot be in a {role} message",
                field=join(field, f"{block_key}[{j}].type"),
            )


# --- strict readers of wire payloads ---------------------------------------------------------


def join(prefix: str, key: str) -> str:
    """Join a field path: `content[2]` + `type` -> `content[2].type`."""
    if not prefix:
        return key
    return f"{prefix}{key}" if key.startswith("[") else f"{prefix}.{key}"


def as_mapping(value: object, field: str) -> Mapping[str, Any]:
    """Return `value` if it is a JSON object, else raise naming `field`."""
    if not isinstance(value, Mapping):
        raise InvalidMessageError("expected an object", field=field or None)
    return value


def req_str(wire: Mapping[str, Any], key: str, prefix: str, *, nonempty: bool = False) -> str:
    """The string at `wire[key]`; raise if missing, not a string, or empty when `nonempty`."""
    value = wire.get(key)
    if not isinstance(value, str):
        what = "missing" if value is None else "expected a string"
        raise InvalidMessageError(what, field=join(prefix, key))
    if nonempty and not value:
        raise InvalidMessageError("must not be empty", field=join(prefix, key))
    return value


def opt_str(wire: Mapping[str, Any], key: str, prefix: str) -> str | None:
    """The string at `wire[key]`, or None when absent or null; raise on another type."""
    value = wire.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidMessageError("expected a string", field=join(prefix, key))
    return value


def req_list(wire: Mapping[str, Any], key: str, prefix: str) -> list[Any]:
    """The list at `wire[key]`; raise if missing or not a list."""
    value = wire.get(key)
    if not isinstance(value, list):
        what = "missing" if value is None else "expected a list"
        raise InvalidMessageError(what, field=join(prefix, key))
    return value


def req_object(wire: Mapping[str, Any], key: str, prefix: str) -> Mapping[str, Any]:
    """The object at `wire[key]`; raise if missing or not an object."""
    value = wire.get(key)
    if value is None:
        raise InvalidMessageError("missing", field=join(prefix, key))
    return as_mapping(value, join(prefix, key))


def wire_type(wire: Mapping[str, Any], prefix: str) -> str:
    """The `type` discriminator of a wire block."""
    return req_str(wire, "type", prefix)


def unknown_type(kind: str, prefix: str) -> InvalidMessageError:
    """The error for a wire block whose `type` this converter does not know."""
    return InvalidMessageError(f"unknown type {kind!r}", field=join(prefix, "type"))


def build(model: Callable[..., M], prefix: str, **values: Any) -> M:
    """Construct a block or message; a validation failure names the field under `prefix`."""
    try:
        return model(**values)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidMessageError(first["msg"], field=join(prefix, where) or None) from None


def read_blocks(
    items: list[Any],
    prefix: str,
    read_one: Callable[[Mapping[str, Any], str], Any],
) -> list[Any]:
    """Read each element of a wire list with `read_one`, naming `prefix[k]` on failure."""
    out: list[Any] = []
    for k, item in enumerate(items):
        path = join(prefix, f"[{k}]")
        out.append(read_one(as_mapping(item, path), path))
    return out
