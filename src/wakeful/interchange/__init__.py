"""Other tools' session files in and out: Claude Code transcripts, Codex rollouts, OpenAI Agents
SDK `SQLiteSession` databases and opencode exports read as wakeful sessions and written back, and
a recorded session as OpenTelemetry GenAI spans (`docs/interchange.md`).

Above the messages and events it converts and below the entry points that read and write the
store: a reader takes bytes and gives whole sessions (or a `UsageError` naming the line), a writer
takes a stored session and gives bytes; neither touches the store.
"""

from __future__ import annotations

from ._formats import FORMATS, Format, format_named
from ._items import canonical as canonical_item
from ._items import message_ids as item_message_ids
from ._items import to_items as message_to_items
from ._items import to_message as item_to_message
from ._model import ExportedSession, ImportedSession, Written
from ._otel import Recorded
from ._otel import build as otlp_request

__all__ = [
    "FORMATS",
    "ExportedSession",
    "Format",
    "ImportedSession",
    "Recorded",
    "Written",
    "canonical_item",
    "format_named",
    "item_message_ids",
    "item_to_message",
    "message_to_items",
    "otlp_request",
]
