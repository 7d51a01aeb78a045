"""The provider-neutral message model: `Message` and every block kind.

Blocks are frozen values discriminated by `type`. Everything that crosses a module boundary is
one of these models, never a loose dict. Invariant: a block carries what the *model* said or was
told, nothing about how a given provider spells it; provider spelling lives in the converters.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from .._ids import new_message_id
from ._plain import media_label

Role: TypeAlias = Literal["user", "assistant", "system"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class _Typed(_Frozen):
    """A block: its `type` discriminator is always written, even when dumping without defaults.

    The JSON schema (both modes) is the fields' own, with `type` required: the serializer only
    adds `type` to what the fields dump, and a block is only ever read through the `Block`
    union, which cannot pick a kind without it. Left to pydantic, the serializer's return type
    (a plain dict) would stand in for the schema, and every block would document as any object.
    """

    @model_serializer(mode="wrap")
    def _keep_type(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        out: dict[str, object] = handler(self)
        return {"type": getattr(self, "type"), **out}  # noqa: B009

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler.resolve_ref_schema(handler(_fields_only(core_schema)))
        schema["required"] = ["type", *(r for r in schema.get("required", ()) if r != "type")]
        return schema


def _fields_only(schema: CoreSchema) -> CoreSchema:
    """`schema` without its serializer, also under validator wrappers (a media block's
    `model_validator` wraps the model schema in a `function-after` schema)."""
    out: dict[str, Any] = {k: v for k, v in schema.items() if k != "serialization"}
    if out["type"].startswith("function-") and isinstance(out.get("schema"), dict):
        out["schema"] = _fields_only(out["schema"])
    return cast(CoreSchema, out)


class TextOrigin(_Frozen):
    """Who sent a text block when it was not the session's own user."""

    kind: Literal["user", "signal", "event"]
    source: str
    sender: str | None = None
    message_id: str | None = None


class TextBlock(_Typed):
    type: Literal["text"] = "text"
    text: str
    origin: TextOrigin | None = None


class _Media(_Typed):
    """Inline base64 `data` or a blob `ref` (a SHA-256 digest), exactly one of them."""

    media_type: str
    data: str | None = None
    ref: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> _Media:
        if (self.data is None) == (self.ref is None):
            raise ValueError("a media block needs exactly one of `data` (base64) or `ref`")
        return self


class ImageBlock(_Media):
    type: Literal["image"] = "image"


class AudioBlock(_Media):
    type: Literal["audio"] = "audio"


class VideoBlock(_Media):
    type: Literal["video"] = "video"


class DocumentBlock(_Media):
    type: Literal["document"] = "document"
    encoding: str | None = None


ToolResultPart: TypeAlias = Annotated[
    TextBlock | ImageBlock | AudioBlock | VideoBlock | DocumentBlock,
    Field(discriminator="type"),
]


class ToolCallBlock(_Typed):
    type: Literal["tool_call"] = "tool_call"
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, JsonValue] = Field(default_factory=dict)


class ToolResultBlock(_Typed):
    type: Literal["tool_result"] = "tool_result"
    call_id: str = Field(min_length=1)
    output: str | tuple[ToolResultPart, ...]
    is_error: bool = False
    metadata: dict[str, JsonValue] | None = None


class ThinkingBlock(_Typed):
    type: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None


class RedactedThinkingBlock(_Typed):
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ProviderReasoningBlock(_Typed):
    """Opaque reasoning (OpenRouter, vLLM, OpenAI Responses), replayed only to `provider`."""

    type: Literal["provider_reasoning"] = "provider_reasoning"
    provider: str
    data: JsonValue


class ServerToolUseBlock(_Typed):
    """A tool the provider ran itself (Anthropic `web_search`)."""

    type: Literal["server_tool_use"] = "server_tool_use"
    id: str = Field(min_length=1)
    name: str
    input: dict[str, JsonValue] = Field(default_factory=dict)


class ServerToolResultBlock(_Typed):
    """The result of a server tool; `wire_type` keeps the provider's block type."""

    type: Literal["server_tool_result"] = "server_tool_result"
    tool_use_id: str = Field(min_length=1)
    wire_type: str = "web_search_tool_result"
    content: JsonValue = None


class CompactSummaryBlock(_Typed):
    """A summary that stands in for compacted turns on the wire (history stays durable)."""

    type: Literal["compact_summary"] = "compact_summary"
    summary: str
    through_seq: int | None = None


Block: TypeAlias = Annotated[
    TextBlock
    | ImageBlock
    | AudioBlock
    | VideoBlock
    | DocumentBlock
    | ToolCallBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ProviderReasoningBlock
    | ServerToolUseBlock
    | ServerToolResultBlock
    | CompactSummaryBlock,
    Field(discriminator="type"),
]

REASONING_TYPES = frozenset({"thinking", "redacted_thinking", "provider_reasoning"})


class Message(_Frozen):
    """One message of a conversation.

    `lane` names the run lane a message belongs to (parent run, a subagent's run); tool-call ids
    only have to be unique within one lane. `aborted` marks output a process death cut off.
    """

    id: str = ""  # filled by `_fill_id`; a plain default keeps `exclude_defaults` dumps cheap
    role: Role
    blocks: tuple[Block, ...]
    metadata: dict[str, JsonValue] | None = None
    lane: str | None = None
    aborted: bool = False

    @model_validator(mode="after")
    def _fill_id(self) -> Message:
        # After, not before, validation: a "before" validator makes pydantic build the whole
        # input as Python objects first; decoding 5,000 stored messages (every one has its id)
        # took 26 ms of CPU that way, 18 ms now (docs/store.md, "Loading a transcript").
        if not self.id:
            object.__setattr__(self, "id", new_message_id())
        return self

    def text(self) -> str:
        """Return the concatenated text of the message's text blocks."""
        return "".join(b.text for b in self.blocks if isinstance(b, TextBlock))

    def tool_calls(self) -> list[ToolCallBlock]:
        """Return the tool-call blocks, in order."""
        return [b for b in self.blocks if isinstance(b, ToolCallBlock)]

    def tool_results(self) -> list[ToolResultBlock]:
        """Return the tool-result blocks, in order."""
        return [b for b in self.blocks if isinstance(b, ToolResultBlock)]


def user(text: str, **kwargs: object) -> Message:
    """Build a user message holding one text block."""
    return Message(role="user", blocks=(TextBlock(text=text),), **kwargs)


def assistant(text: str, **kwargs: object) -> Message:
    """Build an assistant message holding one text block."""
    return Message(role="assistant", blocks=(TextBlock(text=text),), **kwargs)


def system(text: str, **kwargs: object) -> Message:
    """Build a system message holding one text block."""
    return Message(role="system", blocks=(TextBlock(text=text),), **kwargs)


def tool_result_text(output: str | tuple[ToolResultPart, ...]) -> str:
    """Flatten a tool result's output to text; media parts become a bracketed label."""
    if isinstance(output, str):
        return output
    parts: list[str] = []
    for part in output:
        if isinstance(part, TextBlock):
            parts.append(part.text)
        else:
            parts.append(media_label(part.type, part.media_type, part.name))
    return "\n".join(parts)
