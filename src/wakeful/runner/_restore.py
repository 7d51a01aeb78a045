"""Recently read files restored after a summary (001: "adds back recently read files").

A summary says which files mattered but not what is in them, so the model would read them
again. When a compaction writes a summary, the files that `read_file` read in the replaced
history (newest first, then the ones the previous summary restored, so they roll up) are read
again, as they are *now*, through the `read_file` tool itself (the same workspace confinement
and caps), and attached to the summary message as text blocks after the summary.

Bounds: at most `[compaction] restore_files` files (0: off), each clipped to
`MAX_FILE_CHARS`, all of them together within `MAX_TOTAL_CHARS` and within a fifth of the
proactive trigger (so a restore can never make the next step compact again). A file read again
in the retained tail is already in context and is skipped; a file that can no longer be read
(deleted, binary, outside the workspace) is skipped silently. The restored text is part of the
stored summary message, so receipts rebuild it exactly and a later edit of the file never
changes a recorded request.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message, TextBlock, TextOrigin, ToolCallBlock
from .tools import ToolContext, ToolFailure
from .tools._files import ReadFile, ReadFileInput

MAX_FILE_CHARS = 12_000
MAX_TOTAL_CHARS = 40_000
RESTORE_ORIGIN = TextOrigin(kind="event", source="compaction")
READ_TOOL = ReadFile.name


def read_paths(messages: Sequence[Message]) -> list[str]:
    """The paths `read_file` was called with in `messages`, newest first, each once."""
    seen: list[str] = []
    for message in reversed(messages):
        if message.role != "assistant":
            continue
        for block in reversed(message.blocks):
            if isinstance(block, ToolCallBlock) and block.name == READ_TOOL:
                path = block.input.get("path")
                if isinstance(path, str) and path and path not in seen:
                    seen.append(path)
    return seen


def restored_paths(message: Message | None) -> list[str]:
    """The paths a summary message restored (its metadata ``compaction.restored_files``)."""
    meta = (message.metadata or {}).get("compaction") if message is not None else None
    paths = meta.get("restored_files") if isinstance(meta, dict) else None
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


def restore_candidates(
    replaced: Sequence[Message], kept: Sequence[Message], previous: Message | None
) -> list[str]:
    """Which files to restore, in order: read in the replaced history (newest first), then
    restored by the previous summary; none that the retained tail read again."""
    in_tail = set(read_paths(kept))
    out: list[str] = []
    for path in [*read_paths(replaced), *restored_paths(previous)]:
        if path not in in_tail and path not in out:
            out.append(path)
    return out


def restore_text(path: str, content: str) -> str:
    """The text block body that restores `path` (one format, read by the tests and docs)."""
    return f"Current content of {path} (read before the compaction, restored after it):\n{content}"


async def restore_files(
    paths: Sequence[str], ctx: ToolContext, *, limit: int, budget_chars: int
) -> tuple[list[TextBlock], list[str]]:
    """Read up to `limit` of `paths` now and return their text blocks and the paths restored,
    within `budget_chars` (and `MAX_TOTAL_CHARS`) in all, each file within `MAX_FILE_CHARS`."""
    left = min(budget_chars, MAX_TOTAL_CHARS)
    blocks: list[TextBlock] = []
    done: list[str] = []
    tool = ReadFile()
    for path in paths:
        if len(done) >= limit or left <= 0:
            break
        try:
            outcome = await tool.run(ReadFileInput(path=path), ctx)
        except (ToolFailure, ValueError):
            continue  # gone, outside the workspace, or a path the tool refuses
        if outcome.is_error or not isinstance(outcome.output, str):
            continue
        content = outcome.output
        cap = min(MAX_FILE_CHARS, left)
        if len(content) > cap:
            content = content[:cap] + f"\n[cut at {cap} characters; read the file for the rest]"
        text = restore_text(path, content)
        blocks.append(TextBlock(text=text, origin=RESTORE_ORIGIN))
        done.append(path)
        left -= len(text)
    return blocks, done
