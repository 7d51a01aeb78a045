"""The OpenAI Chat Completions converter (also every openai-compatible server: vLLM, llama.cpp, ...).

Owns the chat spelling of every block kind, one small function per kind and direction, picked from
a table by block type. One of our messages may become several chat messages: tool results become
`tool` role messages first, then one `user` message holding the rest (and any media the tool
results returned, since a `tool` message carries only text). Invariant: reasoning goes back only
to the provider named in its block; nothing here mutates its input.
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
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._wire import (
    MediaBlock,
    WireMessage,
    as_mapping,
    build,
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
    req_list,
    req_object,
    req_str,
    require_data,
    unknown_type,
    wire_type,
)

AUDIO_FORMATS = {"audio/wav": "wav", "audio/mpeg": "mp3"}
FORMAT_MEDIA_TYPES = {fmt: media for media, fmt in AUDIO_FORMATS.items()}
REASONING_KEYS = ("reasoning_details", "reasoning_content", "reasoning")
TEXT_PART_SEPARATOR = "\n\n"  # between text parts sent as one string (`string_content`)
_RESERVED_KEYS = frozenset(
    {"role", "content", "tool_calls", "name", "refusal", "audio", "function_call"}
)


# --- ours -> chat: user content parts ------------------------------------------------------------

_UserPart = Callable[[Any, str], WireMessage | None]


def _text_part(text: str) -> WireMessage | None:
    return {"type": "text", "text": text} if text else None


def _image_part(block: ImageBlock, where: str) -> WireMessage | None:
    url = data_url(block.media_type, require_data(block, where))
    return {"type": "image_url", "image_url": {"url": url}}


def _audio_part(block: AudioBlock, where: str) -> WireMessage | None:
    fmt = AUDIO_FORMATS.get(block.media_type)
    if fmt is None:
        return _text_part(media_label(block))
    return {
        "type": "input_audio",
        "input_audio": {"data": require_data(block, where), "format": fmt},
    }


def default_filename(block: DocumentBlock) -> str:
    """The filename a document goes out with (OpenAI wants one with inline file data)."""
    if block.name:
        return block.name
    return "document.pdf" if block.media_type == "application/pdf" else "document"


def _document_part(block: DocumentBlock, where: str) -> WireMessage | None:
    file = {
        "file_data": data_url(block.media_type, require_data(block, where)),
        "filename": default_filename(block),
    }
    return {"type": "file", "file": file}


_USER_PARTS: dict[str, _UserPart] = {
    "text": lambda b, _w: _text_part(render_text(b)),
    "compact_summary": lambda b, _w: _text_part(render_summary(b)),
    "image": _image_part,
    "audio": _audio_part,
    "video": lambda b, _w: _text_part(media_label(b)),
    "document": _document_part,
}


def _companion(result: ToolResultBlock, where: str) -> list[WireMessage]:
    """The media a tool returned, as user parts (the `tool` message itself holds only text)."""
    if isinstance(result.output, str):
        return []
    parts: list[WireMessage] = []
    for k, part in enumerate(result.output):
        if isinstance(part, TextBlock) or part.type == "video":
            continue
        wire = _USER_PARTS[part.type](part, f"{where}.output[{k}]")
        if wire is not None and wire["type"] != "text":
            parts.append(wire)
    if not parts:
        return []
    intro = {"type": "text", "text": f"Attachments from tool call {result.call_id}:"}
    return [intro, *parts]


def _collapse(parts: list[WireMessage]) -> str | list[WireMessage]:
    if len(parts) == 1 and parts[0]["type"] == "text":
        return str(parts[0]["text"])
    return parts


def _user(message: Message, where: str, _provider: str) -> list[WireMessage]:
    out: list[WireMessage] = []
    companion: list[WireMessage] = []
    own: list[WireMessage] = []
    for j, block in enumerate(message.blocks):
        path = f"{where}.blocks[{j}]"
        if isinstance(block, ToolResultBlock):
            content = flatten_output(block.output, block.is_error)
            out.append({"role": "tool", "tool_call_id": block.call_id, "content": content})
            companion.extend(_companion(block, path))
        elif (part := _USER_PARTS[block.type](block, path)) is not None:
            own.append(part)
    if companion or own:
        out.append({"role": "user", "content": _collapse(companion + own)})
    return out


def _system(message: Message, where: str, _provider: str) -> list[WireMessage]:
    parts = [p for b in message.blocks if (p := _USER_PARTS[b.type](b, where)) is not None]
    return [{"role": "system", "content": _collapse(parts)}] if parts else []


# --- ours -> chat: the assistant message ----------------------------------------------------------


@dataclass
class _Draft:
    provider: str
    content: list[WireMessage] = field(default_factory=list)
    tool_calls: list[WireMessage] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)

    def text(self, text: str) -> None:
        if text:
            self.content.append({"type": "text", "text": text})


def _add_tool_call(block: ToolCallBlock, draft: _Draft, _where: str) -> None:
    function = {"name": block.name, "arguments": dump_arguments(block.input)}
    draft.tool_calls.append({"id": block.id, "type": "function", "function": function})


def _add_reasoning(block: ProviderReasoningBlock, draft: _Draft, where: str) -> None:
    """Replay reasoning to its own provider: `data` holds assistant-message fields to merge."""
    if block.provider != draft.provider:
        return
    if not isinstance(block.data, dict):
        raise InvalidMessageError(
            "chat reasoning data must be an object of assistant-message fields",
            field=f"{where}.data",
        )
    for key, value in block.data.items():
        if key in _RESERVED_KEYS:
            raise InvalidMessageError(f"reasoning may not set {key!r}", field=f"{where}.data")
        old = draft.extras.get(key)
        both_lists = isinstance(old, list) and isinstance(value, list)
        both_strings = isinstance(old, str) and isinstance(value, str)
        draft.extras[key] = old + value if both_lists or both_strings else copy_json(value)  # type: ignore[operator]  # both lists or both strings here


def _add_label(block: MediaBlock, draft: _Draft, _where: str) -> None:
    draft.text(media_label(block))


def _skip(_block: Block, _draft: _Draft, _where: str) -> None:
    """Anthropic-only blocks (thinking, server tools) do not go to a chat provider."""


_ASSISTANT: dict[str, Callable[[Any, _Draft, str], None]] = {
    "text": lambda b, d, _w: d.text(render_text(b)),
    "compact_summary": lambda b, d, _w: d.text(render_summary(b)),
    "image": _add_label,
    "audio": _add_label,
    "video": _add_label,
    "document": _add_label,
    "tool_call": _add_tool_call,
    "provider_reasoning": _add_reasoning,
    "thinking": _skip,
    "redacted_thinking": _skip,
    "server_tool_use": _skip,
    "server_tool_result": _skip,
}


def _assistant(message: Message, where: str, provider: str) -> list[WireMessage]:
    draft = _Draft(provider=provider)
    for j, block in enumerate(message.blocks):
        _ASSISTANT[block.type](block, draft, f"{where}.blocks[{j}]")
    if not (draft.content or draft.tool_calls or draft.extras):
        return []
    # No text: `""`, never null or absent. Both are valid Chat Completions, but llama.cpp's
    # Python server (0.3.x) answers 500 to them, and `""` is accepted everywhere.
    wire: WireMessage = {"role": "assistant", "content": _collapse(draft.content) or ""}
    if draft.tool_calls:
        wire["tool_calls"] = draft.tool_calls
    wire.update(draft.extras)
    return [wire]


_ROLES: dict[str, Callable[[Message, str, str], list[WireMessage]]] = {
    "system": _system,
    "user": _user,
    "assistant": _assistant,
}


def to_openai_chat(
    messages: Sequence[Message], *, provider: str = "openai", string_content: bool = False
) -> list[WireMessage]:
    """Convert messages to Chat Completions `messages`; pure, the input is not modified.

    `provider` names the server (`openai`, `openrouter`, `vllm`, ...): a `provider_reasoning`
    block is replayed only when its `provider` matches, by merging its `data` object into the
    assistant message (OpenRouter: `{"reasoning_details": [...]}`). Thinking and server-tool
    blocks are dropped. Tool results become `tool` messages (text only, `Error: ` prefix when
    `is_error`); media they returned follows in a user message. Empty text is omitted, and so is
    a message left with nothing. Raises `InvalidMessageError` for a block its role cannot hold
    or media with only a `ref`. Run `to_wire` first: this converts, it does not repair.

    With `string_content`, content made only of text parts goes out as one string (the parts
    joined by a blank line): many servers' chat templates concatenate `content` as a string
    and fail on a list. Content holding media stays a list either way.
    """
    out: list[WireMessage] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        check_placement(message, where)
        out.extend(_ROLES[message.role](message, where, provider))
    if string_content:
        for wire in out:
            wire["content"] = _as_string(wire["content"])
    return out


def _as_string(content: str | list[WireMessage]) -> str | list[WireMessage]:
    if isinstance(content, str) or any(part["type"] != "text" for part in content):
        return content
    return TEXT_PART_SEPARATOR.join(str(part["text"]) for part in content)


# --- chat -> ours ---------------------------------------------------------------------------------

_FromPart = Callable[[Mapping[str, Any], str], Block]


def _read_text(wire: Mapping[str, Any], where: str) -> Block:
    return TextBlock(text=req_str(wire, "text", where))


def _read_image(wire: Mapping[str, Any], where: str) -> Block:
    image = req_object(wire, "image_url", where)
    media_type, data = parse_data_url(image.get("url"), join(where, "image_url.url"))
    return build(ImageBlock, where, media_type=media_type, data=data)


def _read_audio(wire: Mapping[str, Any], where: str) -> Block:
    audio = req_object(wire, "input_audio", where)
    path = join(where, "input_audio")
    fmt = req_str(audio, "format", path)
    if fmt not in FORMAT_MEDIA_TYPES:
        raise InvalidMessageError(f"unknown audio format {fmt!r}", field=join(path, "format"))
    data = req_str(audio, "data", path)
    return build(AudioBlock, where, media_type=FORMAT_MEDIA_TYPES[fmt], data=data)


def _read_file(wire: Mapping[str, Any], where: str) -> Block:
    file = req_object(wire, "file", where)
    path = join(where, "file")
    media_type, data = parse_data_url(file.get("file_data"), join(path, "file_data"))
    name = opt_str(file, "filename", path)
    return build(DocumentBlock, where, media_type=media_type, data=data, name=name)


def _read_refusal(wire: Mapping[str, Any], where: str) -> Block:
    return TextBlock(text=req_str(wire, "refusal", where))


_TEXT_PARTS: dict[str, _FromPart] = {"text": _read_text, "refusal": _read_refusal}
_USER_READERS: dict[str, _FromPart] = {
    "text": _read_text,
    "image_url": _read_image,
    "input_audio": _read_audio,
    "file": _read_file,
}


def _read_content(msg: Mapping[str, Any], readers: dict[str, _FromPart]) -> list[Block]:
    content = msg.get("content")
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)]
    if not isinstance(content, list):
        raise InvalidMessageError("expected a string or a list of parts", field="content")

    def read_one(part: Mapping[str, Any], where: str) -> Block:
        kind = wire_type(part, where)
        if kind not in readers:
            raise unknown_type(kind, where)
        return readers[kind](part, where)

    return read_blocks(content, "content", read_one)


def _read_tool_call(wire: Mapping[str, Any], where: str) -> Block:
    kind = wire.get("type", "function")
    if kind != "function":
        raise InvalidMessageError(f"unknown tool-call type {kind!r}", field=join(where, "type"))
    function = req_object(wire, "function", where)
    path = join(where, "function")
    return build(
        ToolCallBlock,
        where,
        id=req_str(wire, "id", where, nonempty=True),
        name=req_str(function, "name", path, nonempty=True),
        input=parse_arguments(function.get("arguments"), join(path, "arguments")),
    )


def _read_assistant(msg: Mapping[str, Any], provider: str) -> list[Block]:
    blocks: list[Block] = []
    reasoning = {key: msg[key] for key in REASONING_KEYS if msg.get(key) is not None}
    if reasoning:
        blocks.append(build(ProviderReasoningBlock, "", provider=provider, data=reasoning))
    blocks.extend(_read_content(msg, _TEXT_PARTS))
    if (refusal := opt_str(msg, "refusal", "")) is not None:
        blocks.append(TextBlock(text=refusal))
    if msg.get("tool_calls") is not None:
        blocks.extend(read_blocks(req_list(msg, "tool_calls", ""), "tool_calls", _read_tool_call))
    return blocks


def _read_tool(msg: Mapping[str, Any]) -> Block:
    texts = _read_content(msg, {"text": _read_text})
    output = "".join(b.text for b in texts if isinstance(b, TextBlock))
    call_id = req_str(msg, "tool_call_id", "", nonempty=True)
    return build(ToolResultBlock, "", call_id=call_id, output=output)


def from_openai_chat(wire: Mapping[str, Any], *, provider: str = "openai") -> Message:
    """Convert one Chat Completions message to a Message (with a fresh id).

    Roles: `system`/`developer` -> system, `user` -> user, `assistant` -> assistant, `tool` ->
    a user message holding one tool result. Reasoning fields (`reasoning_details`,
    `reasoning_content`, `reasoning`) become one `provider_reasoning` block tagged `provider`.
    Raises `InvalidMessageError` naming the offending field (for example `content[2].type`)
    for an unknown role or part type, a missing id, non-JSON-object tool arguments, content that
    is not a string or list, or media given by URL or file id rather than inline data.
    """
    msg = as_mapping(wire, "")
    role = req_str(msg, "role", "")
    blocks: list[Block]
    if role in ("system", "developer"):
        role, blocks = "system", _read_content(msg, {"text": _read_text})
    elif role == "user":
        blocks = _read_content(msg, _USER_READERS)
    elif role == "assistant":
        blocks = _read_assistant(msg, provider)
    elif role == "tool":
        role, blocks = "user", [_read_tool(msg)]
    else:
        raise InvalidMessageError(f"unknown role {role!r}", field="role")
    message = build(Message, "", role=role, blocks=tuple(blocks))
    check_placement(message, "", block_key="content")
    return message


__all__ = ["from_openai_chat", "to_openai_chat"]
