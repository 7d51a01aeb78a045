"""A summary request that reuses the provider's prompt cache (001).

When a step is about to be sent and proactive compaction fires first, the summary is asked with
that very request — same tools, same system prompt, same history, so the provider reads all of
it from its prompt cache — plus one request-only message with the summary instruction after the
history. Only the tail differs from the step's request, never the prefix. The caller falls back
to the separate, text-rendered summary request (`_summary.py`) when this one is refused, when
its reply holds no summary (no text, or tool calls), or when the history carries media (DESIGN:
historical media bytes never go into a summary request).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import (
    AudioBlock,
    Block,
    DocumentBlock,
    ImageBlock,
    Message,
    ToolResultBlock,
    VideoBlock,
)
from ._prompt import Section, params_section
from ._summary import SOURCE, SUMMARY_INSTRUCTION

_MEDIA = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)

CACHED_NOTE = (
    "Stop the work here: do not call tools. Write the handoff summary of the conversation "
    "above, for the agent that continues it from your summary and the most recent messages. "
    "Answer with the summary only."
)


def carries_media(history: Sequence[Message]) -> bool:
    """Whether any message of `history` holds media (also inside a tool result)."""
    return any(_media_in(block) for message in history for block in message.blocks)


def _media_in(block: Block) -> bool:
    if isinstance(block, _MEDIA):
        return True
    if not isinstance(block, ToolResultBlock) or isinstance(block.output, str):
        return False
    return any(isinstance(part, _MEDIA) for part in block.output)


def cached_summary_sections(
    step_sections: Sequence[Section], *, model: str, max_output_tokens: int, cache_key: str
) -> list[Section]:
    """The step's sections with the summary instruction added as a request-only message and
    the output allowance of a summary: the tools, system prompt and history stay the prefix."""
    instruction = (
        CACHED_NOTE
        + "\n\n"
        + SUMMARY_INSTRUCTION.replace("the conversation below", "the conversation above")
    )
    kept = [s for s in step_sections if s.id != "params"]
    return [
        *kept,
        Section("input.compaction", SOURCE, instruction),
        params_section(model, max_output_tokens, 1, cache_key),
    ]
