"""OpenAI Responses items (the Agents SDK's, Codex's) <-> wakeful messages: one item is one
message, lossless both ways.

An item goes through the Responses converter; when converting the message back does not give
the item again (an SDK `id`/`status`, output-text annotations, a `developer` role, an item kind
the converter has no block for), the item's JSON rides along in the message's metadata under
`openai_agents.item` (or the importer's own key, `codex.item`) and is what the session returns. Message ids are derived from the batch's
anchor (the message before it), the item's position in the batch and its content, so a retried
batch is recognised. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from ..errors import InvalidMessageError, UsageError
from ..messages import Message, Role, TextBlock, from_openai_responses, to_openai_responses

META_KEY = "openai_agents"


def canonical(item: object) -> dict[str, Any]:
    """The item as plain JSON (a dict); `UsageError` if it is not a JSON object."""
    try:
        plain = json.loads(json.dumps(item))
    except (TypeError, ValueError) as err:
        raise UsageError(f"an Agents SDK item must be JSON: {err}") from None
    if not isinstance(plain, dict):
        raise UsageError("an Agents SDK item must be a JSON object")
    return plain


def message_ids(session_id: str, anchor: str, items: Sequence[dict[str, Any]]) -> list[str]:
    """Deterministic ids of a batch appended after the message `anchor` ("" at the start)."""
    out = []
    for k, item in enumerate(items):
        body = json.dumps(item, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(f"{session_id}\n{anchor}\n{k}\n{body}".encode()).hexdigest()
        out.append(f"msg_{digest[:32]}")
    return out


def _fallback(item: dict[str, Any]) -> tuple[Role, tuple[TextBlock, ...]]:
    """The role and a readable label for an item the converter cannot hold."""
    kind = str(item.get("type", "message"))
    role: Role = "user" if kind.endswith("_output") else "assistant"
    return role, (TextBlock(text=f"[{kind}]"),)


def to_message(item: dict[str, Any], message_id: str, key: str = META_KEY) -> Message:
    """The wakeful message that stores `item` (with the item verbatim, under `key` of its
    metadata, when needed)."""
    try:
        (converted,) = from_openai_responses([item])
        role, blocks = converted.role, converted.blocks
        exact = to_openai_responses([converted]) == [item]
    except (InvalidMessageError, ValueError):
        (role, blocks), exact = _fallback(item), False
    metadata: dict[str, JsonValue] | None = None if exact else {key: {"item": item}}
    return Message(id=message_id, role=role, blocks=blocks, metadata=metadata)


def to_items(message: Message, key: str = META_KEY) -> list[dict[str, Any]]:
    """The items a stored message stands for: the item kept under `key`, else the converter's
    items.

    A message wakeful itself wrote (for example by `wakeful run`) may give several items.
    """
    kept = (message.metadata or {}).get(key)
    item = kept.get("item") if isinstance(kept, dict) else None
    if isinstance(item, dict):
        return [dict(item)]
    return [dict(item) for item in to_openai_responses([message])]
