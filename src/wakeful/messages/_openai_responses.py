"""The OpenAI Responses API converter: our messages to `input` items, and items back to messages.

Owns the Responses spelling of every block kind, one small function per kind and direction,
picked from a table by block type. A message becomes several items (each assistant text, function
call and reasoning item stands alone); reading groups consecutive items of one role back into one
message. Invariant: reasoning items go back only to `openai-responses`; nothing here mutates its
input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import InvalidMessageError
from ._blocks import (
    Block,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._openai_chat import default_filename
from ._wire import (
    WireMessage,
    as_mapping,
    build,
    check_blocks,
    check_placement,
    copy_json,
    data_url,
    dump_arguments,
    flatten_output,
    join,
    media_label,
    opt_str,
    parse_arguments,
    parse_data_url,
    read_blocks,
    render_summary,
    render_text,
    req_str,
    require_data,
    unknown_type,
    wire_type,
)

PROVIDER = "openai-responses"

# --- ours -> Responses: user and system content parts ---------------------------------------------

_Part = Callable[[Any, str], WireMessage | None]


def _text_part(text: str) -> WireMessage | None:
    return {"type": "input_text", "text": text} if text else None


def _image_part(block: ImageBlock, where: str) -> WireMessage | None:
    url = data_url(block.media_type, require_data(block, where))
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _file_part(block: DocumentBlock, where: str) -> WireMessage | None:
    file_data = data_url(block.media_type, require_data(block, where))
    return {"type": "input_file", "file_data": file_data, "filename": default_filename(block)}


_PARTS: dict[str, _Part] = {
    "text": lambda b, _w: _text_part(render_text(b)),
    "compact_summary": lambda b, _w: _text_part(render_summary(b)),
    "image": _image_part,
    "document": _file_part,
    "audio": lambda b, _w: _text_part(media_label(b)),  # no audio input in Responses
    "video": lambda b, _w: _text_part(media_label(b)),
}


def _message_item(role: str, parts: list[WireMessage]) -> list[WireMessage]:
    return [{"type": "message", "role": role, "content": parts}] if parts else []


def _companion(result: ToolResultBlock, where: str) -> list[WireMessage]:
    """Images and files a tool returned, as user parts after the function_call_output items."""
    if isinstance(result.output, str):
        return []
    parts = [
        part
        for k, block in enumerate(result.output)
        if block.type in ("image", "document")
        and (part := _PARTS[block.type](block, f"{where}.output[{k}]")) is not None
    ]
    if not parts:
        return []
    return [{"type": "input_text", "text": f"Attachments from tool call {result.call_id}:"}, *parts]


def _user(message: Message, where: str) -> list[WireMessage]:
    items: list[WireMessage] = []
    companion: list[WireMessage] = []
    own: list[WireMessage] = []
    for j, block in enumerate(message.blocks):
        path = f"{where}.blocks[{j}]"
        if isinstance(block, ToolResultBlock):
            output = flatten_output(block.output, block.is_error)
            items.append(
                {"type": "function_call_output", "call_id": block.call_id, "output": output}
            )
            companion.extend(_companion(block, path))
        elif (part := _PARTS[block.type](block, path)) is not None:
            own.append(part)
    return items + _message_item("user", companion + own)


def _system(message: Message, where: str) -> list[WireMessage]:
    parts = [p for b in message.blocks if (p := _PARTS[b.type](b, where)) is not None]
    return _message_item("system", parts)


# --- ours -> Responses: assistant items -----------------------------------------------------------

_Item = Callable[[Any, str], list[WireMessage]]


def _assistant_text(text: str) -> list[WireMessage]:
    return [{"type": "message", "role": "assistant", "content": text}] if text else []


def _function_call(block: ToolCallBlock, _where: str) -> list[WireMessage]:
    arguments = dump_arguments(block.input)
    return [
        {"type": "function_call", "call_id": block.id, "name": block.name, "arguments": arguments}
    ]


def _reasoning(block: ProviderReasoningBlock, where: str) -> list[WireMessage]:
    if block.provider != PROVIDER:
        return []
    if not isinstance(block.data, dict) or block.data.get("type") != "reasoning":
        raise InvalidMessageError("expected a Responses reasoning item", field=f"{where}.data")
    return [copy_json(block.data)]


_ASSISTANT: dict[str, _Item] = {
    "text": lambda b, _w: _assistant_text(render_text(b)),
    "compact_summary": lambda b, _w: _assistant_text(render_summary(b)),
    "image": lambda b, _w: _assistant_text(media_label(b)),
    "audio": lambda b, _w: _assistant_text(media_label(b)),
    "video": lambda b, _w: _assistant_text(media_label(b)),
    "document": lambda b, _w: _assistant_text(media_label(b)),
    "tool_call": _function_call,
    "provider_reasoning": _reasoning,
    "thinking": lambda _b, _w: [],
    "redacted_thinking": lambda _b, _w: [],
    "server_tool_use": lambda _b, _w: [],
    "server_tool_result": lambda _b, _w: [],
}


def _assistant(message: Message, where: str) -> list[WireMessage]:
    items: list[WireMessage] = []
    for j, block in enumerate(message.blocks):
        items.extend(_ASSISTANT[block.type](block, f"{where}.blocks[{j}]"))
    return items


_ROLES: dict[str, Callable[[Message, str], list[WireMessage]]] = {
    "system": _system,
    "user": _user,
    "assistant": _assistant,
}


def to_openai_responses(messages: Sequence[Message]) -> list[WireMessage]:
    """Convert messages to Responses API `input` items; pure, the input is not modified.

    System messages become `system` message items; tool calls `function_call` items; tool
    results `function_call_output` items (text, `Error: ` prefix when `is_error`) followed by a
    user message with any images or files they returned; `provider_reasoning` blocks of
    provider `openai-responses` are replayed as the reasoning items they hold. Thinking and
    server-tool blocks are dropped; audio and video become text labels; empty text is omitted.
    Raises `InvalidMessageError` for a block its role cannot hold or media with only a `ref`.
    Run `to_wire` first: this converts, it does not repair tool pairing.
    """
    items: list[WireMessage] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        check_placement(message, where)
        items.extend(_ROLES[message.role](message, where))
    return items


# --- Responses -> ours ------------------------------------------------------------------------------

_FromPart = Callable[[Mapping[str, Any], str], Block]


def _read_text(wire: Mapping[str, Any], where: str) -> Block:
    return TextBlock(text=req_str(wire, "text", where))


def _read_image(wire: Mapping[str, Any], where: str) -> Block:
    media_type, data = parse_data_url(wire.get("image_url"), join(where, "image_url"))
    return build(ImageBlock, where, media_type=media_type, data=data)


def _read_file(wire: Mapping[str, Any], where: str) -> Block:
    media_type, data = parse_data_url(wire.get("file_data"), join(where, "file_data"))
    name = opt_str(wire, "filename", where)
    return build(DocumentBlock, where, media_type=media_type, data=data, name=name)


_PART_READERS: dict[str, _FromPart] = {
    "input_text": _read_text,
    "output_text": _read_text,
    "refusal": lambda w, p: TextBlock(text=req_str(w, "refusal", p)),
    "input_image": _read_image,
    "input_file": _read_file,
}


def _read_part(wire: Mapping[str, Any], where: str) -> Block:
    kind = wire_type(wire, where)
    if kind not in _PART_READERS:
        raise unknown_type(kind, where)
    return _PART_READERS[kind](wire, where)


def _read_parts(value: object, where: str) -> list[Block]:
    if isinstance(value, str):
        return [TextBlock(text=value)] if value else []
    if not isinstance(value, list):
        raise InvalidMessageError("expected a string or a list of parts", field=where)
    return read_blocks(value, where, _read_part)


_ItemReader = Callable[[Mapping[str, Any], str], tuple[str, list[Block]]]


def _read_message(item: Mapping[str, Any], where: str) -> tuple[str, list[Block]]:
    role = req_str(item, "role", where)
    if role not in ("user", "assistant", "system", "developer"):
        raise InvalidMessageError(f"unknown role {role!r}", field=join(where, "role"))
    role = "system" if role == "developer" else role
    blocks = _read_parts(item.get("content"), join(where, "content"))
    check_blocks(role, blocks, where, "content")
    return role, blocks


def _read_function_call(item: Mapping[str, Any], where: str) -> tuple[str, list[Block]]:
    call = build(
        ToolCallBlock,
        where,
        id=req_str(item, "call_id", where, nonempty=True),
        name=req_str(item, "name", where, nonempty=True),
        input=parse_arguments(item.get("arguments"), join(where, "arguments")),
    )
    return "assistant", [call]


def _read_function_output(item: Mapping[str, Any], where: str) -> tuple[str, list[Block]]:
    call_id = req_str(item, "call_id", where, nonempty=True)
    raw = item.get("output")
    output: str | tuple[Block, ...]
    output = raw if isinstance(raw, str) else tuple(_read_parts(raw, join(where, "output")))
    return "user", [build(ToolResultBlock, where, call_id=call_id, output=output)]


def _read_reasoning(item: Mapping[str, Any], where: str) -> tuple[str, list[Block]]:
    req_str(item, "id", where, nonempty=True)
    block = build(ProviderReasoningBlock, where, provider=PROVIDER, data=copy_json(dict(item)))
    return "assistant", [block]


_ITEMS: dict[str, _ItemReader] = {
    "message": _read_message,
    "function_call": _read_function_call,
    "function_call_output": _read_function_output,
    "reasoning": _read_reasoning,
}


def read_item(item: Mapping[str, Any], where: str) -> tuple[str, list[Block]]:
    """Read one input item into (role, blocks); an item without `type` is a message."""
    kind = item.get("type", "message")
    if not isinstance(kind, str) or kind not in _ITEMS:
        raise unknown_type(str(kind), where)
    return _ITEMS[kind](item, where)


def from_openai_responses(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Convert Responses items (input or output) to messages, each with a fresh id.

    Consecutive items of one role form one message: function calls and reasoning items join the
    assistant message around them, function-call outputs the user message after them; a
    `developer` message reads as system. Raises `InvalidMessageError` naming the offending field
    (for example `items[3].content[0].type`) for an unknown item or part type, a missing call id,
    non-JSON-object arguments, or media given by URL or file id rather than inline data.
    """
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidMessageError("expected a list of items", field="items")
    groups: list[tuple[str, list[Block]]] = []
    for k, raw in enumerate(items):
        where = f"items[{k}]"
        role, blocks = read_item(as_mapping(raw, where), where)
        if groups and groups[-1][0] == role:
            groups[-1][1].extend(blocks)
        else:
            groups.append((role, list(blocks)))
    return [build(Message, "", role=role, blocks=tuple(blocks)) for role, blocks in groups]


__all__ = ["from_openai_responses", "read_item", "to_openai_responses"]
