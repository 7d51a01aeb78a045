"""The web inspector: server-rendered pages (Jinja2, autoescaped) and small scripts.

`/ui/` lists sessions title first (model, local times, usage), searches their content, and
creates one; `/ui/schedules` lists schedules with their next fire (add, pause, resume,
delete); `/ui/usage` charts tokens and cost by day, session, agent, model or user;
`/ui/sessions/{id}` shows the transcript (each tool call with its result, an
`edit_file` as a diff, media shown), the pending inbox, tokens and cost per turn as a chart and a
table, receipts with section digests, and a live view that follows the log over SSE, with a box
to steer or queue a prompt and a button to interrupt. A browser logs in once with a token and
then holds an HttpOnly, SameSite=Strict cookie derived from it (see `_auth`); the scripts call
the JSON API with that cookie and the CSRF header.

Every link, asset, redirect and API call is made under the app's mount prefix (`root_path`),
so the inspector works mounted under a path as well as at the root.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import NotFoundError, UsageError
from ..execution import off_loop
from ..messages import speaker
from ..runner import run_records
from ..store import cookie_digest, token_digest
from ._api import SESSION_ID, ApiError, check_owner, principal_of
from ._auth import COOKIE
from ._models import ListQuery
from ._owned import Found
from ._redact import receipt_json, redact_message
from ._routes_schedules import schedule_out
from ._routes_sessions import search_sessions
from ._state import ServerState
from ._views import KEY_ARGS, iso, receipt_changes, short, transcript

_env = Environment(
    loader=PackageLoader("wakeful.server", "templates"),
    autoescape=select_autoescape(default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters["iso"] = iso
_env.filters["short"] = short
_env.filters["speaker"] = lambda m: speaker(m.role, m.metadata)  # a `Message` of `transcript`
STATIC = {
    "app.js": "text/javascript",
    "list.js": "text/javascript",
    "session.js": "text/javascript",
    "schedules.js": "text/javascript",
    "share.js": "text/javascript",
    "shared.js": "text/javascript",
    "app.css": "text/css",
}
_LOGIN_JS = resources.files("wakeful.server").joinpath("static/login.js").read_text()
_LOGIN_CSS = resources.files("wakeful.server").joinpath("static/login.css").read_text()


ARTIFACTS_SHOWN = 200  # the artifacts panel shows at most this many, newest first


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# The login page is served without a credential, so its script and style are inline, allowed
# by hash; everything else loads from /ui/static.
CSP = (
    f"default-src 'self'; img-src 'self' data:; style-src 'self' {_sha(_LOGIN_CSS)}; "
    f"script-src 'self' {_sha(_LOGIN_JS)}; connect-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'"
)


def login_page(base: str = "", next_path: str = "", error: str | None = None) -> bytes:
    """The login form (served with 401 to any unauthenticated page request); `base` is the
    app's mount prefix, `next_path` the page asked for (inside the app), where a successful
    login goes (`safe_next` decides whether it may)."""
    page = _env.get_template("login.html").render(
        error=error,
        login_js=_LOGIN_JS,
        login_css=_LOGIN_CSS,
        base=base,
        next_path=safe_next(next_path),
    )
    return page.encode()


def safe_next(path: str) -> str:
    """`path` when a login may return to it: an inspector page of this app ("/ui/..." with its
    query, not the login page itself), never another site; else ""."""
    parts = urlsplit(path)
    if (
        parts.scheme
        or parts.netloc
        or not path.startswith("/ui/")
        or "\\" in path
        or parts.path.startswith(("/ui/login", "/ui/logout", "/ui/static/"))
        or any(ord(c) < 32 for c in path)
    ):
        return ""
    return path


def _base(request: Request) -> str:
    """The app's mount prefix ("" at the root)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _html(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page of the inspector, told who is signed in (`who`; None on a share link's pages)."""
    context.setdefault("who", principal_of(request))
    page = _env.get_template(name).render(base=_base(request), **context)
    return HTMLResponse(page, status_code=status)


def _state(request: Request) -> ServerState:
    return request.app.state.wakeful  # type: ignore[no-any-return]  # Starlette types app.state as Any


async def cookie_for(state: ServerState, token: str) -> str | None:
    """The inspector cookie of a valid token, an operator's or a user's (else None)."""
    value = state.tokens.cookie_for(token)
    if value is not None:
        return value
    held = await off_loop(state.runtime.store.access.token_by, digest=token_digest(token))
    return None if held is None else cookie_digest(token_digest(token)).hex()


async def login_form(request: Request) -> Response:
    """GET /ui/login."""
    return HTMLResponse(login_page(_base(request), request.query_params.get("next", "")))


async def login(request: Request) -> Response:
    """POST /ui/login: a form with `token` (and `next`, the page asked for); sets the cookie
    and goes to that page, else to the list."""
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = (form.get("token") or [""])[0].strip()
    next_path = safe_next((form.get("next") or [""])[0])
    value = await cookie_for(_state(request), token) if token else None
    if value is None:
        page = login_page(_base(request), next_path, "That token is not valid.")
        return HTMLResponse(page, status_code=401)
    response = RedirectResponse(f"{_base(request)}{next_path or '/ui/'}", status_code=303)
    response.set_cookie(
        COOKIE,
        value,
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(request: Request) -> Response:
    """POST /ui/logout: forget the cookie."""
    response = RedirectResponse(f"{_base(request)}/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


async def index(request: Request) -> Response:
    """GET /ui/: the session list, or a search of the sessions' content."""
    state = _state(request)
    raw = {k: v for k, v in request.query_params.items() if v != ""}
    try:
        query = ListQuery.model_validate(raw)
    except ValidationError:
        query = ListQuery()
    archived = {"false": False, "true": True, "all": None}[query.archived]
    problem: str | None = None
    try:
        found = await search_sessions(state, query, archived, principal_of(request))
    except UsageError as err:  # a search without words, a cursor of the other kind
        found, problem = Found([], None), str(err)
    active = set(state.runtime.active())
    return _html(
        request,
        "list.html",
        sessions=found.sessions,
        matches=found.matches,
        next_cursor=found.next_cursor,
        query=query,
        active=active,
        problem=problem,
        default_model=state.runtime.model,
    )


async def session_page(request: Request) -> Response:
    """GET /ui/sessions/{session_id}: everything about one session, and its live view."""
    state = _state(request)
    sid = request.path_params["session_id"]
    principal = request.scope.get("wakeful.principal")
    sensitive = request.query_params.get("sensitive") == "1" and bool(
        principal and principal.sensitive
    )
    if not SESSION_ID.match(sid):
        return _html(request, "missing.html", 404, session_id=sid)
    try:
        full = await off_loop(state.reads.resolve_session_id, sid)
        await check_owner(request, principal_of(request), full)  # another user's: none
    except (NotFoundError, UsageError, ApiError):  # none, or a prefix of several (lists none)
        return _html(request, "missing.html", 404, session_id=sid)
    if full != sid:  # a unique prefix: the page's own address names the session in full
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"{_base(request)}/ui/sessions/{full}{query}", status_code=303)
    row = await off_loop(state.reads.get_session, sid)
    media = f"{_base(request)}/sessions/{sid}/media"

    def gather() -> dict[str, Any]:
        store = state.reads
        messages = [
            (seq, m if sensitive else redact_message(m)) for seq, m in store.messages_with_seq(sid)
        ]
        return {
            "messages": transcript(messages, media),
            "pending": store.pending(sid),
            "runs": run_records(store, sid),
            "receipts": receipt_changes(
                [receipt_json(store, r, sensitive=sensitive) for r in store.receipts(sid)]
            ),
            "work_state": store.work_state(sid),
            "artifacts": store.artifacts(sid, limit=ARTIFACTS_SHOWN),
            "reverted": store.pending_revert(sid),
        }

    data = await off_loop(gather)
    turn_no = {r.id: n for n, r in enumerate(data["runs"], 1)}  # receipts name turns by number
    return _html(
        request,
        "session.html",
        row=row,
        active=state.is_active(sid),
        turn_no=turn_no,
        sensitive=sensitive,
        can_sensitive=bool(principal and principal.sensitive),
        key_args=" ".join(KEY_ARGS),
        **data,
    )


async def schedules_page(request: Request) -> Response:
    """GET /ui/schedules: every schedule with its next and last fire; add, pause, resume,
    delete (the page's script calls the JSON API). Schedules are the admins' (docs/access.md)."""
    if not principal_of(request).admin:
        return _html(request, "missing.html", 404, session_id="schedules")
    found = await off_loop(_state(request).runtime.schedules)
    return _html(request, "schedules.html", schedules=[schedule_out(s) for s in found])


async def eval_page(request: Request) -> Response:
    """GET /ui/evals/{session_id}: an eval or replay run, its table per model and each case's
    results side by side (`wakeful.replay.report`, the data `wakeful eval` prints)."""
    from ..replay import read_run, report

    state = _state(request)
    sid = request.path_params["session_id"]
    if not SESSION_ID.match(sid):
        return _html(request, "missing.html", 404, session_id=sid)
    try:
        full = await off_loop(state.reads.resolve_session_id, sid)
        await check_owner(request, principal_of(request), full)
        view = await off_loop(read_run, state.reads, full)
    except (NotFoundError, UsageError, ApiError):  # none (or not theirs), or not a run
        return _html(request, "missing.html", 404, session_id=sid)
    if full != sid:
        return RedirectResponse(f"{_base(request)}/ui/evals/{full}", status_code=303)
    return _html(request, "eval.html", data=report(view))


USAGE_CHART_GROUPS = 60  # the usage chart draws at most this many groups, the latest keys


def usage_bars(
    groups: list[dict[str, Any]], width: int = 720, height: int = 180
) -> list[dict[str, Any]]:
    """The usage chart's bars: per group its input and output tokens as stacked heights (in
    px of `height`, scaled to the largest group) and its x position."""
    shown = groups[-USAGE_CHART_GROUPS:]
    most = max((g["input_tokens"] + g["output_tokens"] for g in shown), default=0) or 1
    slot = width / max(len(shown), 1)
    bar = max(2.0, min(48.0, slot * 0.7))
    scale = (height - 40) / most
    return [
        {
            "key": g["key"],
            "x": round(i * slot + (slot - bar) / 2, 1),
            "w": round(bar, 1),
            "h_in": round(g["input_tokens"] * scale, 1),
            "h_out": round(g["output_tokens"] * scale, 1),
            "group": g,
        }
        for i, g in enumerate(shown)
    ]


async def usage_page(request: Request) -> Response:
    """GET /ui/usage?by=&since=: the usage report (`GET /usage`) as a chart of tokens per
    group and a table with the cost of each."""
    from ._routes_usage import report_for

    by = request.query_params.get("by", "day")
    since = request.query_params.get("since") or None
    try:
        report = await report_for(_state(request), by, since, principal_of(request))
    except UsageError as err:
        return _html(
            request,
            "usage.html",
            422,
            problem=str(err),
            by=by,
            since=since or "",
            data=None,
            bars=[],
        )
    data = report.to_json()
    groups = data["groups"]
    assert isinstance(groups, list)
    bars = usage_bars(groups)
    most = max((b["group"]["input_tokens"] + b["group"]["output_tokens"] for b in bars), default=0)
    return _html(
        request,
        "usage.html",
        by=by,
        since=since or "",
        data=data,
        bars=bars,
        most=most,
        problem=None,
    )


async def static(request: Request) -> Response:
    """GET /ui/static/{name}: the script and the style sheet."""
    name = request.path_params["name"]
    if name not in STATIC:
        return Response("not found", status_code=404, media_type="text/plain")
    data = resources.files("wakeful.server").joinpath(f"static/{name}").read_bytes()
    return Response(data, media_type=STATIC[name], headers={"Cache-Control": "no-cache"})


async def root(request: Request) -> Response:
    """GET /: to the inspector."""
    return RedirectResponse(f"{_base(request)}/ui/", status_code=303)


routes = [
    Route("/", root, methods=["GET"], include_in_schema=False),
    Route("/ui/login", login_form, methods=["GET"], include_in_schema=False),
    Route("/ui/login", login, methods=["POST"], include_in_schema=False),
    Route("/ui/logout", logout, methods=["POST"], include_in_schema=False),
    Route("/ui/", index, methods=["GET"], include_in_schema=False),
    Route("/ui/sessions/{session_id}", session_page, methods=["GET"], include_in_schema=False),
    Route("/ui/schedules", schedules_page, methods=["GET"], include_in_schema=False),
    Route("/ui/evals/{session_id}", eval_page, methods=["GET"], include_in_schema=False),
    Route("/ui/usage", usage_page, methods=["GET"], include_in_schema=False),
    Route("/ui/static/{name}", static, methods=["GET"], include_in_schema=False),
]
