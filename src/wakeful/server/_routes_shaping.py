"""Shaping endpoints: rewind and unrevert, history edits, artifacts (and the reverse lookup),
metadata and extension state. Each calls one public `Runtime` method (`docs/rewind.md`).

Bad input is a 4xx with a reason: an unknown session or target 404, a stale revision, a driven
session or files changed by something else 409, a bound passed 422.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, JsonValue

from ..execution import RewindResult, off_loop
from ..store import Artifact
from ._api import Call, Registry
from ._models import MAX_INT, InputId, Seq, Short, Text, _In, _Out
from ._state import ServerState

ops = Registry()
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")]
Uri = Annotated[str, Field(pattern=r"^[^\x00]+$", max_length=2048)]


class RewindIn(_In):
    """Where to revert to (one of turn, input, message; none: the newest turn), and whether to
    restore the files those turns changed (`force`: also files changed since by others)."""

    turn_id: InputId | None = None
    input_id: InputId | None = None
    message_id: InputId | None = None
    files: bool = False
    force: bool = False
    revision: Seq | None = Field(default=None, description="The session's `last_seq` read.")


class UnrevertIn(_In):
    """`force`: also overwrite files changed since the rewind."""

    force: bool = False


class RewindOut(_Out):
    """What a rewind or unrevert did (see `RewindResult`)."""

    session_id: str
    seq: int
    from_seq: int
    hidden: int
    files_restored: list[str]
    files_left: list[str]
    shell_calls: list[str]
    prompt: str | None
    files_completed: list[str]
    warnings: list[str]


class HistoryEditIn(_In):
    """Delete a turn, replace the text of a message, or write the pairing heal back
    (`heal_pairing`), at `revision` (the `last_seq` read)."""

    revision: Annotated[int, Field(ge=0, le=MAX_INT)]
    delete_turn: InputId | None = None
    message_id: InputId | None = None
    text: Text | None = None
    heal_pairing: bool = False


class RevisionOut(_Out):
    """The session's revision after the write."""

    session_id: str
    revision: int


class ArtifactIn(_In):
    """An artifact to record (upserted by kind and uri)."""

    kind: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_.-]{0,63}$")]
    uri: Uri
    label: Short
    meta: JsonValue = None


class ArtifactOut(_Out):
    """A recorded artifact."""

    id: str
    session_id: str
    kind: str
    uri: str
    label: str
    meta: JsonValue
    turn_id: str | None
    created_ms: int
    updated_ms: int


class ArtifactsOut(_Out):
    """Artifacts, newest update first."""

    artifacts: list[ArtifactOut]


class ArtifactsQuery(_In):
    """Filters of a session's artifacts."""

    kind: Annotated[str, Field(max_length=64)] | None = None
    since_ms: Annotated[int, Field(ge=0, le=MAX_INT)] | None = None
    limit: Annotated[int, Field(ge=1, le=500)] = 100


class LookupQuery(_In):
    """A reverse lookup: which sessions produced `uri`, or what the sessions living at
    `location` produced (at least one of them), of `kind`, updated at or after `since_ms`."""

    uri: Uri | None = None
    kind: Annotated[str, Field(max_length=64)] | None = None
    since_ms: Annotated[int, Field(ge=0, le=MAX_INT)] | None = None
    location: Annotated[str, Field(pattern=r"^(this|/[^\x00]*)$", max_length=4096)] | None = Field(
        default=None, description="`this`: the server's workspace; or an absolute directory."
    )
    limit: Annotated[int, Field(ge=1, le=500)] = 100


class MetadataIn(_In):
    """Keys to merge into the metadata; a null value removes the key."""

    patch: dict[str, JsonValue] = Field(min_length=1)


class MetadataOut(_Out):
    """A session's metadata object."""

    session_id: str
    metadata: dict[str, JsonValue]


class ExtensionValueIn(_In):
    """One extension value (JSON, not null)."""

    value: JsonValue


class ExtensionStateOut(_Out):
    """Every value of one extension's namespace."""

    session_id: str
    namespace: str
    values: dict[str, JsonValue]


def _rewind_out(result: RewindResult) -> RewindOut:
    data: dict[str, Any] = result.as_json()
    return RewindOut(**data, warnings=result.warnings())


def _artifact_out(a: Artifact) -> ArtifactOut:
    return ArtifactOut(**a.as_json())


@ops.op(
    "POST",
    "/sessions/{session_id}/rewind",
    tag="history",
    body=RewindIn,
    response=RewindOut,
    errors=(400, 401, 404, 409, 413, 422),
)
async def rewind(call: Call[Any, RewindIn]) -> RewindOut:
    """Revert the session to just before a turn, an input or a message (a driven session is
    interrupted first); with `files`, restore the files those turns changed."""
    state: ServerState = call.state
    b = call.body
    result = await state.runtime.rewind(
        call.path["session_id"],
        turn_id=b.turn_id,
        input_id=b.input_id,
        message_id=b.message_id,
        files=b.files,
        force=b.force,
        revision=b.revision,
        actor=call.principal.name,
    )
    state.hub.nudge()
    return _rewind_out(result)


@ops.op(
    "POST",
    "/sessions/{session_id}/unrevert",
    tag="history",
    body=UnrevertIn,
    response=RewindOut,
    errors=(400, 401, 404, 409, 413, 422),
)
async def unrevert(call: Call[Any, UnrevertIn]) -> RewindOut:
    """Undo the session's rewind (until a new input is delivered)."""
    state: ServerState = call.state
    result = await state.runtime.unrevert(
        call.path["session_id"], force=call.body.force, actor=call.principal.name
    )
    state.hub.nudge()
    return _rewind_out(result)


@ops.op(
    "POST",
    "/sessions/{session_id}/history",
    tag="history",
    body=HistoryEditIn,
    response=RevisionOut,
    errors=(400, 401, 404, 409, 413, 422),
)
async def edit_history(call: Call[Any, HistoryEditIn]) -> RevisionOut:
    """Delete a turn, replace a message's text or heal the tool pairing of the stored history
    (drop-only: duplicate calls and results, results without a call), guarded by the
    session's revision."""
    state: ServerState = call.state
    sid, b = call.path["session_id"], call.body
    revision = await off_loop(
        state.runtime.edit_history,
        sid,
        revision=b.revision,
        delete_turn=b.delete_turn,
        message_id=b.message_id,
        text=b.text,
        heal_pairing=b.heal_pairing,
    )
    return RevisionOut(session_id=sid, revision=revision)


@ops.op(
    "GET",
    "/sessions/{session_id}/artifacts",
    tag="artifacts",
    query=ArtifactsQuery,
    response=ArtifactsOut,
)
async def artifacts(call: Call[ArtifactsQuery, Any]) -> ArtifactsOut:
    """The session's artifacts, newest update first, by kind and time."""
    state: ServerState = call.state
    q = call.query
    found = await off_loop(
        state.reads.artifacts,
        call.path["session_id"],
        kind=q.kind,
        since_ms=q.since_ms,
        limit=q.limit,
    )
    return ArtifactsOut(artifacts=[_artifact_out(a) for a in found])


@ops.op(
    "POST",
    "/sessions/{session_id}/artifacts",
    tag="artifacts",
    body=ArtifactIn,
    status=201,
    response=ArtifactOut,
    errors=(400, 401, 404, 413, 422),
)
async def add_artifact(call: Call[Any, ArtifactIn]) -> ArtifactOut:
    """Record an artifact of the session (upserted by kind and uri)."""
    state: ServerState = call.state
    b = call.body
    added = await off_loop(
        state.runtime.add_artifact, call.path["session_id"], b.kind, b.uri, b.label, b.meta
    )
    return _artifact_out(added)


@ops.op(
    "GET",
    "/artifacts",
    tag="artifacts",
    query=LookupQuery,
    response=ArtifactsOut,
    errors=(401, 422),
)
async def find_artifacts(call: Call[LookupQuery, Any]) -> ArtifactsOut:
    """Reverse lookup: the artifacts (and so the sessions) with exactly this uri, or of the
    sessions living at `location`; newest update first."""
    state: ServerState = call.state
    q = call.query
    found = await off_loop(
        state.reads.find_artifacts,
        q.uri,
        kind=q.kind,
        since_ms=q.since_ms,
        location=state.location(q.location),
        limit=q.limit,
    )
    if not call.principal.admin:  # another user's sessions are not there for them
        user = call.principal.user or ""
        mine = await off_loop(
            state.runtime.store.access.owned, user, sorted({a.session_id for a in found})
        )
        found = [a for a in found if a.session_id in mine]
    return ArtifactsOut(artifacts=[_artifact_out(a) for a in found])


@ops.op(
    "GET",
    "/sessions/{session_id}/metadata",
    tag="metadata",
    response=MetadataOut,
    errors=(401, 404),
)
async def metadata(call: Call[Any, Any]) -> MetadataOut:
    """The session's metadata object."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    return MetadataOut(session_id=sid, metadata=await off_loop(state.reads.metadata, sid))


@ops.op(
    "PATCH",
    "/sessions/{session_id}/metadata",
    tag="metadata",
    body=MetadataIn,
    response=MetadataOut,
    errors=(400, 401, 404, 413, 422),
)
async def update_metadata(call: Call[Any, MetadataIn]) -> MetadataOut:
    """Merge keys into the metadata (a null value removes a key)."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    merged = await off_loop(state.runtime.update_metadata, sid, call.body.patch)
    return MetadataOut(session_id=sid, metadata=merged)


async def _namespace(state: ServerState, sid: str, namespace: str) -> ExtensionStateOut:
    values = await off_loop(state.reads.extension_state, sid, namespace)
    return ExtensionStateOut(session_id=sid, namespace=namespace, values=values)


@ops.op(
    "GET",
    "/sessions/{session_id}/extensions/{namespace}",
    tag="metadata",
    response=ExtensionStateOut,
)
async def extension_state(call: Call[Any, Any]) -> ExtensionStateOut:
    """Every value an extension stored in the session."""
    return await _namespace(call.state, call.path["session_id"], call.path["namespace"])


@ops.op(
    "PUT",
    "/sessions/{session_id}/extensions/{namespace}/{key}",
    tag="metadata",
    body=ExtensionValueIn,
    response=ExtensionStateOut,
    errors=(400, 401, 404, 413, 422),
)
async def set_extension_state(call: Call[Any, ExtensionValueIn]) -> ExtensionStateOut:
    """Store one value under an extension's namespace (16 KiB each, 64 KiB per session)."""
    state: ServerState = call.state
    sid, ns, key = call.path["session_id"], call.path["namespace"], call.path["key"]
    await off_loop(state.runtime.set_extension_state, sid, ns, key, call.body.value)
    return await _namespace(state, sid, ns)


@ops.op(
    "DELETE",
    "/sessions/{session_id}/extensions/{namespace}/{key}",
    tag="metadata",
    response=ExtensionStateOut,
)
async def delete_extension_state(call: Call[Any, Any]) -> ExtensionStateOut:
    """Remove one extension value (nothing happens when there is none)."""
    state: ServerState = call.state
    sid, ns, key = call.path["session_id"], call.path["namespace"], call.path["key"]
    await off_loop(state.runtime.delete_extension_state, sid, ns, key)
    return await _namespace(state, sid, ns)
