"""What each wire format carries exactly: the subset of a conversation a round trip must keep.

`carried_X(messages)` keeps only the blocks format X represents without loss, normalised the way
the format holds them (fields it has no place for reset, tool results first in a user message,
chat's fixed assistant order). Converting that subset out and back must give it back unchanged.
Written from the formats' own rules, not from the converters' code.
"""

from __future__ import annotations

from wakeful.messages import (
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
)

ANTHROPIC_IMAGES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
CHAT_AUDIO = {"audio/wav", "audio/mpeg"}


def flat(messages: list[Message]) -> list[tuple[str, Block]]:
    """(role, block) pairs in order: what a format keeps when it does not keep message bounds."""
    return [(m.role, b) for m in messages for b in m.blocks]


def shape(messages: list[Message]) -> list[tuple[str, tuple[Block, ...]]]:
    """(role, blocks) per message, ignoring ids and everything else a format does not carry."""
    return [(m.role, m.blocks) for m in messages]


def _plain_text(b: Block) -> Block | None:
    return b if isinstance(b, TextBlock) and b.origin is None and b.text else None


def _results_first(blocks: list[Block]) -> list[Block]:
    results = [b for b in blocks if isinstance(b, ToolResultBlock)]
    return results + [b for b in blocks if not isinstance(b, ToolResultBlock)]


def _rebuild(role: str, blocks: list[Block]) -> list[Message]:
    return [Message(role=role, blocks=tuple(blocks))] if blocks else []  # type: ignore[arg-type]


# --- Anthropic -------------------------------------------------------------------------------


def _anthropic_media(b: Block) -> Block | None:
    if isinstance(b, ImageBlock) and b.media_type in ANTHROPIC_IMAGES and b.data is not None:
        return ImageBlock(media_type=b.media_type, data=b.data)
    pdf_or_text = (
        b.media_type in ("application/pdf", "text/plain") if isinstance(b, DocumentBlock) else False
    )
    if isinstance(b, DocumentBlock) and b.data is not None and pdf_or_text:
        return DocumentBlock(media_type=b.media_type, data=b.data, name=b.name)
    return None


def _anthropic_result(b: ToolResultBlock) -> Block:
    if isinstance(b.output, str):
        return b.model_copy(update={"metadata": None})
    parts = [p for part in b.output if (p := _plain_text(part) or _anthropic_media(part))]
    return b.model_copy(update={"metadata": None, "output": tuple(parts)})


def _anthropic_block(role: str, b: Block) -> Block | None:
    if isinstance(b, ToolResultBlock):
        return _anthropic_result(b)
    if isinstance(b, ThinkingBlock):
        return b if b.signature is not None else None
    if isinstance(
        b, ToolCallBlock | RedactedThinkingBlock | ServerToolUseBlock | ServerToolResultBlock
    ):
        return b
    if role == "user":
        return _plain_text(b) or _anthropic_media(b)
    return _plain_text(b)


def carried_anthropic(messages: list[Message]) -> list[Message]:
    """The non-system part of a conversation that Anthropic's Messages format carries exactly."""
    out: list[Message] = []
    for m in messages:
        if m.role == "system":
            continue
        blocks = [k for b in m.blocks if (k := _anthropic_block(m.role, b)) is not None]
        out += _rebuild(m.role, _results_first(blocks))
    return out


# --- OpenAI chat and Responses ---------------------------------------------------------------------


def _default_name(b: DocumentBlock) -> str:
    return b.name or ("document.pdf" if b.media_type == "application/pdf" else "document")


def _openai_media(b: Block, chat: bool) -> Block | None:
    if isinstance(b, ImageBlock) and b.data is not None:
        return ImageBlock(media_type=b.media_type, data=b.data)
    if chat and isinstance(b, AudioBlock) and b.media_type in CHAT_AUDIO and b.data is not None:
        return AudioBlock(media_type=b.media_type, data=b.data)
    if isinstance(b, DocumentBlock) and b.data is not None:
        return DocumentBlock(media_type=b.media_type, data=b.data, name=_default_name(b))
    return None


def _openai_user(b: Block, chat: bool) -> Block | None:
    if isinstance(b, ToolResultBlock):
        plain = isinstance(b.output, str) and not b.is_error
        return b.model_copy(update={"metadata": None}) if plain else None
    return _plain_text(b) or _openai_media(b, chat)


def _chat_assistant(blocks: tuple[Block, ...], provider: str) -> list[Block]:
    reasoning = [
        b for b in blocks if isinstance(b, ProviderReasoningBlock) and b.provider == provider
    ][:1]
    texts = [b for b in blocks if _plain_text(b)]
    calls = [b for b in blocks if isinstance(b, ToolCallBlock)]
    return [*reasoning, *texts, *calls]


def carried_chat(messages: list[Message], provider: str) -> list[Message]:
    """What Chat Completions carries exactly, for a server named `provider`."""
    out: list[Message] = []
    for m in messages:
        if m.role == "assistant":
            blocks = _chat_assistant(m.blocks, provider)
        elif m.role == "user":
            blocks = _results_first([k for b in m.blocks if (k := _openai_user(b, True))])
        else:
            blocks = [k for b in m.blocks if (k := _plain_text(b))]
        out += _rebuild(m.role, blocks)
    return out


def _responses_assistant(b: Block) -> Block | None:
    if isinstance(b, ToolCallBlock):
        return b
    if isinstance(b, ProviderReasoningBlock) and b.provider == "openai-responses":
        return b
    return _plain_text(b)


def carried_responses(messages: list[Message]) -> list[Message]:
    """What the Responses API input carries exactly."""
    out: list[Message] = []
    for m in messages:
        if m.role == "assistant":
            blocks = [k for b in m.blocks if (k := _responses_assistant(b))]
        elif m.role == "user":
            blocks = _results_first([k for b in m.blocks if (k := _openai_user(b, False))])
        else:
            blocks = [k for b in m.blocks if (k := _plain_text(b))]
        out += _rebuild(m.role, blocks)
    return out
