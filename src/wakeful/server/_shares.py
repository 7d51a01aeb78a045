"""Share links: a read-only, expiring, revocable view of one session (or one turn of it) that
opens without a token (docs/access.md, "Share links").

The API makes, lists and revokes links (`/sessions/{id}/shares`, `DELETE /shares/{id}`). The
link is `/ui/share#SECRET`: the secret rides in the fragment, which no browser sends, so it is
in no access log; the page's script posts it to `POST /ui/share`, which sets a cookie holding
it (HttpOnly, SameSite=Strict, path `/ui/shared`) and sends the browser to `/ui/shared`, the
view, and `/ui/shared/log`, its live log. Invariant: every request of the view and every
`CHECK_S` of its open stream looks the link up again, so a revoked or expired link shows
nothing more and its followers are cut within `CHECK_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs

from pydantic import Field
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ..clock import SystemClock
from ..errors import NotFoundError
from ..execution import off_loop, parse_interval
from ..messages import Message
from ..store import ShareLink, TurnRow
from ._api import ApiError, Call, Registry, check_owner
from ._auth import _header
from ._models import _In, _Out
from ._redact import event_json, redact_message
from ._routes_reads import media_response
from ._state import ServerState

ops = Registry()
SHARE_COOKIE = "wakeful_share"
CHECK_S = 1.0  # how often an open stream looks its link up again
_DIGEST = re.compile(r"[0-9a-f]{64}")  # a blob's SHA-256, as the media routes take it
DEFAULT_EXPIRES = "24h"
MAX_EXPIRES_MS = 90 * 86_400_000


class ShareIn(_In):
    """A new link: to the whole session, or to one turn (`turn_id`), expiring after `expires`."""

    turn_id: str | None = Field(None, max_length=64)
    expires: str = Field(DEFAULT_EXPIRES, max_length=16, description="30m, 24h, 7d (<= 90d).")


class ShareOut(_Out):
    """A share link as listed: never its secret."""

    id: str
    session_id: str
    turn_id: str | None
    created_by: str | None
    created_ms: int
    expires_ms: int
    revoked_ms: int | None


class NewShareOut(_Out):
    """A link just made: its secret and the page's path (shown this once, stored as a hash)."""

    share: ShareOut
    secret: str
    path: str = Field(description="The page to open: the app's `/ui/share#` and the secret.")


class SharesOut(_Out):
    """A session's links, oldest first (revoked ones too)."""

    shares: list[ShareOut]


def share_out(link: ShareLink) -> ShareOut:
    """The API shape of a link."""
    return ShareOut.model_validate(link.to_json())


@ops.op(
    "POST",
    "/sessions/{session_id}/shares",
    tag="access",
    body=ShareIn,
    status=201,
    response=NewShareOut,
    errors=(400, 401, 403, 404, 413, 422),
)
async def create_share(call: Call[Any, ShareIn]) -> NewShareOut:
    """Make a read-only link to the session (or one turn of it) that needs no token."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    ttl = parse_interval(call.body.expires)  # UsageError (422): not a period
    if ttl > MAX_EXPIRES_MS:
        raise ApiError(422, "invalid", "a share link lasts at most 90d")
    turn = call.body.turn_id
    if turn is not None and turn not in {
        t.turn_id for t in await off_loop(state.runtime.store.turns, sid)
    }:
        raise NotFoundError(f"no turn {turn} in {sid}")
    link, secret = await off_loop(
        state.runtime.store.access.create_share,
        sid,
        expires_ms=SystemClock().now_ms() + ttl,
        turn_id=turn,
        by=call.principal.name,
    )
    base = call.request.scope.get("root_path", "")
    return NewShareOut(share=share_out(link), secret=secret, path=f"{base}/ui/share#{secret}")


@ops.op("GET", "/sessions/{session_id}/shares", tag="access", response=SharesOut, errors=(401, 404))
async def list_shares(call: Call[Any, Any]) -> SharesOut:
    """The session's share links (never their secrets)."""
    state: ServerState = call.state
    found = await off_loop(state.runtime.store.access.shares, call.path["session_id"])
    return SharesOut(shares=[share_out(s) for s in found])


@ops.op(
    "DELETE",
    "/shares/{share_id}",
    tag="access",
    response=ShareOut,
    errors=(401, 403, 404),
    path_schemas={"share_id": {"type": "string", "pattern": "^shr_[0-9a-f]{16}$"}},
)
async def revoke_share(call: Call[Any, Any]) -> ShareOut:
    """Revoke a link: its page shows nothing more and its open streams end."""
    access = call.state.runtime.store.access
    link = await off_loop(access.share, call.path["share_id"])
    try:
        await check_owner(call.request, call.principal, link.session_id)
    except ApiError:  # another user's link is not there for them
        raise NotFoundError(f"no share link {link.id}") from None
    return share_out(await off_loop(access.revoke_share, link.id))


# -- the page -----------------------------------------------------------------------------


def _state(request: Request) -> ServerState:
    return request.app.state.wakeful  # type: ignore[no-any-return]  # Starlette's app.state is Any


async def _link(request: Request) -> ShareLink | None:
    """The live link the request's share cookie names, else None."""
    from http.cookies import SimpleCookie

    raw = _header(request.scope, b"cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    with contextlib.suppress(Exception):
        jar.load(raw)
    if SHARE_COOKIE not in jar:
        return None
    found: ShareLink | None = await off_loop(
        _state(request).runtime.store.access.share_by, jar[SHARE_COOKIE].value
    )
    return found


async def share_page(request: Request) -> Response:
    """GET /ui/share: the page whose script posts the fragment's secret (module docstring)."""
    from ._inspector import _html

    return _html(request, "share.html", who=None)


async def share_open(request: Request) -> Response:
    """POST /ui/share: a form with `secret`; sets the share cookie and goes to the view."""
    from ._inspector import _base, _html

    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    secret = (form.get("secret") or [""])[0].strip()
    link = await off_loop(_state(request).runtime.store.access.share_by, secret) if secret else None
    if link is None:
        return _html(request, "missing.html", 404, session_id="shared link", who=None)
    response = RedirectResponse(f"{_base(request)}/ui/shared", status_code=303)
    response.set_cookie(
        SHARE_COOKIE,
        secret,
        httponly=True,
        samesite="strict",
        path=f"{_base(request)}/ui/shared",
        secure=request.url.scheme == "https",
        max_age=max(1, (link.expires_ms - SystemClock().now_ms()) // 1000),
    )
    return response


async def shared_view(request: Request) -> Response:
    """GET /ui/shared: the linked session (or turn), read-only and redacted."""
    from ._inspector import _base, _html
    from ._views import transcript

    link = await _link(request)
    if link is None:
        return _html(request, "missing.html", 404, session_id="shared link", who=None)
    state = _state(request)
    sid = link.session_id

    def gather() -> dict[str, Any]:
        return {"row": state.reads.get_session(sid), "messages": _shown(state, link)}

    data = await off_loop(gather)
    media = f"{_base(request)}/ui/shared/media"
    return _html(
        request,
        "shared.html",
        who=None,
        link=link,
        row=data["row"],
        messages=transcript(data["messages"], media),
    )


def _shown(state: ServerState, link: ShareLink) -> list[tuple[int, Message]]:
    """The messages the link shows, with their seqs: the session's, or its turn's, redacted
    as for a token without the sensitive scope."""
    sid = link.session_id
    span = None if link.turn_id is None else _span(state.runtime.store.turns(sid), link.turn_id)
    return [
        (seq, redact_message(m))
        for seq, m in state.reads.messages_with_seq(sid)
        if span is None or span[0] < seq <= span[1]
    ]


async def shared_media(request: Request) -> Response:
    """GET /ui/shared/media/{digest}: an image (or a cut tool output) that a message the link
    shows references; nothing else, whatever the digest (404)."""
    link = await _link(request)
    digest = request.path_params["digest"]
    if link is None or not _DIGEST.fullmatch(digest):
        return Response("this link is revoked, expired or unknown", 404, media_type="text/plain")
    state = _state(request)
    shown = await off_loop(_shown, state, link)
    try:
        return await media_response(state, [m for _, m in shown], link.session_id, digest)
    except ApiError as err:
        return Response(err.reason, err.status, media_type="text/plain")


def _span(turns: list[TurnRow], turn_id: str) -> tuple[int, int]:
    """The log seqs a turn's messages lie in (after the previous turn's end, through its own):
    its input is delivered just before it starts."""
    for i, turn in enumerate(turns):
        if turn.turn_id == turn_id:
            after = (turns[i - 1].ended_seq or turns[i - 1].started_seq) if i else 0
            return after, turn.ended_seq if turn.ended_seq is not None else 1 << 62
    return 0, -1  # gone (a rewind dropped it): nothing


async def shared_log(request: Request) -> Response:
    """GET /ui/shared/log: the linked session's durable events after `after` as SSE that
    follows, cut when the link is revoked or expires (module docstring)."""
    link = await _link(request)
    if link is None:
        return Response("this link is revoked, expired or unknown", 404, media_type="text/plain")
    state = _state(request)
    after = int(request.query_params.get("after", "0") or 0)
    return EventSourceResponse(
        _follow(state, link, after),
        ping=state.settings.keepalive_s,
        send_timeout=state.settings.send_timeout_s,
        headers={"Cache-Control": "no-store"},
    )


async def _still(state: ServerState, link: ShareLink) -> bool:
    found = await off_loop(state.runtime.store.access.share, link.id)
    return found.revoked_ms is None and found.expires_ms > SystemClock().now_ms()


async def _follow(
    state: ServerState, link: ShareLink, after: int
) -> AsyncIterator[ServerSentEvent]:
    """The session's events after `after`, then as they come, while the link holds."""
    sub = await state.hub.subscribe(link.session_id)
    last = after
    try:
        while await _still(state, link):
            batch = await off_loop(state.reads.events, link.session_id, last, limit=200)
            for ev in batch:
                last = ev.seq
                yield ServerSentEvent(
                    data=json.dumps(event_json(ev, sensitive=False)), id=str(last)
                )
            if batch:
                continue
            with contextlib.suppress(TimeoutError):  # a nudge, or the next look at the link
                await asyncio.wait_for(sub.queue.get(), CHECK_S)
            while not sub.queue.empty():
                sub.queue.get_nowait()
        yield ServerSentEvent(data=json.dumps({"reason": "revoked or expired"}), event="closed")
    finally:
        state.hub.unsubscribe(sub)


routes = [
    Route("/ui/share", share_page, methods=["GET"], include_in_schema=False),
    Route("/ui/share", share_open, methods=["POST"], include_in_schema=False),
    Route("/ui/shared", shared_view, methods=["GET"], include_in_schema=False),
    Route("/ui/shared/log", shared_log, methods=["GET"], include_in_schema=False),
    Route("/ui/shared/media/{digest}", shared_media, methods=["GET"], include_in_schema=False),
]
