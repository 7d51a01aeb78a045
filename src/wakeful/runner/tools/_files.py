"""File tools confined to the workspace root: read, write, edit, list, grep.

Invariant: a path that resolves outside the workspace (absolute elsewhere, `..`, a symlink
that escapes) is a tool error, never a read or write.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from pydantic import BaseModel, Field

from ._base import ToolContext, ToolFailure, ToolOutcome

MAX_READ_BYTES = 256 * 1024
MAX_LIST = 1000
MAX_MATCHES = 200
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__"}


def confine(ctx: ToolContext, path: str) -> Path:
    """Resolve `path` inside the workspace or raise `ToolFailure`."""
    root = ctx.workspace.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise ToolFailure(f"path {path!r} is outside the workspace")
    return target


class ReadFileInput(BaseModel):
    path: str = Field(description="File path relative to the workspace.")


class WriteFileInput(BaseModel):
    path: str
    content: str


class EditFileInput(BaseModel):
    path: str
    old: str = Field(min_length=1, description="Exact text to replace; must occur exactly once.")
    new: str


class ListFilesInput(BaseModel):
    path: str = "."


class GrepInput(BaseModel):
    pattern: str = Field(description="Python regular expression.")
    path: str = "."


class ReadFile:
    name = "read_file"
    description = "Read a text file of the workspace."
    input_model = ReadFileInput
    read_only = True

    async def run(self, args: ReadFileInput, ctx: ToolContext) -> ToolOutcome:  # type: ignore[override]
        target = confine(ctx, args.path)
        if not target.is_file():
            raise ToolFailure(f"no such file: {args.path}")
        data = await asyncio.to_thread(target.read_bytes)
        note = (
            f"\n[truncated at {MAX_READ_BYTES} bytes of {len(data)}]"
            if len(data) > MAX_READ_BYTES
            else ""
        )
        return ToolOutcome(data[:MAX_READ_BYTES].decode("utf-8", errors="replace") + note)


class WriteFile:
    name = "write_file"
    description = "Create or overwrite a file of the workspace."
    input_model = WriteFileInput
    read_only = False

    async def run(self, args: WriteFileInput, ctx: ToolContext) -> ToolOutcome:  # type: ignore[override]
        target = confine(ctx, args.path)
        target.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(target.write_text, args.content, encoding="utf-8")
        return ToolOutcome(f"wrote {len(args.content.encode())} bytes to {args.path}")


class EditFile:
    name = "edit_file"
    description = "Replace one exact occurrence of `old` with `new` in a file."
    input_model = EditFileInput
    read_only = False

    async def run(self, args: EditFileInput, ctx: ToolContext) -> ToolOutcome:  # type: ignore[override]
        target = confine(ctx, args.path)
        if not target.is_file():
            raise ToolFailure(f"no such file: {args.path}")
        text = await asyncio.to_thread(target.read_text, encoding="utf-8")
        count = text.count(args.old)
        if count != 1:
            raise ToolFailure(
                f"`old` occurs {count} times in {args.path}; it must occur exactly once"
            )
        await asyncio.to_thread(
            target.write_text, text.replace(args.old, args.new), encoding="utf-8"
        )
        return ToolOutcome(f"edited {args.path}")


class ListFiles:
    name = "list_files"
    description = "List files under a directory of the workspace (recursive)."
    input_model = ListFilesInput
    read_only = True

    async def run(self, args: ListFilesInput, ctx: ToolContext) -> ToolOutcome:  # type: ignore[override]
        target = confine(ctx, args.path)
        if not target.is_dir():
            raise ToolFailure(f"no such directory: {args.path}")
        names = await asyncio.to_thread(_walk, target, ctx.workspace.resolve())
        more = f"\n[{len(names) - MAX_LIST} more not shown]" if len(names) > MAX_LIST else ""
        return ToolOutcome("\n".join(names[:MAX_LIST]) + more if names else "(empty)")


def _walk(top: Path, root: Path) -> list[str]:
    out: list[str] = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for f in sorted(files):
            out.append(str((Path(folder) / f).relative_to(root)))
    return out


class Grep:
    name = "grep"
    description = "Search files under a path for a regular expression; prints path:line: text."
    input_model = GrepInput
    read_only = True

    async def run(self, args: GrepInput, ctx: ToolContext) -> ToolOutcome:  # type: ignore[override]
        try:
            regex = re.compile(args.pattern)
        except re.error as err:
            raise ToolFailure(f"bad pattern: {err}") from None
        target = confine(ctx, args.path)
        root = ctx.workspace.resolve()
        files = [target] if target.is_file() else [root / p for p in _walk(target, root)]
        hits = await asyncio.to_thread(_search, regex, files, root)
        more = f"\n[stopped at {MAX_MATCHES} matches]" if len(hits) > MAX_MATCHES else ""
        return ToolOutcome("\n".join(hits[:MAX_MATCHES]) + more if hits else "no matches")


def _search(regex: re.Pattern[str], files: list[Path], root: Path) -> list[str]:
    hits: list[str] = []
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:4096]:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                hits.append(f"{path.relative_to(root)}:{number}: {line[:300]}")
                if len(hits) > MAX_MATCHES:
                    return hits
    return hits
