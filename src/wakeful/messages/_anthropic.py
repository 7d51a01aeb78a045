"""The Anthropic Messages converter: our messages to a request payload, and a wire message back.

Owns Anthropic's spelling of every block kind, one small function per kind and direction, picked
from a table by block type. Invariant: a block Anthropic cannot take is dropped (foreign reasoning,
unsigned thinking) or becomes a text label (audio, video, unsupported media types); it never goes
out in a shape the Messages API rejects, and nothing here mutates its input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidMessageError
from ._blocks import (
    AudioBlock,
    Block,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderReasoningBlock,
    RedactedThinkingBlock,
    ServerToolResultBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from ._wire import (
    MEDIA_TYPES,
    SYSTEM_PREFIX,
    MediaBlock,
    WireMessage,
    as_mapping,
    build,
    check_placement,
    copy_json,
    document_text,
    join,
    media_label,
    opt_str,
    read_blocks,
    render_summary,
    render_text,
    req_object,
    req_str,
    require_data,
    text_to_base64,
    unknown_type,
    wire_type,
)

PROVIDER = "anthropic"
IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@dataclass(frozen=True)
class AnthropicPayload:
    """The `system` and `messages` arguments of one Anthropic Messages request."""

    system: list[WireMessage] = field(default_factory=list)
    messages: list[WireMessage] = field(default_factory=list)


# --- ours -> Anthropic: one function per block kind -------------------------------------------

_ToWire = Callable[[Any, str], list[WireMessage]]


def _text(text: str) -> list[WireMessage]:
    # Anthropic rejects empty text blocks, so an empty text carries nothing.
    return [{"type": "text", "text": text}] if text else []


def _label(block: MediaBlock, _field: str) -> list[WireMessage]:
    return _text(media_label(block))


def _image(block: ImageBlock, where: str) -> list[WireMessage]:
    if block.media_type not in IMAGE_MEDIA_TYPES:
        return _label(block, where)
    source = {"type": "base64", "media_type": block.media_type, "data": require_data(block, where)}
    return [{"type": "image", "source": source}]


def _document(block: DocumentBlock, where: str) -> list[WireMessage]:
    if block.media_type == "application/pdf":
        data = require_data(block, where)
        source: WireMessage = {"type": "base64", "media_type": "application/pdf", "data": data}
    elif block.media_type == "text/plain":
        source = {"type": "text", "media_type": "text/plain", "data": document_text(block, where)}
    else:
        return _label(block, where)
    out: WireMessage = {"type": "document", "source": source}
    if block.name:
        out["title"] = block.name
    return [out]


def _tool_result_part(part: Block, where: str) -> list[WireMessage]:
    if isinstance(part, TextBlock):
        return _text(render_text(part))
    if isinstance(part, ImageBlock):
        return _image(part, where)
    if isinstance(part, DocumentBlock):
        return _document(part, where)
    assert isinstance(part, AudioBlock | VideoBlock)
    return _label(part, where)


def _tool_result(block: ToolResultBlock, where: str) -> list[WireMessage]:
    content: str | list[WireMessage]
    if isinstance(block.output, str):
        content = block.output
    else:
        content = []
        for k, part in enumerate(block.output):
            content.extend(_tool_result_part(part, f"{where}.output[{k}]"))
    out: WireMessage = {"type": "tool_result", "tool_use_id": block.call_id, "content": content}
    if block.is_error:
        out["is_error"] = True
    return [out]


def _thinking(block: ThinkingBlock, _where: str) -> list[WireMessage]:
    # Anthropic only accepts thinking it signed; unsigned thinking came from elsewhere.
    if block.signature is None:
        return []
    return [{"type": "thinking", "thinking": block.text, "signature": block.signature}]


def _provider_reasoning(block: ProviderReasoningBlock, where: str) -> list[WireMessage]:
    if block.provider != PROVIDER:
        return []
    if not isinstance(block.data, dict):
        raise InvalidMessageError("anthropic reasoning data must be a block", field=f"{where}.data")
    return [copy_json(block.data)]


_TO_WIRE: dict[str, _ToWire] = {
    "text": lambda b, _w: _text(render_text(b)),
    "compact_summary": lambda b, _w: _text(render_summary(b)),
    "image": _image,
    "document": _document,
    "audio": _label,
    "video": _label,
    "tool_call": lambda b, _w: [
        {"type": "tool_use", "id": b.id, "name": b.name, "input": copy_json(b.input)}
    ],
    "tool_result": _tool_result,
    "thinking": _thinking,
    "redacted_thinking": lambda b, _w: [{"type": "redacted_thinking", "data": b.data}],
    "provider_reasoning": _provider_reasoning,
    "server_tool_use": lambda b, _w: [
        {"type": "server_tool_use", "id": b.id, "name": b.name, "input": copy_json(b.input)}
    ],
    "server_tool_result": lambda b, _w: [
        {"type": b.wire_type, "tool_use_id": b.tool_use_id, "content": copy_json(b.content)}
    ],
}


def _content(message: Message, where: str) -> list[WireMessage]:
    out: list[WireMessage] = []
    for j, block in enumerate(message.blocks):
        path = f"{where}.blocks[{j}]"
        if message.role == "assistant" and block.type in MEDIA_TYPES:
            out.extend(_label(block, path))  # type: ignore[arg-type]  # a MediaBlock: its type is in MEDIA_TYPES
        else:
            out.extend(_TO_WIRE[block.type](block, path))
    # Anthropic wants a user message's tool_result blocks before anything else in it.
    results = [b for b in out if b["type"] == "tool_result"]
    return results + [b for b in out if b["type"] != "tool_result"] if results else out


def to_anthropic(messages: Sequence[Message]) -> AnthropicPayload:
    """Convert messages to an Anthropic request payload; pure, the input is not modified.

    System messages before the first other message become `payload.system` text blocks; a later
    system message keeps its place in time as a user message prefixed `[system message]`.
    A message left with no content (only empty text or foreign reasoning) is omitted.
    Raises `InvalidMessageError` for a block its role cannot hold or media with only a `ref`.
    Run `to_wire` first: this function converts, it does not repair tool pairing.
    """
    payload = AnthropicPayload()
    leading = True
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        check_placement(message, where)
        content = _content(message, where)
        if message.role == "system" and leading:
            payload.system.extend(content)
            continue
        leading = False
        if not content:
            continue
        if message.role == "system":
            content[0] = {"type": "text", "text": SYSTEM_PREFIX + content[0]["text"]}
        role = "user" if message.role == "system" else message.role
        payload.messages.append({"role": role, "content": content})
    return payload


# --- Anthropic -> ours: one function per wire block type ---------------------------------------

_FromWire = Callable[[Mapping[str, Any], str], Block]


def _read_source(wire: Mapping[str, Any], where: str) -> tuple[str, str]:
    source = req_object(wire, "source", where)
    path = join(where, "source")
    kind = req_str(source, "type", path)
    if kind == "base64":
        return req_str(source, "media_type", path), req_str(source, "data", path)
    if kind == "text" and wire.get("type") == "document":
        return "text/plain", text_to_base64(req_str(source, "data", path))
    raise InvalidMessageError(
        f"a {kind!r} source cannot be represented (only inline base64 data)",
        field=join(path, "type"),
    )


def _read_image(wire: Mapping[str, Any], where: str) -> Block:
    media_type, data = _read_source(wire, where)
    return build(ImageBlock, where, media_type=media_type, data=data)


def _read_document(wire: Mapping[str, Any], where: str) -> Block:
    media_type, data = _read_source(wire, where)
    name = opt_str(wire, "title", where)
    return build(DocumentBlock, where, media_type=media_type, data=data, name=name)


def _read_text(wire: Mapping[str, Any], where: str) -> Block:
    return TextBlock(text=req_str(wire, "text", where))


_RESULT_PARTS: dict[str, _FromWire] = {
    "text": _read_text,
    "image": _read_image,
    "document": _read_document,
}


def _read_result_part(wire: Mapping[str, Any], where: str) -> Block:
    kind = wire_type(wire, where)
    if kind not in _RESULT_PARTS:
        raise unknown_type(kind, where)
    return _RESULT_PARTS[kind](wire, where)


def _read_tool_result(wire: Mapping[str, Any], where: str) -> Block:
    raw = wire.get("content", "")
    output: str | tuple[Block, ...]
    if isinstance(raw, str):
        output = raw
    elif isinstance(raw, list):
        output = tuple(read_blocks(raw, join(where, "content"), _read_result_part))
    else:
        raise InvalidMessageError("expected a string or a list", field=join(where, "content"))
    is_error = wire.get("is_error") or False
    if not isinstance(is_error, bool):
        raise InvalidMessageError("expected a boolean", field=join(where, "is_error"))
    call_id = req_str(wire, "tool_use_id", where, nonempty=True)
    return build(ToolResultBlock, where, call_id=call_id, output=output, is_error=is_error)


def _read_input(wire: Mapping[str, Any], where: str) -> dict[str, Any]:
    return dict(req_object(wire, "input", where))


def _read_tool_use(wire: Mapping[str, Any], where: str) -> Block:
    call_id = req_str(wire, "id", where, nonempty=True)
    name = req_str(wire, "name", where, nonempty=True)
    return build(ToolCallBlock, where, id=call_id, name=name, input=_read_input(wire, where))


def _read_server_tool_use(wire: Mapping[str, Any], where: str) -> Block:
    call_id = req_str(wire, "id", where, nonempty=True)
    name = req_str(wire, "name", where, nonempty=True)
    return build(ServerToolUseBlock, where, id=call_id, name=name, input=_read_input(wire, where))


def _read_server_tool_result(wire: Mapping[str, Any], where: str) -> Block:
    tool_use_id = req_str(wire, "tool_use_id", where, nonempty=True)
    return build(
        ServerToolResultBlock,
        where,
        tool_use_id=tool_use_id,
        wire_type=wire["type"],
        content=wire.get("content"),
    )


def _read_thinking(wire: Mapping[str, Any], where: str) -> Block:
    text = req_str(wire, "thinking", where)
    return ThinkingBlock(text=text, signature=opt_str(wire, "signature", where))


_FROM_WIRE: dict[str, _FromWire] = {
    "text": _read_text,
    "image": _read_image,
    "document": _read_document,
    "tool_use": _read_tool_use,
    "tool_result": _read_tool_result,
    "thinking": _read_thinking,
    "redacted_thinking": lambda w, p: RedactedThinkingBlock(data=req_str(w, "data", p)),
    "server_tool_use": _read_server_tool_use,
}


def _read_block(wire: Mapping[str, Any], where: str) -> Block:
    kind = wire_type(wire, where)
    if kind in _FROM_WIRE:
        return _FROM_WIRE[kind](wire, where)
    if kind.endswith("_tool_result"):  # web_search_tool_result, code_execution_tool_result, ...
        return _read_server_tool_result(wire, where)
    raise unknown_type(kind, where)


def from_anthropic(wire: Mapping[str, Any]) -> Message:
    """Convert one Anthropic wire message (`role`, string or block-list `content`) to a Message.

    The message gets a fresh id. Raises `InvalidMessageError` naming the offending field (for
    example `content[2].type`) for an unknown block type, a missing id, a wrong role, content
    that is not a string or a list, a block its role cannot hold, or a URL/file media source.
    Citations and cache-control markers are not part of the model and are dropped.
    """
    msg = as_mapping(wire, "")
    role = req_str(msg, "role", "")
    if role not in ("user", "assistant", "system"):
        raise InvalidMessageError(f"unknown role {role!r}", field="role")
    content = msg.get("content")
    blocks: list[Block]
    if isinstance(content, str):
        blocks = [TextBlock(text=content)] if content else []
    elif isinstance(content, list):
        blocks = read_blocks(content, "content", _read_block)
    else:
        raise InvalidMessageError("expected a string or a list of blocks", field="content")
    message = build(Message, "", role=role, blocks=tuple(blocks))
    check_placement(message, "", block_key="content")
    return message


__all__ = ["AnthropicPayload", "from_anthropic", "to_anthropic"]
