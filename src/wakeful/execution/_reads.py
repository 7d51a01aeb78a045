"""`Reads`: the runtime's read model, what entry points (the CLI, the server) read through.

It is the `wakeful.store.Store` protocol (what a remote store answers too) plus the reads only
a local database answers: one inbox item, blobs, the instance-wide log position, the latest
session of a location, the sessions with work. `Runtime.reads` is the runtime's own store seen
through it; writes go through `Runtime` methods (`send`, `fork`, `compact`, `interrupt`, ...).

A new read an entry point needs is added here (and, when a server could answer it as well, to
`Store` and `RemoteStore`), never reached for through `Runtime.store`.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import JsonValue

from ..events import StoredEvent
from ..store import Artifact, Feed, InboxItem, PendingRevert, SessionRow, Store, UsageRecord


class Reads(Store, Protocol):
    """See the module docstring. The local store (`LocalStore`) implements it."""

    def input(self, session_id: str, input_id: str) -> InboxItem:
        """One inbox item by id; `NotFoundError` if unknown."""
        ...

    def get_blob(self, digest: str) -> bytes:
        """The bytes of a blob; `NotFoundError` if absent."""
        ...

    def latest_session(self, location: str | None = None) -> SessionRow | None:
        """The most recently updated root session not archived (of `location`, when given)."""
        ...

    def sessions_with_work(self, limit: int = 1000) -> list[str]:
        """Sessions with pending inputs or an unreleased claim (what recovery drives)."""
        ...

    @property
    def feed(self) -> Feed:
        """The instance-wide log: events after a position, the newest position, commit
        announcements (`store/_feed.py`)."""
        ...

    def usage_records(self, since_ms: int | None = None) -> list[UsageRecord]:
        """Every request's recorded usage (at or after `since_ms`), one record per
        `usage.recorded` event (`wakeful.store.usage_report` groups them)."""
        ...

    # -- what shapes a session after the fact (`docs/rewind.md`) ------------------------------

    def live_compactions(self, session_id: str) -> list[StoredEvent]:
        """The `compaction.ended` events whose summary is still in the transcript, oldest
        first (where active history starts; `LocalStore.live_compactions`)."""
        ...

    def pending_revert(self, session_id: str) -> PendingRevert | None:
        """The session's rewind that an unrevert can still undo, or None."""
        ...

    def artifacts(
        self,
        session_id: str,
        *,
        kind: str | None = None,
        since_ms: int | None = None,
        limit: int | None = None,
    ) -> list[Artifact]:
        """The session's artifacts, newest update first."""
        ...

    def find_artifacts(
        self,
        uri: str | None = None,
        *,
        kind: str | None = None,
        since_ms: int | None = None,
        location: str | None = None,
        limit: int | None = 100,
    ) -> list[Artifact]:
        """Reverse lookup across every session: the artifacts with exactly this uri, or of the
        sessions living at `location` (see `LocalStore.find_artifacts`)."""
        ...

    def metadata(self, session_id: str) -> dict[str, JsonValue]:
        """The session's metadata object."""
        ...

    def extension_state(self, session_id: str, namespace: str) -> dict[str, JsonValue]:
        """Every value of one extension's namespace, by key."""
        ...
