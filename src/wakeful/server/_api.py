"""A small declarative layer over Starlette: one `Op` per endpoint, validated at the boundary.

Each `Op` names its path, query and body models and its responses; `endpoint()` turns it into a
Starlette route that validates input (bad or too deeply nested JSON -> 400, invalid fields ->
422), calls the handler and maps the error tree to statuses (`NotFoundError` 404, `ConflictError`
409, `UsageError` 422, a retryable `StoreError` — busy, unreachable — 503). The same `Op` list
renders the OpenAPI document, so the two cannot drift.
Invariant: bad input is always a 4xx JSON `ErrorOut` with a reason, never a 500.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import UnionType
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
)

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..errors import ClaimLostError, ConflictError, NotFoundError, StoreError, UsageError
from ..execution import off_loop
from ._auth import BodyTooLargeError, Principal
from ._models import ErrorOut

Q = TypeVar("Q", bound=BaseModel)
B = TypeVar("B", bound=BaseModel)

MAX_JSON_DEPTH = 64  # deeper bodies are refused before validation (no real request nests so)
SESSION_ID = re.compile(r"^[A-Za-z0-9_\-]{1,128}$")
SESSION_ID_SCHEMA = {"type": "string", "pattern": SESSION_ID.pattern}
DIGEST_SCHEMA = {"type": "string", "pattern": "^[0-9a-f]{64}$"}


class ApiError(Exception):
    """An HTTP error with a stable code and a reason, raised by handlers and validation."""

    def __init__(self, status: int, error: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.error = error
        self.reason = reason


# The arguments `JSONResponse.render` gives `json.dumps`, which builds an encoder from them on
# every call; one encoder made once renders the same bytes for less.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


class Json(JSONResponse):
    """A `JSONResponse`, byte for byte, rendered by an encoder made once."""

    def render(self, content: Any) -> bytes:
        """The UTF-8 JSON of `content`, as `JSONResponse.render` makes it."""
        return _ENCODER.encode(content).encode("utf-8")


def error_response(status: int, error: str, reason: str, **headers: str) -> JSONResponse:
    """The JSON body of every error."""
    body = ErrorOut(error=error, reason=reason).model_dump()
    return Json(body, status_code=status, headers=headers or None)


@dataclass
class Call(Generic[Q, B]):
    """What a handler gets: the request, its validated parts and the server state."""

    request: Request
    path: dict[str, str]
    query: Q
    body: B

    @property
    def state(self) -> Any:
        """The `ServerState` of the app."""
        return self.request.app.state.wakeful

    @property
    def principal(self) -> Principal:
        """Who is calling (`principal_of`)."""
        return principal_of(self.request)

    @property
    def sensitive_scope(self) -> bool:
        """Whether the caller's token carries the sensitive scope."""
        principal = self.request.scope.get("wakeful.principal")
        return bool(principal and principal.sensitive)

    def want_sensitive(self) -> bool:
        """`sensitive=true` was asked: allowed only with the scope (else 403)."""
        if not getattr(self.query, "sensitive", False):
            return False
        if not self.sensitive_scope:
            raise ApiError(
                403, "forbidden", "sensitive=true needs a token with the sensitive scope"
            )
        return True


Handler = Callable[[Call[Any, Any]], Awaitable[Response | BaseModel]]


@dataclass
class Op:
    """One endpoint: how it is called, what it answers, and its handler."""

    method: str
    path: str
    op_id: str
    summary: str
    tag: str
    handler: Handler
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    status: int = 200
    response: type[BaseModel] | None = None
    also: dict[int, tuple[str, type[BaseModel] | None]] = field(default_factory=dict)
    errors: tuple[int, ...] = (401, 404, 422)
    stream: bool = False
    # The schema of one Server-Sent Event of a stream and its ids' pattern (None: the log's).
    sse: tuple[dict[str, Any], str] | None = None
    raw: str | None = None  # a non-JSON success media type (e.g. a media blob)
    path_schemas: dict[str, dict[str, str]] = field(default_factory=dict)
    # False: the handler resolves `{session_id}` (a unique prefix) itself, in the worker thread
    # of its own store call, saving a thread hop on a hot route (`POST .../prompt`).
    resolve_id: bool = True
    # The scope a token needs for it ("": `read` for GET, else `drive`; docs/access.md).
    scope: str = ""

    @property
    def needs(self) -> str:
        """The scope a token needs to call this endpoint."""
        return self.scope or ("read" if self.method in ("GET", "HEAD") else "drive")


class Registry:
    """Ops collected by the route modules, in declaration order."""

    def __init__(self, scope: str = "") -> None:
        self.ops: list[Op] = []
        self.scope = scope  # what every op of the module needs, unless one says otherwise

    def op(self, method: str, path: str, **kw: Any) -> Callable[[Handler], Handler]:
        """Decorate a handler as the endpoint `method path`."""

        def wrap(fn: Handler) -> Handler:
            doc = (fn.__doc__ or "").strip().splitlines()
            self.ops.append(
                Op(
                    method,
                    path,
                    op_id=fn.__name__.strip("_"),
                    summary=doc[0] if doc else "",
                    handler=fn,
                    **{"scope": self.scope, **kw},
                )
            )
            return fn

        return wrap


def _body_problem(value: object) -> str | None:
    """Why parsed JSON cannot be taken (None when it can): arrays and objects nested more than
    `MAX_JSON_DEPTH` levels, or a string holding a lone surrogate (a `\\udXXX` escape without
    its pair), which no store can hold as text. Iterative, so any depth is measured."""
    todo: list[tuple[object, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as err:
                return f"holds a lone surrogate (U+{ord(item[err.start]):04X}): not valid Unicode"
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                return f"nests deeper than {MAX_JSON_DEPTH} levels"
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            todo.extend((child, depth + 1) for child in children)
    return None


def _validation_reason(err: ValidationError, where: str) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    extra = f" ({len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{where}{'.' + loc if loc else ''}: {first['msg']}{extra}"


def principal_of(request: Request) -> Principal:
    """Who is calling (the auth middleware put it in the scope; an operator when it did not,
    which only an app without the middleware, in a test, can be)."""
    found = request.scope.get("wakeful.principal")
    return found if isinstance(found, Principal) else Principal("bearer")


def check_scope(principal: Principal, scope: str) -> None:
    """403 with a reason unless the caller's token has `scope`."""
    if scope not in principal.scopes:
        raise ApiError(403, "forbidden", f"this needs a token with the {scope} scope")


async def check_owner(request: Request, principal: Principal, session_id: str) -> None:
    """404 (as for a session that does not exist) unless an admin calls or the caller owns the
    session's root: another user's sessions are not there for them (docs/access.md)."""
    if principal.admin:
        return
    access = request.app.state.wakeful.runtime.store.access
    if await off_loop(access.owner_of, session_id) != principal.user:
        raise ApiError(404, "not_found", f"no session {session_id}")


async def _session_id(op: Op, request: Request, principal: Principal, raw: str) -> str:
    """The session a path names: a unique prefix resolved (404 for none, 422 listing them for
    several; for a non-admin, 404 for several too, so other users' ids stay unseen), owned."""
    if not SESSION_ID.match(raw):
        raise ApiError(404, "not_found", "no such session (malformed id)")
    if not op.resolve_id and principal.admin:
        return raw
    store = request.app.state.wakeful.reads
    try:
        sid: str = await off_loop(store.resolve_session_id, raw)
    except UsageError:
        if principal.admin:
            raise
        raise ApiError(404, "not_found", f"no session {raw}") from None
    await check_owner(request, principal, sid)
    return sid


async def _parse(op: Op, request: Request) -> Call[Any, Any]:
    path = dict(request.path_params)
    principal = principal_of(request)
    if "session_id" in path:  # another user's session is a 404 whatever the scope
        sid = await _session_id(op, request, principal, path["session_id"])
        if op.resolve_id:
            path["session_id"] = sid
    check_scope(principal, op.needs)
    query: Any = None
    if op.query is not None:
        params = dict(request.query_params.multi_items())
        try:
            query = op.query.model_validate(params)
        except ValidationError as err:
            raise ApiError(422, "invalid", _validation_reason(err, "query")) from None
    body: Any = None
    if op.body is not None:
        raw = await request.body()
        try:
            data = json.loads(raw) if raw.strip() else {}
        except (ValueError, UnicodeDecodeError):
            raise ApiError(400, "bad_json", "the request body is not valid JSON") from None
        except RecursionError:  # the parser recurses per level: thousands of levels end it
            raise ApiError(
                400, "bad_json", f"the request body nests deeper than {MAX_JSON_DEPTH} levels"
            ) from None
        if (problem := _body_problem(data)) is not None:
            raise ApiError(400, "bad_json", f"the request body {problem}")
        try:
            body = op.body.model_validate(data)
        except ValidationError as err:
            raise ApiError(422, "invalid", _validation_reason(err, "body")) from None
    return Call(request, path, query, body)


def _mapped(err: Exception) -> JSONResponse | None:
    if isinstance(err, ApiError):
        return error_response(err.status, err.error, err.reason)
    if isinstance(err, BodyTooLargeError):
        return error_response(413, "too_large", "the request body is over the size limit")
    if isinstance(err, NotFoundError):
        return error_response(404, "not_found", str(err))
    if isinstance(err, ConflictError | ClaimLostError):
        return error_response(409, "conflict", str(err))
    if isinstance(err, StoreError) and err.retryable:  # busy, or the database is unreachable
        return error_response(503, "busy", str(err), **{"Retry-After": "1"})
    if isinstance(err, UsageError):
        return error_response(422, "invalid", str(err))
    return None


_SCALARS = (str, int, bool, type(None))


@functools.cache
def plain_json(tp: Any) -> bool:
    """Whether pydantic's own JSON of values of type `tp` is, byte for byte, what `Json` renders
    of their `model_dump(mode="json")`: strings, integers, booleans, nulls, literals of those,
    lists and unions of them, and models made only of them. Not floats (pydantic writes `1e-7`
    where `json` writes `1e-07`) nor free-form JSON (it may hold floats); those go through
    `Json`. Both escape the same characters the same way (`"`, `\\`, controls as `\\n` or `\\u001f`)."""
    origin = get_origin(tp)
    if origin is Annotated:
        return plain_json(get_args(tp)[0])
    if origin is Literal:
        return all(isinstance(arg, _SCALARS) for arg in get_args(tp))
    if origin in (Union, UnionType, list):
        return all(plain_json(arg) for arg in get_args(tp))
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return not tp.model_computed_fields and all(
            plain_json(cast(Any, f.annotation)) for f in tp.model_fields.values()
        )
    return tp in _SCALARS


def respond(model: BaseModel, status: int = 200) -> Response:
    """A JSON response from a response model: the bytes of `Json`, made by pydantic in one step
    when that gives the same bytes (`plain_json`)."""
    if plain_json(type(model)):
        body = model.__pydantic_serializer__.to_json(model)
        return Response(body, status_code=status, media_type="application/json")
    return Json(model.model_dump(mode="json"), status_code=status)


class Endpoint:
    """The ASGI app of one `Op`.

    A class, not a function: Starlette routes to an ASGI app as it is, where it would wrap a
    function in `request_response` (a closure and an exception handler more per request; the
    app's `ExceptionMiddleware` maps the same exceptions with the same handlers anyway)."""

    def __init__(self, op: Op) -> None:
        self.op = op

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request: parse, call the handler, map its errors (module docstring)."""
        response = await self.handle(Request(scope, receive, send))
        await response(scope, receive, send)

    async def handle(self, request: Request) -> Response:
        """The response to `request`."""
        op = self.op
        try:
            call = await _parse(op, request)
            result = await op.handler(call)
        except Exception as err:
            mapped = _mapped(err)
            if mapped is None:
                raise
            return mapped
        if isinstance(result, Response):
            return result
        return respond(result, op.status)


def endpoint(op: Op) -> Route:
    """The Starlette route of `op`."""
    return Route(op.path, Endpoint(op), methods=[op.method], name=op.op_id)
