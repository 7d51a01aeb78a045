"""Instruction sources: where standing instructions come from, read fresh for every attempt.

A source is a key and a reader. A reader returns the text, `None` when the source is absent
(recorded as "removed"), or raises `OSError` when it cannot be read (the stored value is kept).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

BUILTIN = (
    "You are wakeful's agent. Work in the workspace with the tools you are given. Prefer small, "
    "verifiable steps; read before you write; report what you did and what you could not do."
)

Reader = Callable[[], str | None]


@dataclass(frozen=True, slots=True)
class Source:
    """One instruction source: a stable key and a reader."""

    key: str
    read: Reader


def _file(path: Path) -> Reader:
    def read() -> str | None:
        if not path.exists():
            return None
        return path.read_text(encoding="utf-8")

    return read


def _const(text: str) -> Reader:
    return lambda: text


def workspace_sources(workspace: Path, configured: Mapping[str, str] | None = None) -> list[Source]:
    """Built-ins, the workspace's `AGENTS.md`, and configured entries (key -> text)."""
    sources = [
        Source("builtin", _const(BUILTIN)),
        Source("AGENTS.md", _file(workspace / "AGENTS.md")),
    ]
    for key, text in sorted((configured or {}).items()):
        sources.append(Source(f"config:{key}", _const(text)))
    return sources
