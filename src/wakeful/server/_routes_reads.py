"""Projection reads: messages, pending inbox, turns (run records), usage, receipts, media.

Everything instruction-derived is redacted unless the caller asks with `sensitive=true` and its
token carries the sensitive scope (see `_redact`).
"""

from __future__ import annotations

import re
from typing import Any

from starlette.responses import Response

from ..errors import NotFoundError
from ..execution import off_loop, session_context
from ..messages import Message, full_output
from ..runner import run_records
from ._api import DIGEST_SCHEMA, ApiError, Call, Registry
from ._models import (
    ContextOut,
    InboxItemOut,
    MessageOut,
    MessagesOut,
    MessagesQuery,
    PendingOut,
    ReceiptOut,
    ReceiptsOut,
    RunOut,
    SensitiveQuery,
    SessionUsageOut,
    TurnsOut,
    UsageOut,
)
from ._redact import receipt_json, redact_message
from ._state import ServerState

ops = Registry()
# Media types served inline; anything else (HTML, SVG, ...) is a download, never a page.
_INLINE = re.compile(
    r"^(image/(png|jpeg|gif|webp)|audio/[a-z0-9.+\-]+|video/[a-z0-9.+\-]+|text/plain; charset=utf-8)$"
)


@ops.op(
    "GET",
    "/sessions/{session_id}/messages",
    tag="reads",
    query=MessagesQuery,
    response=MessagesOut,
    errors=(401, 403, 404, 422),
)
async def messages(call: Call[MessagesQuery, Any]) -> MessagesOut:
    """The transcript in log order (delivered inputs included), after `after_seq`; with
    `limit`, a page of at most that many (`next_after` continues a full one)."""
    state: ServerState = call.state
    sensitive = call.want_sensitive()
    q = call.query
    rows = await off_loop(
        state.reads.messages_with_seq, call.path["session_id"], q.after_seq, q.limit
    )
    out = [MessageOut(seq=seq, message=m if sensitive else redact_message(m)) for seq, m in rows]
    full = q.limit is not None and len(rows) == q.limit
    return MessagesOut(
        messages=out, redacted=not sensitive, next_after=rows[-1][0] if full else None
    )


@ops.op(
    "GET",
    "/sessions/{session_id}/context",
    tag="reads",
    query=SensitiveQuery,
    response=ContextOut,
    errors=(401, 403, 404, 422),
)
async def context(call: Call[SensitiveQuery, Any]) -> ContextOut:
    """The session's context: the active history its next request carries, in request order
    (the newest visible compaction's summary first, hidden tool output as its stub)."""
    state: ServerState = call.state
    sensitive = call.want_sensitive()
    found = await off_loop(session_context, state.reads, call.path["session_id"])
    return ContextOut(
        messages=[m if sensitive else redact_message(m) for m in found], redacted=not sensitive
    )


@ops.op(
    "GET", "/sessions/{session_id}/pending", tag="reads", response=PendingOut, errors=(401, 404)
)
async def pending(call: Call[Any, Any]) -> PendingOut:
    """Admitted inputs not delivered yet, in enqueue order."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    await off_loop(state.reads.get_session, sid)
    items = await off_loop(state.reads.pending, sid)
    return PendingOut(
        items=[
            InboxItemOut(
                input_id=i.input_id,
                seq=i.seq,
                kind=i.kind,
                delivery=i.delivery,
                status=i.status,
                payload=i.payload,
            )
            for i in items
        ]
    )


@ops.op("GET", "/sessions/{session_id}/turns", tag="reads", response=TurnsOut, errors=(401, 404))
async def turns(call: Call[Any, Any]) -> TurnsOut:
    """Turns as run records: outcome, times, usage, steps and retries."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    await off_loop(state.reads.get_session, sid)
    records = await off_loop(run_records, state.reads, sid)
    return TurnsOut(turns=[RunOut.model_validate(r.to_json()) for r in records])


@ops.op(
    "GET", "/sessions/{session_id}/usage", tag="reads", response=SessionUsageOut, errors=(401, 404)
)
async def usage(call: Call[Any, Any]) -> SessionUsageOut:
    """Token usage and cost of the session, in total and per turn."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    row = await off_loop(state.reads.get_session, sid)
    records = await off_loop(run_records, state.reads, sid)
    ratio = None if row.input_tokens <= 0 else round(row.cache_read_tokens / row.input_tokens, 4)
    unpriced = sum(r.unpriced for r in records)
    return SessionUsageOut(
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cost_usd=None if unpriced else row.cost_usd,
        unpriced_requests=unpriced,
        cache_read_tokens=row.cache_read_tokens,
        cache_write_tokens=row.cache_write_tokens,
        cache_hit_ratio=ratio,
        turns=[
            UsageOut(
                input_tokens=r.tokens_in,
                output_tokens=r.tokens_out,
                cost_usd=None if r.unpriced else r.cost_usd,
                unpriced_requests=r.unpriced,
                cache_read_tokens=r.tokens_cache_read,
                cache_write_tokens=r.tokens_cache_write,
                cache_hit_ratio=r.cache_hit_ratio,
            )
            for r in records
        ],
    )


@ops.op(
    "GET",
    "/sessions/{session_id}/receipts",
    tag="reads",
    query=SensitiveQuery,
    response=ReceiptsOut,
    errors=(401, 403, 404, 422),
)
async def receipts(call: Call[SensitiveQuery, Any]) -> ReceiptsOut:
    """Prompt receipts: sections with digests and sizes; instruction text only when sensitive."""
    state: ServerState = call.state
    sensitive = call.want_sensitive()
    sid = call.path["session_id"]
    await off_loop(state.reads.get_session, sid)

    def build() -> list[dict[str, object]]:
        return [
            receipt_json(state.reads, r, sensitive=sensitive) for r in state.reads.receipts(sid)
        ]

    rows = await off_loop(build)
    return ReceiptsOut(
        receipts=[ReceiptOut.model_validate(r) for r in rows], redacted=not sensitive
    )


def _media_type(messages: list[Message], digest: str) -> str | None:
    """The media type of a blob a message of the session refers to: a media block's, or plain
    text for the whole output of a tool result the model was given cut (None: no such ref)."""
    for m in messages:
        for block in m.blocks:
            if getattr(block, "ref", None) == digest:
                return str(getattr(block, "media_type", "application/octet-stream"))
            kept = full_output(getattr(block, "metadata", None))
            if kept is not None and kept[0] == digest:
                return "text/plain; charset=utf-8"
    return None


@ops.op(
    "GET",
    "/sessions/{session_id}/media/{digest}",
    tag="reads",
    raw="application/octet-stream",
    errors=(401, 404),
    path_schemas={"digest": DIGEST_SCHEMA},
)
async def media(call: Call[Any, Any]) -> Response:
    """A media blob referenced by a message of the session (and only such a blob)."""
    state: ServerState = call.state
    sid, digest = call.path["session_id"], call.path["digest"]
    return await media_response(state, await off_loop(state.reads.messages, sid), sid, digest)


async def media_response(
    state: ServerState, messages: list[Message], sid: str, digest: str
) -> Response:
    """The blob `digest` when one of `messages` (of session `sid`) references it, served as
    the media route serves it (inline for images, audio and video, else an attachment); a
    404 `ApiError` when none does or the blob is gone. The one rule for the inspector's
    media and a share link's."""
    media_type = _media_type(messages, digest)
    if media_type is None:
        raise ApiError(404, "not_found", f"no media {digest} in session {sid}")
    try:
        data = await off_loop(state.reads.get_blob, digest)
    except NotFoundError:
        raise ApiError(404, "not_found", f"media {digest} is no longer stored") from None
    inline = bool(_INLINE.match(media_type))
    return Response(
        data,
        media_type=media_type if inline else "application/octet-stream",
        headers={
            "Cache-Control": "private, max-age=86400",
            "Content-Security-Policy": "sandbox",
            "Content-Disposition": "inline" if inline else "attachment",
        },
    )
