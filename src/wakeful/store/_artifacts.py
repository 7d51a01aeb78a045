"""Artifacts a session produced (files, branches, commits, pull requests, links): the spec's
`upsertArtifact`, `listArtifacts` and reverse lookup.

Invariant: an artifact is an `artifact.recorded` event and an `artifacts` row written together
(`_shaped.artifact_recorded`), upserted by (session, kind, uri) and capped per session
(`ARTIFACTS_PER_SESSION_CAP`, file artifacts evicted first, oldest first). The reverse lookup
("which sessions produced this pull request") reads the `artifacts_uri` index only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._ids import new_artifact_id
from ..errors import NotFoundError, UsageError
from ._append import append_events
from ._backend import Row, Tx
from ._cipher import keyed, opened, opened_or_none
from ._shaped import ARTIFACT_URI, ARTIFACTS_PER_SESSION_CAP

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..clock import Clock
    from ..events import ArtifactRecorded
    from ._backend import Backend

ARTIFACT_KINDS = ("file", "branch", "commit", "pull_request", "link")  # built-ins; the set is open
ARTIFACTS_METADATA_KEY = "artifacts"  # tool-result metadata: a list of artifact inputs
ARTIFACT_META_MAX_BYTES = 16_384
LABEL_MAX_CHARS = 200
URI_MAX_CHARS = 2048
_KIND = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
_COLS = "id, session_id, kind, uri, label, meta, turn_id, created_ms, updated_ms, uri_sealed"
_A_COLS = ", ".join(f"a.{c}" for c in _COLS.split(", "))  # the same columns of `artifacts a`

__all__ = ["ARTIFACTS_PER_SESSION_CAP", "Artifact", "ArtifactsMixin"]


@dataclass(frozen=True, slots=True)
class Artifact:
    """A recorded output of a session; `turn_id` the turn whose tool produced it, if any."""

    id: str
    session_id: str
    kind: str
    uri: str
    label: str
    meta: JsonValue
    turn_id: str | None
    created_ms: int
    updated_ms: int

    def as_json(self) -> dict[str, JsonValue]:
        """The artifact as a JSON object (the CLI's and the API's shape)."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "kind": self.kind,
            "uri": self.uri,
            "label": self.label,
            "meta": self.meta,
            "turn_id": self.turn_id,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
        }


def _artifact(row: Row) -> Artifact:
    """The artifact of a row of `_COLS` (an encrypted store's uri, label and meta opened)."""
    meta = opened_or_none(row[5])
    return Artifact(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3] if row[9] is None else opened(row[9])),
        opened(str(row[4])),
        None if meta is None else json.loads(meta),
        row[6],
        int(row[7]),
        int(row[8]),
    )


def artifact_event(
    kind: str,
    uri: str,
    label: str,
    meta: JsonValue = None,
    *,
    turn_id: str | None = None,
    at_ms: int = 0,
) -> ArtifactRecorded:
    """A validated `artifact.recorded` (`UsageError` for a bad kind, uri, label or meta)."""
    from ..events import ArtifactRecorded

    if not _KIND.match(kind):
        raise UsageError(f"bad artifact kind {kind!r}: lowercase letters, digits, _ . - (<= 64)")
    if not uri.strip() or len(uri) > URI_MAX_CHARS:
        raise UsageError(f"an artifact's uri must be 1 to {URI_MAX_CHARS} characters")
    if not label.strip():
        raise UsageError("an artifact needs a label")
    if meta is not None and len(json.dumps(meta).encode()) > ARTIFACT_META_MAX_BYTES:
        raise UsageError(f"an artifact's meta is larger than {ARTIFACT_META_MAX_BYTES} bytes")
    return ArtifactRecorded(
        artifact_id=new_artifact_id(),
        kind=kind,
        uri=uri,
        label=label[:LABEL_MAX_CHARS],
        meta=meta,
        turn_id=turn_id,
        at_ms=at_ms,
    )


def artifacts_from_metadata(
    metadata: dict[str, JsonValue] | None, *, turn_id: str | None, at_ms: int
) -> list[ArtifactRecorded]:
    """The artifacts a tool announced in its result metadata (`ARTIFACTS_METADATA_KEY`), from
    an untrusted boundary: unusable entries are skipped, an oversized meta is dropped (the
    spec's `normalizeArtifactInput`)."""
    raw = (metadata or {}).get(ARTIFACTS_METADATA_KEY)
    out: list[ArtifactRecorded] = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict):
            continue
        kind, uri, label = entry.get("kind"), entry.get("uri"), entry.get("label")
        if not (isinstance(kind, str) and isinstance(uri, str) and isinstance(label, str)):
            continue
        meta = entry.get("meta")
        if meta is not None and len(json.dumps(meta).encode()) > ARTIFACT_META_MAX_BYTES:
            meta = None
        try:
            out.append(artifact_event(kind, uri, label, meta, turn_id=turn_id, at_ms=at_ms))
        except UsageError:
            continue
    return out


class ArtifactsMixin:
    """Artifacts of `SqlStore`."""

    backend: Backend
    clock: Clock

    def add_artifact(
        self,
        session_id: str,
        kind: str,
        uri: str,
        label: str,
        meta: JsonValue = None,
        *,
        turn_id: str | None = None,
    ) -> Artifact:
        """Record (upsert by kind and uri) an artifact of the session and return the stored row:
        an existing one keeps its id, turn and creation time and takes the new label and meta.
        Past `ARTIFACTS_PER_SESSION_CAP`, the oldest file artifacts go first."""
        event = artifact_event(kind, uri, label, meta, turn_id=turn_id, at_ms=self.clock.now_ms())
        with self.backend.transaction(write=True) as tx:
            append_events(tx, session_id, [event], event.at_ms)
            row = tx.one(
                f"SELECT {_COLS} FROM artifacts WHERE session_id = ? AND kind = ? AND uri = ?",
                (session_id, kind, keyed(tx.cipher, ARTIFACT_URI, uri)),
            )
        assert row is not None
        return _artifact(row)

    def artifacts(
        self,
        session_id: str,
        *,
        kind: str | None = None,
        since_ms: int | None = None,
        limit: int | None = None,
    ) -> list[Artifact]:
        """The session's artifacts, newest update first, optionally of one kind and updated at
        or after `since_ms`."""
        where, params = _filters(kind, since_ms)
        with self.backend.transaction(write=False) as tx:
            _exists(tx, session_id)
            rows = tx.all(
                f"SELECT {_COLS} FROM artifacts WHERE session_id = ?{where} "
                f"ORDER BY updated_ms DESC, id{_limit(limit)}",
                (session_id, *params),
            )
        return [_artifact(r) for r in rows]

    def find_artifacts(
        self,
        uri: str | None = None,
        *,
        kind: str | None = None,
        since_ms: int | None = None,
        location: str | None = None,
        limit: int | None = 100,
    ) -> list[Artifact]:
        """Reverse lookup across every session, newest update first: the artifacts with
        exactly this `uri` (answered from the `artifacts_uri` index), or every artifact of the
        sessions living at `location` (an absolute workspace root: what was produced there);
        both given, both hold. Optionally of one `kind` and updated at or after `since_ms`.
        `UsageError` when neither `uri` nor `location` is given."""
        if uri is None and location is None:
            raise UsageError("a lookup needs a uri or a location")
        where, params = _filters(kind, since_ms, "a.")
        if uri is not None:  # an encrypted store's index holds the uri's keyed hash
            where += " AND a.uri = ?"
            params.append(keyed(self.backend.cipher, ARTIFACT_URI, uri))
        join = ""
        if location is not None:
            join = " JOIN sessions s ON s.id = a.session_id"
            where += " AND s.location = ?"
            params.append(location)
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                f"SELECT {_A_COLS} FROM artifacts a{join} WHERE 1 = 1{where} "
                f"ORDER BY a.updated_ms DESC, a.id{_limit(limit)}",
                params,
            )
        return [_artifact(r) for r in rows]


def _filters(kind: str | None, since_ms: int | None, table: str = "") -> tuple[str, list[Any]]:
    where, params = "", list[Any]()
    if kind is not None:
        where += f" AND {table}kind = ?"
        params.append(kind)
    if since_ms is not None:
        where += f" AND {table}updated_ms >= ?"
        params.append(since_ms)
    return where, params


def _limit(limit: int | None) -> str:
    if limit is None:
        return ""
    if limit < 1:
        raise UsageError("limit must be at least 1")
    return f" LIMIT {int(limit)}"


def _exists(tx: Tx, session_id: str) -> None:
    if tx.one("SELECT 1 FROM sessions WHERE id = ?", (session_id,)) is None:
        raise NotFoundError(f"no session {session_id}")
