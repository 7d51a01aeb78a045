"""The ASGI app: routes, middleware (security headers, auth, body limit) and the lifespan.

The app drives sessions with the coordinator of the `Runtime` it is given; its lifespan starts
the hub and hooks the runtime's live listener into it. When the app owns the runtime, shutting
down interrupts local drains as a shutdown (their claims stay for the next driver) and closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..execution import Runtime, off_loop
from ..runner import LiveEvent, LiveListener
from ..store import ScheduleFire
from . import (
    _inspector,
    _routes_access,
    _routes_agui,
    _routes_approvals,
    _routes_host,
    _routes_inputs,
    _routes_reads,
    _routes_schedules,
    _routes_sessions,
    _routes_shaping,
    _routes_usage,
    _shares,
    _sse,
)
from ._api import Op, endpoint, error_response
from ._auth import AuthMiddleware, BodyLimitMiddleware, Tokens
from ._hub import Hub
from ._models import HealthOut
from ._openapi import openapi_document
from ._state import ServerState, Settings

log = logging.getLogger("wakeful.server")
OPS: list[Op] = [
    *_routes_sessions.ops.ops,
    *_routes_inputs.ops.ops,
    *_routes_approvals.ops.ops,
    *_routes_reads.ops.ops,
    *_routes_schedules.ops.ops,
    *_sse.ops.ops,
    *_routes_shaping.ops.ops,
    *_routes_host.ops.ops,
    *_routes_agui.ops.ops,
    *_routes_usage.ops.ops,
    *_routes_access.ops.ops,
    *_shares.ops.ops,
]

HOT_OPS = frozenset({"prompt"})  # routed first (see `create_app`)


class SecurityHeaders:
    """Headers every response carries (a response's own CSP, e.g. a media sandbox, wins)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.extra = [
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"x-frame-options", b"DENY"),
        ]
        self.csp = (b"content-security-policy", _inspector.CSP.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                headers += [h for h in self.extra if h[0] not in names]
                if self.csp[0] not in names:
                    headers.append(self.csp)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


async def _health(request: Request) -> Response:
    return JSONResponse(HealthOut(status="ok", version=__version__).model_dump())


async def _openapi(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    reason = (
        f"no route {request.method} {request.url.path}"
        if exc.status_code == 404
        else str(exc.detail)
    )
    headers = dict(exc.headers or {})
    if exc.status_code == 405:  # Starlette names the methods of the first route of the path only
        headers["Allow"] = _allowed(request)
    return error_response(exc.status_code, code, reason, **headers)


def _allowed(request: Request) -> str:
    """Every method some route answers at the request's path (each op is a route of its own)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if (
            isinstance(route, Route)
            and route.methods
            and route.matches(request.scope)[0] != Match.NONE
        ):
            methods |= route.methods
    return ", ".join(sorted(methods))


def _chain(first: LiveListener | None, second: LiveListener) -> LiveListener:
    if first is None:
        return second

    def both(ev: LiveEvent) -> None:
        first(ev)
        second(ev)

    return both


def _waker(state: ServerState) -> Callable[[ScheduleFire], None]:
    """Drive the session a schedule's fire admitted to (a fire that admitted nothing: none)."""

    def on_fire(fire: ScheduleFire) -> None:
        if fire.session_id is not None and fire.outcome in ("fired", "caught_up"):
            state.wake(fire.session_id)

    return on_fire


def _lifespan(
    runtime: Runtime, state: ServerState, hub: Hub, settings: Settings, own_runtime: bool
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """The app's lifespan: the hub started with the runtime's live events chained to it,
    sessions with work woken (`recover`), schedules fired (`schedules`); all undone at the end,
    and the runtime closed when the app owns it."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        previous = runtime.listener
        runtime.listener = _chain(previous, hub.on_live)
        await hub.start()
        if settings.recover:
            for sid in await off_loop(runtime.reads.sessions_with_work):
                state.wake(sid)
        stop = asyncio.Event()
        firing = (
            asyncio.ensure_future(runtime.run_schedules(stop, _waker(state), state.wake))
            if settings.schedules
            else None
        )
        try:
            yield
        finally:
            stop.set()
            if firing is not None:
                await firing
            await hub.stop()
            if own_runtime:
                runtime.shut_down()
                await runtime.aclose()
            runtime.listener = previous

    return lifespan


def create_app(
    runtime: Runtime,
    *,
    tokens: Tokens,
    settings: Settings | None = None,
    own_runtime: bool = False,
) -> Starlette:
    """The server app over `runtime` (see the module docstring)."""
    settings = settings or Settings()
    hub = Hub(runtime.reads, poll_s=settings.poll_ms / 1000)
    state = ServerState(runtime, tokens, settings, hub, own_runtime)

    lifespan = _lifespan(runtime, state, hub, settings, own_runtime)

    # Starlette tries the routes in order: the hot one (`POST .../prompt`) first, ahead of the
    # nine it would follow. No other route matches a path it matches (a test checks that), so
    # the order decides nothing else; the OpenAPI document keeps the order of `OPS`.
    routes: list[Any] = [
        *(endpoint(op) for op in OPS if op.op_id in HOT_OPS),
        Route("/health", _health, methods=["GET"], include_in_schema=False),
        Route("/openapi.json", _openapi, methods=["GET"], include_in_schema=False),
        *(endpoint(op) for op in OPS if op.op_id not in HOT_OPS),
        *_inspector.routes,
        *_shares.routes,
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(
                AuthMiddleware,
                tokens=tokens,
                login_page=_inspector.login_page,
                users=runtime.store.access,
            ),
            Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes),
        ],
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )
    app.state.wakeful = state
    app.state.openapi = openapi_document(OPS)
    return app
