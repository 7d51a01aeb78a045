"""Pure view helpers of the inspector: messages into display parts, times, digests.

No I/O and no HTML here: templates (autoescaped) render what these return.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from ..messages import (
    CompactSummaryBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    tool_result_text,
)


@dataclass(frozen=True, slots=True)
class Part:
    """One displayable piece of a message.

    `kind` is text, tool_call, tool_result, image, thinking, summary or other. Folded parts
    (everything but text and images) render inside a <details> whose summary is `title`.
    """

    kind: str
    title: str
    body: str = ""
    src: str | None = None  # image source: a data: URL or the media route
    error: bool = False


def iso(ms: int | None) -> str:
    """Epoch milliseconds as a short UTC time."""
    if ms is None:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def short(digest: str, n: int = 12) -> str:
    """The first `n` characters of a digest."""
    return digest[:n]


def _pretty(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _image(block: ImageBlock, session_id: str) -> Part:
    if block.data is not None:
        return Part("image", block.name or block.media_type,
                    src=f"data:{block.media_type};base64,{block.data}")  # fmt: skip
    return Part("image", block.name or block.media_type, src=f"/sessions/{session_id}/media/{block.ref}")  # fmt: skip


def parts(message: Message, session_id: str) -> list[Part]:
    """The display parts of a message, in block order."""
    out: list[Part] = []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            out.append(Part("text", "", block.text))
        elif isinstance(block, ToolCallBlock):
            out.append(Part("tool_call", f"→ {block.name}", _pretty(block.input)))
        elif isinstance(block, ToolResultBlock):
            label = "✗ tool result (error)" if block.is_error else "← tool result"
            out.append(
                Part("tool_result", label, tool_result_text(block.output), error=block.is_error)
            )
        elif isinstance(block, ImageBlock) and block.media_type.startswith("image/"):
            out.append(_image(block, session_id))
        elif isinstance(block, ThinkingBlock):
            out.append(Part("thinking", "thinking", block.text))
        elif isinstance(block, CompactSummaryBlock):
            out.append(Part("summary", f"compaction summary (through seq {block.through_seq})",
                            block.summary))  # fmt: skip
        else:
            data = block.model_dump(mode="json", exclude_none=True)
            data.pop("data", None)  # bulk bytes are not worth showing as text
            out.append(Part("other", block.type, _pretty(data)))
    return out
