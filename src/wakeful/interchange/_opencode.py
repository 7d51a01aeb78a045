"""opencode exports (`opencode export SESSION`: `{"info": session, "messages": [{"info",
"parts"}]}`) <-> wakeful sessions.

An opencode message is one wakeful message of its role holding its `text`, `reasoning` and
`tool` parts as text, thinking and tool-call blocks, followed by a user message of the tool
results (a `tool` part's completed output or error); when a part follows a tool whose result
came back (the next step of the same opencode message), the message is split there, so the
results stay between the call and what the model said after them. The first wakeful message
of an opencode message keeps its `info` and every part without its content (step-start,
step-finish, file, patch, ... whole) under `opencode`, each content part pointing at the block
that holds its content; export puts the content back from the blocks. Mapping table:
`docs/interchange.md`.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from pydantic import JsonValue

from ..errors import UsageError
from ..messages import (
    Block,
    Message,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    tool_result_text,
)
from ._model import (
    ExportedSession,
    ImportedSession,
    Written,
    decode,
    derived_id,
    parse_json,
    session_id_for,
)

FORMAT = "opencode"
KEY = "opencode"
KEPT = (
    "each message's info (ids, times, agent, model, cost, tokens, finish) and its parts "
    "without their content (step-start, step-finish, file, patch, snapshot, ... whole; a tool's "
    "title, metadata and times) under the message's opencode metadata; the session's info"
)
LOST = "nothing of a session; a pending or running tool call has no result to import"
_PROVIDERS = ("anthropic", "openai")


@dataclass
class _Group:
    """The wakeful messages one opencode message becomes, built part by part."""

    role: Role
    out: list[tuple[Role, list[Block]]] = field(default_factory=list)
    results: list[Block] = field(default_factory=list)

    def add(self, block: Block) -> list[JsonValue]:
        """Append a content block (after flushing results a later step follows); its place."""
        if self.results:
            self.out.append(("user", self.results))
            self.results = []
            self.out.append((self.role, []))
        if not self.out:
            self.out.append((self.role, []))
        self.out[-1][1].append(block)
        return [len(self.out) - 1, len(self.out[-1][1]) - 1]

    def result(self, block: Block) -> list[JsonValue]:
        """Queue a tool result for the user message after this step; its place."""
        self.results.append(block)
        return [len(self.out), len(self.results) - 1]

    def messages(self) -> list[tuple[Role, list[Block]]]:
        """The (role, blocks) of every message, at least one."""
        tail: list[tuple[Role, list[Block]]] = [("user", self.results)] if self.results else []
        return (self.out or [(self.role, [])]) + tail


def _where(name: str, k: int, j: int | None = None) -> str:
    return f"{name} messages[{k}]" + ("" if j is None else f".parts[{j}]")


def _part(group: _Group, part: dict[str, Any], where: str) -> dict[str, JsonValue]:
    """Read one part into `group`; return its skeleton (the part without its content)."""
    kind = part.get("type")
    skeleton = copy.deepcopy(part)
    if kind in ("text", "reasoning"):
        text = part.get("text")
        if not isinstance(text, str):
            raise UsageError(f"{where}: a {kind} part without text")
        del skeleton["text"]
        block: Block = TextBlock(text=text) if kind == "text" else ThinkingBlock(text=text)
        return {"part": skeleton, "at": group.add(block)}
    if kind != "tool":
        return {"part": skeleton}
    state, call_id, name = part.get("state"), part.get("callID"), part.get("tool")
    if not isinstance(state, dict) or not isinstance(call_id, str) or not call_id:
        raise UsageError(f"{where}: a tool part without callID or state")
    if not isinstance(name, str) or not name:
        raise UsageError(f"{where}: a tool part without its tool's name")
    raw = state.get("input", {})
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: state.input is not an object")
    out: dict[str, JsonValue] = {"part": skeleton}
    skeleton["state"].pop("input", None)
    out["at"] = group.add(ToolCallBlock(id=call_id, name=name, input=raw))
    status, key = state.get("status"), "output" if state.get("status") == "completed" else "error"
    if status in ("completed", "error"):
        text = state.get(key)
        if not isinstance(text, str):
            raise UsageError(f"{where}: a {status} tool part without its {key} text")
        del skeleton["state"][key]
        result = ToolResultBlock(call_id=call_id, output=text, is_error=status == "error")
        out["result_at"] = group.result(result)
    return out


def read(raw: bytes, name: str) -> list[ImportedSession]:
    """The session of one export file; `UsageError` naming the first bad message or part."""
    doc = parse_json(decode(raw, name), name)
    info = doc.get("info") if isinstance(doc, dict) else None
    entries = doc.get("messages") if isinstance(doc, dict) else None
    if not isinstance(info, dict) or not isinstance(entries, list):
        raise UsageError(f"{name}: not an opencode export (no info and messages)")
    source_id = info.get("id") if isinstance(info.get("id"), str) else PurePath(name).stem
    sid = session_id_for(FORMAT, str(source_id))
    messages: list[Message] = []
    wheres: list[str] = []
    model = None
    seen: dict[str, int] = {}
    for k, entry in enumerate(entries):
        minfo = entry.get("info") if isinstance(entry, dict) else None
        parts = entry.get("parts") if isinstance(entry, dict) else None
        if not isinstance(minfo, dict) or not isinstance(parts, list):
            raise UsageError(f"{_where(name, k)}: not a message (no info and parts)")
        role, mid = minfo.get("role"), minfo.get("id")
        if role not in ("user", "assistant") or not isinstance(mid, str) or not mid:
            raise UsageError(f"{_where(name, k)}: info needs an id and a user or assistant role")
        if mid in seen:
            raise UsageError(f"{_where(name, k)}: message id {mid} again (messages[{seen[mid]}])")
        seen[mid] = k
        if role == "assistant" and minfo.get("providerID") in _PROVIDERS and model is None:
            model = f"{minfo['providerID']}:{minfo.get('modelID')}"
        group = _Group(role)
        skeletons: list[JsonValue] = []
        for j, part in enumerate(parts):
            if not isinstance(part, dict):
                raise UsageError(f"{_where(name, k, j)}: not an object")
            skeletons.append(_part(group, part, _where(name, k, j)))
        for n, (r, blocks) in enumerate(group.messages()):
            kept: dict[str, JsonValue] = (
                {"info": minfo, "parts": skeletons} if n == 0 else {"part_of": mid}
            )
            messages.append(
                Message(
                    id=derived_id("msg_", sid, mid, str(n)),
                    role=r,
                    blocks=tuple(blocks),
                    metadata={KEY: kept},
                )
            )
            wheres.append(_where(name, k))
    title = info.get("title") if isinstance(info.get("title"), str) else None
    workspace = info.get("directory") if isinstance(info.get("directory"), str) else None
    return [
        ImportedSession(
            format=FORMAT,
            source_id=str(source_id),
            session_id=sid,
            messages=tuple(messages),
            title=title,
            model=model,
            workspace=workspace,
            metadata={KEY: {"info": info}},
            where=tuple(wheres),
        )
    ]


# -- export ------------------------------------------------------------------------------------


def _restored(group: Sequence[Message], kept: dict[str, Any]) -> dict[str, Any] | None:
    """The opencode message a kept group came from, its content read back from the blocks;
    None when the blocks no longer fit the parts (the transcript was edited)."""
    parts = []
    try:
        for skel in kept["parts"]:
            part = copy.deepcopy(skel["part"])
            if "at" in skel:
                k, j = skel["at"]
                block = group[k].blocks[j]
                if isinstance(block, TextBlock | ThinkingBlock):
                    part["text"] = block.text
                elif isinstance(block, ToolCallBlock):
                    part["state"]["input"] = dict(block.input)
                else:
                    return None
            if "result_at" in skel:
                k, j = skel["result_at"]
                result = group[k].blocks[j]
                if not isinstance(result, ToolResultBlock):
                    return None
                key = "error" if result.is_error else "output"
                part["state"][key] = tool_result_text(result.output)
            parts.append(part)
    except (IndexError, KeyError, TypeError, ValueError):
        return None
    return {"info": kept["info"], "parts": parts}


def _groups(messages: Sequence[Message]) -> list[tuple[dict[str, Any] | None, list[Message]]]:
    """Consecutive messages that came from one opencode message (its kept data first), and
    each other message alone."""
    out: list[tuple[dict[str, Any] | None, list[Message]]] = []
    for message in messages:
        kept = (message.metadata or {}).get(KEY)
        kept = kept if isinstance(kept, dict) else {}
        if "info" in kept and "parts" in kept:
            out.append((kept, [message]))
        elif out and out[-1][0] and kept.get("part_of") == out[-1][0]["info"].get("id"):
            out[-1][1].append(message)
        else:
            out.append((None, [message]))
    return out


def write(session: ExportedSession) -> Written:
    """The session as an opencode export: kept messages restored, the others built."""
    kept_info = session.metadata.get(KEY)
    info = kept_info.get("info") if isinstance(kept_info, dict) else None
    source = info.get("id") if isinstance(info, dict) else None
    sid = source if isinstance(source, str) else derived_id("ses_", session.id, length=26)
    times = {m.id: at_ms for m, at_ms in session.messages}
    out: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    for kept, group in _groups([m for m, _ in session.messages]):
        restored = _restored(group, kept) if kept else None
        if restored is not None:
            out.append(restored)
            continue
        for message in group:
            if not _built(message, session, sid, times.get(message.id, 0), out):
                dropped[f"{message.role} message"] += 1
    doc = {"info": info if isinstance(info, dict) else _info(session, sid), "messages": out}
    return Written((json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode(), dropped)


def _info(session: ExportedSession, sid: str) -> dict[str, Any]:
    """The session info of a session wakeful wrote."""
    created = session.created_ms
    return {
        "id": sid,
        "title": session.title or "",
        "directory": session.location or "",
        "time": {"created": created, "updated": created},
    }


def _built(
    message: Message, session: ExportedSession, sid: str, at_ms: int, out: list[dict[str, Any]]
) -> bool:
    """Append the opencode message for a message wakeful wrote (tool results join the tool
    parts of the message before); False when opencode has no place for it."""
    if message.role == "system":
        return False
    results = {b.call_id: b for b in message.tool_results()}
    if results and out and len(results) == len(message.blocks):
        for part in out[-1]["parts"]:
            result = results.get(part.get("callID", ""))
            if part.get("type") == "tool" and result is not None:
                key = "error" if result.is_error else "output"
                status = "error" if result.is_error else "completed"
                text = tool_result_text(result.output)
                part["state"] = {**part["state"], "status": status, key: text}
        return True
    mid = derived_id("msg_", session.id, message.id, length=26)
    info: dict[str, Any] = {
        "id": mid,
        "sessionID": sid,
        "role": message.role,
        "time": {"created": at_ms},
    }
    family, _, name = (session.model or "").partition(":")
    if message.role == "assistant" and family in _PROVIDERS:
        info |= {"providerID": family, "modelID": name}
    parts = []
    for j, block in enumerate(message.blocks):
        base: dict[str, Any] = {
            "id": derived_id("prt_", mid, str(j), length=26),
            "sessionID": sid,
            "messageID": mid,
        }
        if isinstance(block, TextBlock):
            parts.append(base | {"type": "text", "text": block.text})
        elif isinstance(block, ThinkingBlock):
            parts.append(base | {"type": "reasoning", "text": block.text})
        elif isinstance(block, ToolCallBlock):
            state = {"status": "pending", "input": dict(block.input)}
            parts.append(
                base | {"type": "tool", "callID": block.id, "tool": block.name, "state": state}
            )
    if not parts:
        return False
    out.append({"info": info, "parts": parts})
    return True
