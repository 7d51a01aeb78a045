"""Instruction sources: where standing instructions come from, read fresh for every attempt.

A source is a key and a reader. A reader returns the text, `None` when the source is absent
(recorded as "removed"), or raises `OSError` when it is there but cannot be read (a directory,
a FIFO, a dangling symbolic link, no permission, not UTF-8): the first delta is then blocked,
a later one keeps the stored value.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Mapping, Sequence
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
        if not os.path.lexists(path):
            return None  # absent: nothing to follow
        if not path.is_file():  # never open a FIFO (it would block) or a directory
            raise OSError(errno.EINVAL, "not a regular file (or a link to none)", str(path))
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise OSError(errno.EILSEQ, f"not UTF-8 text ({err.reason})", str(path)) from None

    return read


def _const(text: str) -> Reader:
    return lambda: text


REFERENCE = "@"  # a configured entry `key = "@path"` is the workspace file at `path`
SKILLS_DIR = ".wakeful/skills"  # a skill's guidance: SKILLS_DIR/NAME/SKILL.md


def workspace_sources(workspace: Path, configured: Mapping[str, str] | None = None) -> list[Source]:
    """Built-ins, the workspace's `AGENTS.md`, and configured entries (key -> text); an entry
    whose text is `@path` is a reference: the file at `path` in the workspace, read fresh like
    `AGENTS.md` (source `ref:path`)."""
    sources = [
        Source("builtin", _const(BUILTIN)),
        Source("AGENTS.md", _file(workspace / "AGENTS.md")),
    ]
    for key, text in sorted((configured or {}).items()):
        if text.startswith(REFERENCE):
            path = text[len(REFERENCE) :].strip()
            sources.append(Source(f"ref:{path}", _file(workspace / path)))
        else:
            sources.append(Source(f"config:{key}", _const(text)))
    return sources


def agent_sources(workspace: Path, skills: Sequence[str]) -> list[Source]:
    """The guidance of the skills the selected agent follows: `skill:NAME`, the workspace's
    `SKILLS_DIR/NAME/SKILL.md` (absent: recorded as removed, like any source)."""
    return [
        Source(f"skill:{name}", _file(workspace / SKILLS_DIR / name / "SKILL.md"))
        for name in skills
    ]


def host_sources(entries: Callable[[], Mapping[str, object]]) -> list[Source]:
    """The instruction entries a host manages through the API: the session's extension state
    under the `instructions` namespace (`entries`, read fresh), rendered as one source `api`
    (each entry `key: text`, by key; absent when there are none)."""

    def read() -> str | None:
        found = entries()
        if not found:
            return None
        return "\n\n".join(f"{key}: {value}" for key, value in sorted(found.items()))

    return [Source("api", read)]
