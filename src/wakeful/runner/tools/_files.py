"""File tools confined to the workspace root: read, write, edit, list, grep.

Invariant: a path that resolves outside the workspace (absolute elsewhere, `..`, a symlink
that escapes) is a tool error, never a read or write; so is a file that is not a regular file
or has another name (a hard link), which `_open` refuses on the open descriptor. The blocking
file work of every tool runs in a worker thread, so a large read or search never stalls the
event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pydantic import Field, JsonValue

from ...store import FILE_CHANGE_KEY, blob_digest
from ._base import ToolContext, ToolFailure, ToolInput, ToolOutcome
from ._open import open_for_reading, refusal, write_whole

MAX_READ_BYTES = 64 * 1024
MAX_READ_LINES = 2000
MAX_LIST = 1000
MAX_MATCHES = 200
MAX_MATCH_CHARS = 300
MAX_GREP_FILE_BYTES = 8 * 1024 * 1024
BINARY_SNIFF = 8192
SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "node_modules", "__pycache__"})


def confine(ctx: ToolContext, path: str) -> Path:
    """Resolve `path` (relative to the workspace, or absolute) inside the workspace.

    Symlinks are resolved first, so a link pointing out of the workspace is refused too.
    Raises `ToolFailure` for a path outside the workspace or one that cannot be resolved.
    """
    root = ctx.workspace.resolve()
    try:
        target = (root / path).resolve()
    except (OSError, ValueError, RuntimeError) as err:  # NUL bytes, symlink loops
        raise ToolFailure(f"bad path {path!r}: {err}") from None
    if not target.is_relative_to(root):
        raise ToolFailure(f"path {path!r} is outside the workspace {root}; use a path inside it")
    return target


@contextlib.contextmanager
def _os_errors(action: str, path: str) -> Iterator[None]:
    """Turn an `OSError` into a `ToolFailure` the model can act on."""
    try:
        yield
    except OSError as err:
        raise ToolFailure(f"cannot {action} {path}: {err.strerror or err}") from None


def _is_binary(head: bytes) -> bool:
    return b"\0" in head[:BINARY_SNIFF]


class ReadFileInput(ToolInput):
    path: str = Field(description="File path, relative to the workspace root.")
    offset: int | None = Field(None, ge=1, description="First line to read (1-based).")
    limit: int | None = Field(
        None, ge=1, description=f"Most lines to read (default {MAX_READ_LINES})."
    )


class ReadFile:
    name = "read_file"
    description = (
        f"Read a text file of the workspace. Returns at most {MAX_READ_LINES} lines or "
        f"{MAX_READ_BYTES // 1024} KiB; use offset and limit to read a long file in parts."
    )
    input_model = ReadFileInput
    read_only = True

    async def run(self, args: ReadFileInput, ctx: ToolContext) -> ToolOutcome:
        return await asyncio.to_thread(_read, confine(ctx, args.path), args)


def _read(target: Path, args: ReadFileInput) -> ToolOutcome:
    first = args.offset or 1
    with _os_errors("read", args.path), open_for_reading(target, args.path) as f:
        if _is_binary(f.read(BINARY_SNIFF)):
            size = os.fstat(f.fileno()).st_size
            return ToolOutcome(
                f"{args.path} is a binary file ({size} bytes); not shown", is_error=True
            )
        f.seek(0)
        lines, seen, more = _take_lines(f, first, args.limit or MAX_READ_LINES)
    if first > 1 and not lines:
        raise ToolFailure(f"offset {first} is past the end of {args.path} ({seen} lines)")
    text = b"".join(line[:MAX_READ_BYTES] for line in lines).decode("utf-8", errors="replace")
    if not text and not more:
        return ToolOutcome(f"({args.path} is empty)")
    last = first + len(lines) - 1
    notes = []
    if any(len(line) > MAX_READ_BYTES for line in lines):
        notes.append(f"[line {last} is longer than {MAX_READ_BYTES // 1024} KiB and was cut]")
    if more:
        notes.append(
            f"[showing lines {first}-{last}; the file continues: read on with offset={last + 1}]"
        )
    if notes:
        text += ("" if text.endswith("\n") else "\n") + "\n".join(notes)
    return ToolOutcome(text)


def _take_lines(f: BinaryIO, first: int, limit: int) -> tuple[list[bytes], int, bool]:
    """Lines `first`.. within the line and byte caps, the last line number seen, and whether
    more lines follow. A single line longer than the byte cap is taken alone (the caller cuts
    it)."""
    lines: list[bytes] = []
    size = 0
    number = 0
    for number, line in enumerate(f, 1):
        if number < first:
            continue
        if len(lines) == limit or (lines and size + len(line) > MAX_READ_BYTES):
            return lines, number, True
        lines.append(line)
        size += len(line)
    return lines, number, False


class WriteFileInput(ToolInput):
    path: str = Field(description="File path, relative to the workspace root.")
    content: str = Field(description="The complete new content of the file.")


class WriteFile:
    name = "write_file"
    description = "Create or overwrite a file of the workspace (missing directories are created)."
    input_model = WriteFileInput
    read_only = False

    async def run(self, args: WriteFileInput, ctx: ToolContext) -> ToolOutcome:
        return await asyncio.to_thread(_write, confine(ctx, args.path), ctx, args)


def _write(target: Path, ctx: ToolContext, args: WriteFileInput) -> ToolOutcome:
    if target.is_dir():
        raise ToolFailure(f"cannot write {args.path}: it is a directory")
    data = args.content.encode("utf-8")
    with _os_errors("write", args.path):
        target.parent.mkdir(parents=True, exist_ok=True)
        previous = _previous(target, args.path)
        existed = write_whole(target, args.path, data)
    verb = "overwrote" if existed else "created"
    return _changed(
        f"{verb} {args.path} ({len(data)} bytes)", ctx, target, previous, data, bytes=len(data)
    )


def _previous(target: Path, path: str) -> bytes | None:
    """The content a write is about to replace (None: there is no file yet)."""
    if not os.path.lexists(target):
        return None
    with open_for_reading(target, path) as f:
        return f.read()


def _changed(
    text: str, ctx: ToolContext, target: Path, before: bytes | None, after: bytes, **meta: int
) -> ToolOutcome:
    """The outcome of a file change: the contents replaced and written go with the result as
    blobs, its metadata names them (`FILE_CHANGE_KEY`, read by a rewind) and records the file
    as an artifact of the session."""
    rel = str(target.relative_to(ctx.workspace.resolve()))
    change: dict[str, JsonValue] = {
        "path": rel,
        "before": None if before is None else blob_digest(before),
        "after": blob_digest(after),
    }
    artifact: dict[str, JsonValue] = {"kind": "file", "uri": target.as_uri(), "label": rel}
    blobs = (after,) if before is None else (before, after)
    return ToolOutcome(
        text, metadata={**meta, FILE_CHANGE_KEY: change, "artifacts": [artifact]}, blobs=blobs
    )


class EditFileInput(ToolInput):
    path: str = Field(description="File path, relative to the workspace root.")
    old: str = Field(min_length=1, description="Exact text to replace; must occur exactly once.")
    new: str = Field(description="The replacement text.")


class EditFile:
    name = "edit_file"
    description = (
        "Replace the one exact occurrence of `old` with `new` in a file. `old` must occur exactly "
        "once: include enough surrounding text to make it unique."
    )
    input_model = EditFileInput
    read_only = False

    async def run(self, args: EditFileInput, ctx: ToolContext) -> ToolOutcome:
        return await asyncio.to_thread(_edit, confine(ctx, args.path), ctx, args)


def _edit(target: Path, ctx: ToolContext, args: EditFileInput) -> ToolOutcome:
    with _os_errors("read", args.path), open_for_reading(target, args.path) as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolFailure(f"cannot edit {args.path}: it is not UTF-8 text") from None
    count = text.count(args.old)
    if count != 1:
        hint = "" if count == 0 else "; include more surrounding text to make it unique"
        raise ToolFailure(
            f"`old` occurs {count} times in {args.path}; it must occur exactly once{hint}"
        )
    line = text[: text.index(args.old)].count("\n") + 1
    new = text.replace(args.old, args.new).encode("utf-8")
    with _os_errors("write", args.path):
        write_whole(target, args.path, new)
    return _changed(f"edited {args.path} at line {line}", ctx, target, raw, new, line=line)


class ListFilesInput(ToolInput):
    path: str = Field(".", description="Directory, relative to the workspace root.")


class ListFiles:
    name = "list_files"
    description = (
        f"List the files under a directory of the workspace, recursively (at most {MAX_LIST}; "
        f"{', '.join(sorted(SKIP_DIRS))} are skipped)."
    )
    input_model = ListFilesInput
    read_only = True

    async def run(self, args: ListFilesInput, ctx: ToolContext) -> ToolOutcome:
        return await asyncio.to_thread(_list, confine(ctx, args.path), ctx, args)


def _list(target: Path, ctx: ToolContext, args: ListFilesInput) -> ToolOutcome:
    if not target.is_dir():
        raise ToolFailure(f"no such directory: {args.path}")
    root = ctx.workspace.resolve()
    names: list[str] = []
    more = False
    for path in _walk(target):
        if len(names) == MAX_LIST:
            more = True
            break
        names.append(str(path.relative_to(root)))
    if not names:
        return ToolOutcome(f"(no files under {args.path})")
    note = f"\n[stopped at {MAX_LIST} files: list a subdirectory to see more]" if more else ""
    return ToolOutcome("\n".join(sorted(names)) + note)


def _walk(top: Path) -> Iterator[Path]:
    """Files under `top` in a stable order, skipping VCS and environment directories.

    Symlinked directories are not followed, so a walk cannot leave the workspace.
    """
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            yield Path(folder) / name


class GrepInput(ToolInput):
    pattern: str = Field(description="Python regular expression, searched in each line.")
    path: str = Field(".", description="File or directory to search, relative to the workspace.")


class Grep:
    name = "grep"
    description = (
        "Search the text files under a path for a regular expression; prints `path:line: text` "
        f"(at most {MAX_MATCHES} matches; binary files and {', '.join(sorted(SKIP_DIRS))} are "
        "skipped)."
    )
    input_model = GrepInput
    read_only = True

    async def run(self, args: GrepInput, ctx: ToolContext) -> ToolOutcome:
        try:
            regex = re.compile(args.pattern)
        except re.error as err:
            raise ToolFailure(f"bad pattern {args.pattern!r}: {err}") from None
        return await asyncio.to_thread(_grep, regex, confine(ctx, args.path), ctx, args)


def _grep(regex: re.Pattern[str], target: Path, ctx: ToolContext, args: GrepInput) -> ToolOutcome:
    if not target.exists():
        raise ToolFailure(f"no such file or directory: {args.path}")
    root = ctx.workspace.resolve()
    if not target.is_dir() and (reason := refusal(target.stat(), args.path)) is not None:
        raise ToolFailure(reason)
    files = [target] if not target.is_dir() else _walk(target)
    hits: list[str] = []
    for path in files:
        for hit in _search(regex, path, root):
            if len(hits) == MAX_MATCHES:
                hits.append(f"[stopped at {MAX_MATCHES} matches: narrow the pattern or the path]")
                return ToolOutcome("\n".join(hits))
            hits.append(hit)
    return ToolOutcome("\n".join(hits) if hits else "no matches")


def _search(regex: re.Pattern[str], path: Path, root: Path) -> Iterator[str]:
    """Matching lines of one file; nothing for binary, huge, special (a FIFO would block the
    read forever), hard-linked or out-of-workspace files."""
    try:
        if not path.resolve().is_relative_to(root):
            return
        with open_for_reading(path, str(path)) as f:
            if os.fstat(f.fileno()).st_size > MAX_GREP_FILE_BYTES:
                return
            data = f.read()
    except (OSError, RuntimeError, ToolFailure):
        return
    if _is_binary(data):
        return
    name = path.relative_to(root)
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            yield f"{name}:{number}: {line[:MAX_MATCH_CHARS]}"
