"""The text SQLite's full-text index holds for a message, computed from the log (`_search_log`)."""

from __future__ import annotations

from ..errors import StoreError
from ._cipher import _TEXT, cipher_for, opened
from ._search import searchable_text
from ._transcript import row_message


def search_text(data: str | None, enqueued: str | None) -> str | None:
    """The text the index holds for a message whose body is the event `data` (the enqueued
    input `enqueued` for a version-2 delivery): `searchable_text` of the message the
    transcript reads there, as keyed hashes of its words when the body is sealed (an
    encrypted store, docs/encryption.md); None for none (no message, a system message, an
    event this version cannot read). It depends on the stored bytes alone, so a delete takes
    out what went in."""
    if data is None:
        return None
    try:
        message = row_message("", opened(data), None if enqueued is None else opened(enqueued))
        text = (searchable_text(message) or None) if message is not None else None
        if text is not None and data.startswith(_TEXT):
            text = cipher_for(data[len(_TEXT) :].split(":", 1)[0]).word_tokens(text)
    except (StoreError, ValueError):
        return None
    return text
