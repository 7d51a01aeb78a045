"""The summary request of a compaction: a structured prompt over a text rendering of history.

The history to summarize is rendered as plain text (one entry per block) inside one request-only
user message, so the request needs no tools, cannot break tool-call pairing, and reads the same
to every provider. Invariant: media bytes never reach it: an image, audio, video or document
block (also inside a tool result) becomes a stable label such as
``[Attached diagram.png (image/png)]``, while the stored block stays untouched. Long blocks are
clipped (head and tail kept); when the whole request is still too long, the oldest entries are
dropped first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import (
    AudioBlock,
    Block,
    CompactSummaryBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ServerToolResultBlock,
    ServerToolUseBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from ._prompt import Section, params_section

SOURCE = "runtime.compaction"
MAX_BLOCK_CHARS = 6_000  # a longer block keeps its head and tail

SUMMARY_SYSTEM = (
    "You write the handoff summary of a long working session between a user and a software "
    "agent. The agent will continue the work from your summary and the most recent messages "
    "alone, so keep every fact it needs and drop chatter. Do not call tools; answer with the "
    "summary only."
)

SUMMARY_INSTRUCTION = """Summarize the conversation below for the agent that continues it.
Use exactly these headings, each followed by short bullet points (write "none" when empty):

## Objective
## Requirements and constraints
## Decisions
## Work state
## Next move
## Relevant files
## Exact paths
## Commands
## Errors and ids

Keep verbatim: file paths, commands, error messages, identifiers (ids, hashes, URLs, names),
numbers and the user's own words for requirements. Fold in the earlier summary when there is one;
its facts still hold unless the conversation changed them."""

MediaBlock = ImageBlock | AudioBlock | VideoBlock | DocumentBlock


def media_label(block: MediaBlock) -> str:
    """The stable label that stands in for media in a summary request."""
    return f"[Attached {block.name or block.type} ({block.media_type})]"


def _clip(text: str, limit: int = MAX_BLOCK_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters left out …]\n{text[-half:]}"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _result_text(block: ToolResultBlock) -> str:
    if isinstance(block.output, str):
        return block.output
    return "\n".join(
        part.text if isinstance(part, TextBlock) else media_label(part) for part in block.output
    )


def render_block(role: str, block: Block, names: dict[str, str]) -> str | None:
    """One block as a line of the rendering; None for blocks a summary has no use for."""
    if isinstance(block, TextBlock):
        origin = f" ({block.origin.kind} from {block.origin.source})" if block.origin else ""
        return f"[{role}{origin}] {_clip(block.text)}"
    if isinstance(block, ImageBlock | AudioBlock | VideoBlock | DocumentBlock):
        return f"[{role}] {media_label(block)}"
    if isinstance(block, ToolCallBlock):
        names[block.id] = block.name
        return f"[{role} calls {block.name} ({block.id})] {_clip(_json(block.input))}"
    if isinstance(block, ToolResultBlock):
        name = names.get(block.call_id, "tool")
        status = "error" if block.is_error else "result"
        return f"[{name} {status} ({block.call_id})] {_clip(_result_text(block))}"
    if isinstance(block, ServerToolUseBlock):
        return f"[{role} uses server tool {block.name}] {_clip(_json(block.input))}"
    if isinstance(block, ServerToolResultBlock):
        return f"[server tool result] {_clip(_json(block.content))}"
    if isinstance(block, CompactSummaryBlock):
        return f"[earlier summary] {block.summary}"
    return None  # reasoning: private to the step that produced it


def render_messages(messages: Sequence[Message]) -> list[str]:
    """One rendered entry per message (empty messages give an empty entry)."""
    names: dict[str, str] = {}
    out: list[str] = []
    for message in messages:
        lines = [render_block(message.role, b, names) for b in message.blocks]
        out.append("\n".join(line for line in lines if line is not None))
    return out


@dataclass(frozen=True, slots=True)
class SummaryPrompt:
    """The sections of one summary request and how many rendered entries it left out."""

    sections: list[Section]
    dropped: int


def summary_sections(
    previous: str | None,
    entries: Sequence[str],
    work_state: str,
    *,
    drop: int,
    model: str,
    max_output_tokens: int,
    attempt: int,
) -> SummaryPrompt:
    """The sections of a summary request over `entries[drop:]` (the oldest `drop` left out)."""
    parts = [SUMMARY_INSTRUCTION]
    if previous:
        parts.append(f"<earlier-summary>\n{previous}\n</earlier-summary>")
    if work_state:
        parts.append(f"<work-state>\n{work_state}\n</work-state>")
    if drop:
        parts.append(f"({drop} older messages were left out to fit the request.)")
    kept = [e for e in entries[drop:] if e]
    parts.append("<conversation>\n" + "\n\n".join(kept) + "\n</conversation>")
    sections = [
        Section("system.compaction", SOURCE, SUMMARY_SYSTEM),
        Section("input.compaction", SOURCE, "\n\n".join(parts)),
        params_section(model, max_output_tokens, attempt),
    ]
    return SummaryPrompt(sections, drop)
