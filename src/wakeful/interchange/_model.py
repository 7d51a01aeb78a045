"""What every format reader and writer shares: a session read from another tool's file, a
session given to a writer, the file read line by line with each fault at its position, and the
ids derived from the source so that a second import finds what the first wrote.

Invariant: a reader never returns part of a file. Any line it cannot take whole raises a
`UsageError` that names the file and the line, and nothing has been written by then.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import JsonValue

from ..errors import UsageError
from ..messages import Message


@dataclass(frozen=True)
class ImportedSession:
    """One session read from another tool's file, ready to be written as a wakeful session.

    `session_id` is derived from the format and the source's own id, so importing the same
    source again finds this session; `dropped` counts what the file held that no message
    carries (by kind), for the command to say.
    """

    format: str
    source_id: str
    session_id: str
    messages: tuple[Message, ...]
    title: str | None = None
    model: str | None = None
    workspace: str | None = None
    metadata: dict[str, JsonValue] = field(default_factory=dict)
    dropped: Counter[str] = field(default_factory=Counter)
    # Where each message came from (`FILE line 5`), in order, for errors found after reading.
    where: tuple[str, ...] = ()

    def position(self, k: int) -> str:
        """Where message `k` came from in its file."""
        return self.where[k] if k < len(self.where) else f"{self.source_id} message {k + 1}"


@dataclass(frozen=True)
class ExportedSession:
    """A stored session as a writer sees it: its row's fields, its metadata, and its messages
    each with the time it was added (epoch ms)."""

    id: str
    title: str | None
    model: str | None
    location: str | None
    created_ms: int
    metadata: dict[str, JsonValue]
    messages: tuple[tuple[Message, int], ...]


@dataclass(frozen=True)
class Written:
    """What a writer produced: the file's bytes and what it could not carry (by kind)."""

    data: bytes
    dropped: Counter[str] = field(default_factory=Counter)


def derived_id(prefix: str, *parts: str, length: int = 32) -> str:
    """`prefix` + the first `length` hex digits of the SHA-256 of `parts`: the same source
    always gives the same id."""
    digest = hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return prefix + digest[:length]


def session_id_for(fmt: str, source_id: str) -> str:
    """The wakeful session id a source session becomes (`ses_` + 24 hex digits)."""
    return derived_id("ses_", fmt, source_id, length=24)


def decode(raw: bytes, name: str) -> str:
    """`raw` as UTF-8 text; a one-line `UsageError` naming the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{name}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start})"
        ) from None


def parse_json(text: str, where: str) -> Any:
    """One JSON document; a `UsageError` at `where` (with the column) when it is not one."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"{where} column {err.colno}: not JSON: {err.msg}") from None
    except RecursionError:
        raise UsageError(f"{where}: nested too deeply") from None


def json_lines(raw: bytes, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a JSONL file as `(line number, object)`; a `UsageError` naming
    the line for one that is not a JSON object."""
    for number, line in enumerate(decode(raw, name).splitlines(), 1):
        if not line.strip():
            continue
        value = parse_json(line, f"{name} line {number}")
        if not isinstance(value, dict):
            raise UsageError(f"{name} line {number}: not a JSON object")
        yield number, value


def to_jsonl(records: list[dict[str, Any]]) -> bytes:
    """Records as JSONL bytes, one compact object per line."""
    lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records]
    return ("\n".join(lines) + "\n").encode() if lines else b""


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as an ISO 8601 UTC time with milliseconds and a `Z`."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def ms_of(value: object) -> int | None:
    """An ISO 8601 time as epoch milliseconds, or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(stamp.timestamp() * 1000) if stamp.tzinfo else None


def source_id_of(session: ExportedSession, fmt: str) -> str | None:
    """The source's own session id when `session` was imported from `fmt`, else None."""
    source = session.metadata.get("imported_from")
    if isinstance(source, dict) and source.get("format") == fmt:
        value = source.get("source_id")
        return value if isinstance(value, str) else None
    return None
