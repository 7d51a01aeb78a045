"""The table of formats: each one's name, reader, writer and what it keeps and loses (the words
the command prints and `docs/interchange.md` tabulates)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UsageError
from . import _agents_sqlite, _claude_code, _codex, _opencode
from ._model import ExportedSession, ImportedSession, Written


@dataclass(frozen=True)
class Format:
    """One foreign format: `read(bytes, file name)` gives its sessions, `write` one session."""

    name: str
    read: Callable[[bytes, str], list[ImportedSession]]
    write: Callable[[ExportedSession], Written]
    kept: str
    lost: str
    # A format held in a database file reads it by its path (its journal beside it included).
    read_path: Callable[[str], list[ImportedSession]] | None = None
    binary: bool = False  # what `write` gives is no text: only ever to a file


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            _claude_code.FORMAT,
            _claude_code.read,
            _claude_code.write,
            _claude_code.KEPT,
            _claude_code.LOST,
        ),
        Format(_codex.FORMAT, _codex.read, _codex.write, _codex.KEPT, _codex.LOST),
        Format(
            _agents_sqlite.FORMAT,
            _agents_sqlite.read,
            _agents_sqlite.write,
            _agents_sqlite.KEPT,
            _agents_sqlite.LOST,
            _agents_sqlite.read_path,
        ),
        Format(_opencode.FORMAT, _opencode.read, _opencode.write, _opencode.KEPT, _opencode.LOST),
    )
}


def format_named(name: str) -> Format:
    """The format called `name`; `UsageError` listing the known ones otherwise."""
    if name not in FORMATS:
        raise UsageError(f"unknown format {name!r} (known: {', '.join(FORMATS)})")
    return FORMATS[name]
