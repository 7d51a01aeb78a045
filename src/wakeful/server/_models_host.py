"""The API shapes of what hosts that keep sessions write (`_routes_host`): appends, blobs,
pruning and renaming. Split from `_models` by concern; the same rules hold (single source of
the OpenAPI document, strings without NUL)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue

from ._models import MAX_INT, _In, _Out

# Base64 of at most the server's body limit (4 MiB by default; the body check answers 413 first).
Base64 = Annotated[str, Field(pattern=r"^[A-Za-z0-9+/]*={0,2}$", max_length=8_000_000)]


class AppendIn(_In):
    """Events to append (each as the log shows its `data`: a `type` and its fields), of the
    kinds a host may write: `message.added`, `work_state.updated`, `usage.recorded`; `blobs`
    (base64) are stored with them, in the same transaction."""

    events: list[dict[str, JsonValue]] = Field(min_length=1, max_length=1000)
    blobs: list[Base64] = Field(default_factory=list, max_length=256)


class AppendedOut(_Out):
    """Where the appended events went: their `seq`s and global ids, in order."""

    seqs: list[int]
    ids: list[int]
    at_ms: int
    last_seq: int


class BlobIn(_In):
    """Bytes to store once by SHA-256 (base64); with `session_id`, referenced by the session."""

    data: Base64
    session_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_\-]{1,128}$")] | None = None


class BlobOut(_Out):
    """A stored blob's digest and size."""

    digest: str
    bytes: int


class PruneIn(_In):
    """Root sessions idle since before `older_than_ms` (and their children)."""

    older_than_ms: Annotated[int, Field(ge=0, le=MAX_INT)]
    action: Literal["preview", "archive", "delete"] = "preview"


class SessionPatchIn(_In):
    """What to change of a session: its title."""

    title: Annotated[str, Field(pattern=r"^[^\x00]*$", min_length=1, max_length=500)]
