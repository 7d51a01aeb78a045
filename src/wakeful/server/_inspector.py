"""The web inspector: server-rendered pages (Jinja2, autoescaped) and one small script.

`/ui/` lists sessions (search, filters, pages); `/ui/sessions/{id}` shows the transcript (tool
calls folded, media shown), the pending inbox, turns with outcomes and usage, receipts with
section digests, and a live view that follows the log over SSE, with a box to steer or queue a
prompt and a button to interrupt. A browser logs in once with a token and then holds an
HttpOnly, SameSite=Strict cookie derived from it (see `_auth`); the page's script calls the
JSON API with that cookie and the CSRF header.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import NotFoundError
from ..runner._runs import run_records
from ._api import SESSION_ID
from ._auth import COOKIE
from ._models import ListQuery
from ._redact import receipt_json, redact_message
from ._routes_sessions import search_sessions
from ._state import ServerState, db
from ._views import iso, parts, short

_env = Environment(
    loader=PackageLoader("wakeful.server", "templates"),
    autoescape=select_autoescape(default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters["iso"] = iso
_env.filters["short"] = short
STATIC = {"app.js": "text/javascript", "app.css": "text/css"}
_LOGIN_JS = resources.files("wakeful.server").joinpath("static/login.js").read_text()
_LOGIN_CSS = resources.files("wakeful.server").joinpath("static/login.css").read_text()


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# The login page is served without a credential, so its script and style are inline, allowed
# by hash; everything else loads from /ui/static.
CSP = (
    f"default-src 'self'; img-src 'self' data:; style-src 'self' {_sha(_LOGIN_CSS)}; "
    f"script-src 'self' {_sha(_LOGIN_JS)}; connect-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'"
)


def login_page(error: str | None = None) -> bytes:
    """The login form (served with 401 to any unauthenticated page request)."""
    return (
        _env.get_template("login.html")
        .render(error=error, login_js=_LOGIN_JS, login_css=_LOGIN_CSS)
        .encode()
    )


def _html(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(_env.get_template(name).render(**context), status_code=status)


def _state(request: Request) -> ServerState:
    return request.app.state.wakeful  # type: ignore[no-any-return]


async def login_form(request: Request) -> Response:
    """GET /ui/login."""
    return HTMLResponse(login_page())


async def login(request: Request) -> Response:
    """POST /ui/login: a form with `token`; sets the cookie and goes to the list."""
    body = (await request.body()).decode("utf-8", "replace")
    token = (parse_qs(body).get("token") or [""])[0].strip()
    value = _state(request).tokens.cookie_for(token) if token else None
    if value is None:
        return HTMLResponse(login_page("That token is not valid."), status_code=401)
    response = RedirectResponse("/ui/", status_code=303)
    response.set_cookie(COOKIE, value, httponly=True, samesite="strict", path="/",
                        secure=request.url.scheme == "https")  # fmt: skip
    return response


async def logout(request: Request) -> Response:
    """POST /ui/logout: forget the cookie."""
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


async def index(request: Request) -> Response:
    """GET /ui/: the session list."""
    state = _state(request)
    raw = {k: v for k, v in request.query_params.items() if v != ""}
    try:
        query = ListQuery.model_validate(raw)
    except ValidationError:
        query = ListQuery()
    archived = {"false": False, "true": True, "all": None}[query.archived]
    rows, cursor = await search_sessions(state, query, archived)
    active = set(state.runtime.coordinator.active())
    return _html("list.html", sessions=rows, next_cursor=cursor, query=query, active=active)


async def session_page(request: Request) -> Response:
    """GET /ui/sessions/{session_id}: everything about one session, and its live view."""
    state = _state(request)
    sid = request.path_params["session_id"]
    principal = request.scope.get("wakeful.principal")
    sensitive = request.query_params.get("sensitive") == "1" and bool(principal and principal.sensitive)  # fmt: skip
    if not SESSION_ID.match(sid):
        return _html("missing.html", 404, session_id=sid)
    try:
        row = await db(state.store.get_session, sid)
    except NotFoundError:
        return _html("missing.html", 404, session_id=sid)

    def gather() -> dict[str, Any]:
        store = state.store
        messages = [(seq, m if sensitive else redact_message(m))
                    for seq, m in store.messages_with_seq(sid)]  # fmt: skip
        return {
            "messages": [(seq, m, parts(m, sid)) for seq, m in messages],
            "pending": store.pending(sid),
            "runs": run_records(store, sid),
            "receipts": [receipt_json(store, r, sensitive=sensitive) for r in store.receipts(sid)],
            "work_state": store.work_state(sid),
        }

    data = await db(gather)
    return _html("session.html", row=row, active=state.is_active(sid), sensitive=sensitive,
                 can_sensitive=bool(principal and principal.sensitive), **data)  # fmt: skip


async def static(request: Request) -> Response:
    """GET /ui/static/{name}: the script and the style sheet."""
    name = request.path_params["name"]
    if name not in STATIC:
        return Response("not found", status_code=404, media_type="text/plain")
    data = resources.files("wakeful.server").joinpath(f"static/{name}").read_bytes()
    return Response(data, media_type=STATIC[name], headers={"Cache-Control": "no-cache"})


async def root(request: Request) -> Response:
    """GET /: to the inspector."""
    return RedirectResponse("/ui/", status_code=303)


routes = [
    Route("/", root, methods=["GET"], include_in_schema=False),
    Route("/ui/login", login_form, methods=["GET"], include_in_schema=False),
    Route("/ui/login", login, methods=["POST"], include_in_schema=False),
    Route("/ui/logout", logout, methods=["POST"], include_in_schema=False),
    Route("/ui/", index, methods=["GET"], include_in_schema=False),
    Route("/ui/sessions/{session_id}", session_page, methods=["GET"], include_in_schema=False),
    Route("/ui/static/{name}", static, methods=["GET"], include_in_schema=False),
]
