"""Codex CLI rollout files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) <-> wakeful sessions.

A `response_item` line is one OpenAI Responses item and one message (the items converter of
the Agents SDK integration, `_items.py`, with the item kept verbatim under `codex.item` when the
converter cannot give it back). The line's timestamp is kept under `codex.timestamp`; a
`turn_context` line (model, approval and sandbox policy) rides along under `codex.turn_context`
of the message after it; the `session_meta` line is the session's `codex.session_meta`
metadata. `event_msg` lines repeat the items for the TUI (user_message, agent_message,
token_count, ...) and `compacted` lines hold Codex's own summary: they are counted and said.
Mapping table: `docs/interchange.md`.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import PurePath
from typing import Any

from pydantic import JsonValue

from ..errors import UsageError
from ..messages import Message
from . import _items
from ._model import (
    ExportedSession,
    ImportedSession,
    Written,
    derived_id,
    iso_ms,
    json_lines,
    session_id_for,
    to_jsonl,
)

FORMAT = "codex"
KEY = "codex"
KEPT = (
    "each line's timestamp, the turn_context lines (model, approval and sandbox policy) and "
    "items the converter cannot give back (reasoning, local_shell_call, custom_tool_call, ...) "
    "under the message's codex metadata; the session_meta line as the session's metadata"
)
LOST = "event_msg lines (they repeat the items for the terminal) and compacted lines"


def read(raw: bytes, name: str) -> list[ImportedSession]:
    """The session of one rollout file; `UsageError` naming the line of the first fault."""
    meta: dict[str, Any] | None = None
    pending: dict[str, JsonValue] | None = None
    model: str | None = None
    rows: list[tuple[int, dict[str, Any], dict[str, JsonValue]]] = []
    dropped: Counter[str] = Counter()
    for number, line in json_lines(raw, name):
        where = f"{name} line {number}"
        kind, payload = line.get("type"), line.get("payload")
        if not isinstance(payload, dict):
            raise UsageError(f"{where}: a line without a `payload` object")
        if kind == "session_meta" and meta is None:
            meta = line
        elif kind == "turn_context":
            pending = {"timestamp": line.get("timestamp"), "payload": payload}
            model = model or _str(payload.get("model"))  # an OpenAI model: openai:NAME here
        elif kind == "response_item":
            extra: dict[str, JsonValue] = {"timestamp": line.get("timestamp")}
            if pending is not None:
                extra["turn_context"], pending = pending, None
            rows.append((number, payload, extra))
        else:
            dropped[f"{kind} line"] += 1
    if meta is None:
        raise UsageError(f"{name}: not a Codex rollout (no session_meta line)")
    payload = meta["payload"]
    source_id = _str(payload.get("id")) or PurePath(name).stem
    sid = session_id_for(FORMAT, source_id)
    messages = tuple(_message(sid, number, item, extra) for number, item, extra in rows)
    if payload.get("model_provider") not in (None, "openai"):
        model = None  # a model served by another provider: no spec wakeful could run
    return [
        ImportedSession(
            format=FORMAT,
            source_id=source_id,
            session_id=sid,
            messages=messages,
            model=model and f"openai:{model}",
            workspace=_str(payload.get("cwd")),
            metadata={KEY: {"session_meta": meta}},
            dropped=dropped + (Counter({"turn_context line": 1}) if pending else Counter()),
            where=tuple(f"{name} line {number}" for number, _, _ in rows),
        )
    ]


def _message(sid: str, number: int, item: dict[str, Any], extra: dict[str, JsonValue]) -> Message:
    body = json.dumps(item, sort_keys=True, ensure_ascii=False)
    message = _items.to_message(item, derived_id("msg_", sid, str(number), body), KEY)
    kept = (message.metadata or {}).get(KEY)
    merged: dict[str, JsonValue] = {**(kept if isinstance(kept, dict) else {}), **extra}
    return message.model_copy(update={"metadata": {KEY: merged}})


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def write(session: ExportedSession) -> Written:
    """The session as a rollout file: its session_meta line (kept, or built), then per message
    its turn_context line when it had one and its items."""
    kept = session.metadata.get(KEY)
    meta = kept.get("session_meta") if isinstance(kept, dict) else None
    records: list[dict[str, Any]] = [meta if isinstance(meta, dict) else _meta(session)]
    dropped: Counter[str] = Counter()
    for message, at_ms in session.messages:
        own = (message.metadata or {}).get(KEY)
        own = own if isinstance(own, dict) else {}
        context = own.get("turn_context")
        if isinstance(context, dict):
            records.append(
                {
                    "timestamp": context.get("timestamp"),
                    "type": "turn_context",
                    "payload": context.get("payload"),
                }
            )
        stamp = own.get("timestamp") or iso_ms(at_ms)
        try:
            items = _items.to_items(message, KEY)
        except UsageError:
            dropped[f"{message.role} message"] += 1
            continue
        records += [{"timestamp": stamp, "type": "response_item", "payload": i} for i in items]
    return Written(to_jsonl(records), dropped)


def _meta(session: ExportedSession) -> dict[str, Any]:
    """A session_meta line for a session wakeful wrote."""
    stamp = iso_ms(session.created_ms)
    payload = {
        "id": str(uuid.UUID(hex=derived_id("", session.id))),
        "timestamp": stamp,
        "cwd": session.location or "",
        "originator": "wakeful",
        "cli_version": "",
        "instructions": None,
    }
    return {"timestamp": stamp, "type": "session_meta", "payload": payload}
