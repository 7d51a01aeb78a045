"""Claude Code transcripts (`~/.claude/projects/<project>/<session>.jsonl`) <-> wakeful sessions.

A `user` or `assistant` line is one message: its `message` (an Anthropic Messages API message)
through the Anthropic converter, and the rest of the line (uuid, parentUuid, timestamp, cwd,
gitBranch, version, requestId, usage, toolUseResult, ...) kept under `claude_code.entry` of the
message's metadata; when the converter cannot give the content back exactly, the content rides
along too. Export writes a kept line back as it was, and builds a line for a message wakeful
wrote itself. Other lines (`summary`, `system`, `file-history-snapshot`, ...) are no message:
they are counted and said, and the first summary becomes the title. Mapping table:
`docs/interchange.md`.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import PurePath
from typing import Any

from pydantic import JsonValue

from ..errors import InvalidMessageError, UsageError
from ..messages import Message, from_anthropic, to_anthropic
from ._model import (
    ExportedSession,
    ImportedSession,
    Written,
    derived_id,
    iso_ms,
    json_lines,
    session_id_for,
    source_id_of,
    to_jsonl,
)

FORMAT = "claude-code"
KEY = "claude_code"
KEPT = (
    "each line's fields besides the message (uuid, parentUuid, timestamp, cwd, gitBranch, "
    "version, requestId, toolUseResult, usage, ...) under the message's claude_code metadata"
)
LOST = "lines that are no message (summary, system, file-history-snapshot, ...)"
_MESSAGE_LINES = ("user", "assistant")


def _content(message: Message) -> list[Any] | None:
    """The Anthropic content the converter gives for `message` (None: it gives no message)."""
    try:
        payload = to_anthropic([message])
    except InvalidMessageError:
        return None
    return payload.messages[0]["content"] if len(payload.messages) == 1 else None


def _message(entry: dict[str, Any], where: str, message_id: str) -> Message:
    """The message of one `user`/`assistant` line, with what the converter does not carry kept."""
    wire = entry.get("message")
    if not isinstance(wire, dict):
        raise UsageError(f"{where}: a {entry['type']} line without a `message` object")
    try:
        converted = from_anthropic(wire)
    except UsageError as err:
        raise UsageError(f"{where}: message.{err}") from None
    content = wire.get("content")
    back = _content(converted)
    kept: dict[str, JsonValue] = {
        "entry": {k: v for k, v in entry.items() if k != "message"}
        | {"message": {k: v for k, v in wire.items() if k != "content"}}
    }
    if isinstance(content, str) and back == [{"type": "text", "text": content}]:
        kept["string"] = True
    elif back != content:
        kept["content"] = content
    return Message(
        id=message_id, role=converted.role, blocks=converted.blocks, metadata={KEY: kept}
    )


def read(raw: bytes, name: str) -> list[ImportedSession]:
    """The session of one transcript file; `UsageError` naming the line of the first fault."""
    messages: list[Message] = []
    wheres: list[str] = []
    dropped: Counter[str] = Counter()
    source_id = title = model = workspace = None
    seen: dict[str, int] = {}
    for number, entry in json_lines(raw, name):
        where = f"{name} line {number}"
        kind = entry.get("type")
        source_id = source_id or _str(entry.get("sessionId"))
        if kind not in _MESSAGE_LINES:
            dropped[f"{kind} line"] += 1
            if kind == "summary" and title is None:
                title = _str(entry.get("summary"))
            continue
        line_id = _str(entry.get("uuid")) or f"line-{number}"
        if line_id in seen:
            raise UsageError(f"{where}: uuid {line_id} again (first at line {seen[line_id]})")
        seen[line_id] = number
        workspace = workspace or _str(entry.get("cwd"))
        wire = entry.get("message")
        if kind == "assistant" and isinstance(wire, dict):
            model = model or _str(wire.get("model"))  # the API's name: anthropic:NAME here
        messages.append(_message(entry, where, line_id))
        wheres.append(where)
    source_id = source_id or PurePath(name).stem
    sid = session_id_for(FORMAT, source_id)
    final = tuple(m.model_copy(update={"id": derived_id("msg_", sid, m.id)}) for m in messages)
    return [
        ImportedSession(
            format=FORMAT,
            source_id=source_id,
            session_id=sid,
            messages=final,
            title=title,
            model=model and f"anthropic:{model}",
            workspace=workspace,
            dropped=dropped,
            where=tuple(wheres),
        )
    ]


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _uuid(*parts: str) -> str:
    return str(uuid.UUID(hex=derived_id("", *parts)))


def write(session: ExportedSession) -> Written:
    """The session as a Claude Code transcript: kept lines as they were, others built."""
    records: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    session_uuid = source_id_of(session, FORMAT) or _uuid(session.id)
    parent: str | None = None
    for message, at_ms in session.messages:
        kept = (message.metadata or {}).get(KEY)
        record = _kept(message, kept) if isinstance(kept, dict) else None
        if record is None:
            record = _built(message, session, str(session_uuid), parent, at_ms)
        if record is None:
            dropped[f"{message.role} message"] += 1
            continue
        parent = record.get("uuid") if isinstance(record.get("uuid"), str) else parent
        records.append(record)
    return Written(to_jsonl(records), dropped)


def _kept(message: Message, kept: dict[str, Any]) -> dict[str, Any] | None:
    """The line an imported message came from, its content from the kept copy or the blocks."""
    entry = kept.get("entry")
    if not isinstance(entry, dict) or not isinstance(entry.get("message"), dict):
        return None
    content: Any = kept["content"] if "content" in kept else _content(message)
    if kept.get("string") and content and len(content) == 1:
        content = content[0]["text"]
    return {**entry, "message": {**entry["message"], "content": content}}


def _built(
    message: Message, session: ExportedSession, session_uuid: str, parent: str | None, at_ms: int
) -> dict[str, Any] | None:
    """A line for a message wakeful wrote (a system message has no place in a transcript)."""
    content = _content(message) if message.role != "system" else None
    if content is None:
        return None
    wire: dict[str, Any] = {"role": message.role, "content": content}
    if message.role == "assistant" and session.model:
        wire = {"model": session.model.partition(":")[2] or session.model, **wire}
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": session.location or "",
        "sessionId": session_uuid,
        "type": message.role,
        "message": wire,
        "uuid": _uuid(session.id, message.id),
        "timestamp": iso_ms(at_ms),
    }
