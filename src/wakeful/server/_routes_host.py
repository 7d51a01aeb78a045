"""Endpoints for hosts that keep sessions themselves (`wakeful.client.RemoteStore`): append
events, store and read blobs, prune, rename a session. Each calls one public `Runtime` method
(`execution/_host.py`, `docs/hosts.md`).

A blob can hold instruction text (a receipt's system sections, an instruction value), so
reading one by digest needs the sensitive scope; a session's media has its own route
(`GET /sessions/{id}/media/{digest}`) that any token may read.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from starlette.responses import Response

from ..errors import NotFoundError, StoreError, UsageError
from ..events import SessionEvent, load_event
from ..execution import off_loop
from ._api import DIGEST_SCHEMA, ApiError, Call, Registry
from ._models import CountsOut, SessionOut
from ._models_host import AppendedOut, AppendIn, BlobIn, BlobOut, PruneIn, SessionPatchIn
from ._state import ServerState

ops = Registry(scope="admin")  # the whole store, or every session's: docs/access.md


def _decode(data: str, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise UsageError(f"{what} is not base64") from None


def _events(raw: list[dict[str, Any]]) -> list[SessionEvent]:
    out = []
    for n, body in enumerate(raw):
        try:
            out.append(load_event(json.dumps(body)))
        except StoreError as err:  # what this version cannot read as an event
            raise UsageError(f"events[{n}] is not an event: {err}") from None
    return out


@ops.op(
    "POST",
    "/sessions/{session_id}/events",
    tag="host",
    body=AppendIn,
    response=AppendedOut,
    errors=(400, 401, 404, 409, 413, 422),
)
async def append_events(call: Call[Any, AppendIn]) -> AppendedOut:
    """Append a host's events (messages, work state, usage) in one transaction, under a claim
    of its own: refused (409) while a driver holds the session or a turn is unfinished."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    events = _events(call.body.events)
    blobs = [_decode(b, f"blobs[{n}]") for n, b in enumerate(call.body.blobs)]
    stored = await off_loop(state.runtime.append_events, sid, events, blobs=blobs)
    state.hub.nudge()
    return AppendedOut(
        seqs=[e.seq for e in stored],
        ids=[e.id for e in stored],
        at_ms=stored[-1].at_ms,
        last_seq=stored[-1].seq,
    )


@ops.op(
    "POST",
    "/blobs",
    tag="host",
    body=BlobIn,
    status=201,
    response=BlobOut,
    errors=(400, 401, 404, 413, 422),
)
async def put_blob(call: Call[Any, BlobIn]) -> BlobOut:
    """Store bytes once by digest (referenced by `session_id` when given)."""
    state: ServerState = call.state
    data = _decode(call.body.data, "data")
    digest = await off_loop(state.runtime.put_blob, data, call.body.session_id)
    return BlobOut(digest=digest, bytes=len(data))


@ops.op(
    "GET",
    "/blobs/{digest}",
    tag="host",
    raw="application/octet-stream",
    errors=(401, 403, 404),
    path_schemas={"digest": DIGEST_SCHEMA},
)
async def get_blob(call: Call[Any, Any]) -> Response:
    """A blob's bytes by digest (needs the sensitive scope: a blob may hold instructions)."""
    if not call.sensitive_scope:
        raise ApiError(403, "forbidden", "reading a blob needs a token with the sensitive scope")
    state: ServerState = call.state
    try:
        data = await off_loop(state.reads.get_blob, call.path["digest"])
    except NotFoundError:
        raise ApiError(404, "not_found", f"no blob {call.path['digest']}") from None
    return Response(data, media_type="application/octet-stream")


@ops.op("POST", "/prune", tag="host", body=PruneIn, response=CountsOut, errors=(400, 401, 413, 422))
async def prune(call: Call[Any, PruneIn]) -> CountsOut:
    """Root sessions idle since before `older_than_ms`: preview, archive or delete them."""
    state: ServerState = call.state
    counts = await off_loop(state.runtime.prune, call.body.older_than_ms, call.body.action)
    state.hub.nudge()
    return CountsOut.model_validate(counts.to_json())


@ops.op(
    "PATCH",
    "/sessions/{session_id}",
    tag="sessions",
    body=SessionPatchIn,
    response=SessionOut,
    errors=(400, 401, 404, 413, 422),
)
async def patch_session(call: Call[Any, SessionPatchIn]) -> SessionOut:
    """Rename the session (its title, a recorded `session.updated`)."""
    state: ServerState = call.state
    row = await off_loop(state.runtime.rename, call.path["session_id"], call.body.title)
    state.hub.nudge()
    return state.session_out(row)
