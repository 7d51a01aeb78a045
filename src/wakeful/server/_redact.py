"""What a caller without the sensitive view may not see: instruction text, in every form.

Instruction prose reaches a session three ways: the `text` of an `instructions.updated` event,
the chronological system message that freezes the same text into the transcript, and the
`system.*` (and request-only `input.*`) sections of a prompt receipt. The redacted view keeps
their keys, digests and sizes, never their content. Invariant: every response and stream of the
server builds events, messages and receipts through these functions.
"""

from __future__ import annotations

from ..errors import NotFoundError
from ..events import InstructionsUpdated, MessageAdded, ReceiptRecorded, StoredEvent
from ..execution import Reads
from ..messages import Message, redact_system

REDACTED = "[redacted: needs the sensitive scope]"
SENSITIVE_SECTION_PREFIXES = ("system.", "input.")


def redact_message(message: Message) -> Message:
    """A system message's text replaced by a marker; other messages unchanged."""
    return redact_system(message, REDACTED)


def event_json(ev: StoredEvent, *, sensitive: bool) -> dict[str, object]:
    """The JSON of a durable event (as `StoredEvent.to_json`), redacted unless `sensitive`."""
    event = ev.event
    if not sensitive:
        if isinstance(event, InstructionsUpdated) and event.text is not None:
            event = event.model_copy(update={"text": REDACTED})
        elif isinstance(event, MessageAdded) and event.message.role == "system":
            event = event.model_copy(update={"message": redact_message(event.message)})
    return {
        "id": ev.id,
        "session_id": ev.session_id,
        "seq": ev.seq,
        "at_ms": ev.at_ms,
        "type": ev.type,
        "data": event.model_dump(mode="json", exclude_none=True),
    }


def section_is_sensitive(section_id: str) -> bool:
    """Whether a receipt section holds instruction text (or a request-only input)."""
    return section_id.startswith(SENSITIVE_SECTION_PREFIXES)


def receipt_json(store: Reads, receipt: ReceiptRecorded, *, sensitive: bool) -> dict[str, object]:
    """A receipt with each section's digest and size; content only where allowed."""
    sections = []
    for sid, source, digest in receipt.sections:
        hidden = section_is_sensitive(sid) and not sensitive
        try:
            data: bytes | None = store.get_blob(digest)
        except NotFoundError:  # the blob is gone: report the section, do not fail
            data = None
        sections.append(
            {
                "id": sid,
                "source": source,
                "digest": digest,
                "bytes": None if data is None else len(data),
                "content": None if hidden or data is None else data.decode("utf-8", "replace"),
                "redacted": hidden,
            }
        )
    return {
        "receipt_id": receipt.receipt_id,
        "turn_id": receipt.turn_id,
        "step": receipt.step,
        "attempt": receipt.attempt,
        "model": receipt.model,
        "purpose": receipt.purpose,
        "request_digest": receipt.request_digest,
        "sections": sections,
        "message_ids": list(receipt.message_ids),
    }
