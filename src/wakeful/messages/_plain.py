"""Rules on a message that hold for the model and for its plain JSON dump alike (what
`wakeful session show` reads without building models, issue 25): which system messages carry
instruction prose (`is_instruction`, applied by `redact_system` and `redact_plain`) and how a
tool result reads as text (`media_label`, used by `tool_result_text` and `result_text`), and
who a view says wrote a message (`speaker`). No pydantic here."""

from __future__ import annotations

from typing import Any

MOVE_RECORD = "move"  # `metadata.kind` of the system message that records a move
PLAIN_KINDS = frozenset({MOVE_RECORD})  # system messages that record an event, not instructions
# A tool result's metadata key naming the blob of its whole text, when the model was given it
# cut to the one cap on tool results (`runner/tools/_cap.py`): `{"ref": digest, "bytes": n}`.
FULL_OUTPUT = "full_output"
# The metadata key of the note wakeful adds when it resumes a turn after a crash (the turn's
# id; `execution/_recovery.py`). It is sent to the model as a user message, but nobody typed it.
RECOVERY_OF = "recovery_of"
RECOVERY_SPEAKER = "recovery"  # how views label that note instead of its role


def is_instruction(role: str, metadata: dict[str, Any] | None) -> bool:
    """Whether a message with this role and metadata carries instruction prose: a system
    message, but those wakeful writes about the session itself (`PLAIN_KINDS`)."""
    return role == "system" and (metadata or {}).get("kind") not in PLAIN_KINDS


def speaker(role: str, metadata: dict[str, Any] | None) -> str:
    """Who a view says wrote a message: its role, but `recovery` for the note wakeful adds
    when it resumes a crashed turn (`RECOVERY_OF`), which no user wrote."""
    return RECOVERY_SPEAKER if RECOVERY_OF in (metadata or {}) else role


def media_label(kind: str, media_type: str, name: str | None) -> str:
    """How a media part of a tool result reads as text: `[image image/png name]`."""
    return f"[{kind} {media_type}{' ' + name if name else ''}]"


def full_output(metadata: dict[str, Any] | None) -> tuple[str, int] | None:
    """The digest and size of the blob holding a tool result's whole text, from its metadata
    (None: the model was given the whole result)."""
    kept = (metadata or {}).get(FULL_OUTPUT)
    if isinstance(kept, dict) and isinstance(kept.get("ref"), str):
        return kept["ref"], int(kept.get("bytes") or 0)
    return None


def redact_plain(message: dict[str, Any], marker: str) -> dict[str, Any]:
    """`redact_system` of a message's plain dump (`model_dump(mode="json",
    exclude_none=True)`): an instruction message's text blocks replaced by `marker`."""
    if not is_instruction(message["role"], message.get("metadata")):
        return message
    blocks = [
        {"type": "text", "text": marker} if b["type"] == "text" else b for b in message["blocks"]
    ]
    return message | {"blocks": blocks}


def result_text(output: str | list[dict[str, Any]]) -> str:
    """`tool_result_text` of a tool result's plain `output`."""
    if isinstance(output, str):
        return output
    return "\n".join(
        p["text"] if p["type"] == "text" else media_label(p["type"], p["media_type"], p.get("name"))
        for p in output
    )
