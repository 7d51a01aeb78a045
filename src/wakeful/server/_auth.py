"""Bearer-token authentication, the inspector's login cookie, and the request size limit.

Invariant: every request except `GET /health`, the login page and a share link's pages (with
the static code and styles they load) carries a valid credential before any handler runs.
Tokens are compared in constant time (SHA-256 of both sides through `hmac.compare_digest`,
against every configured token without stopping early). The inspector's
cookie is an HMAC derived from a token, never the token itself; a cookie-authenticated request
that changes state must also send `X-Wakeful-CSRF: 1`, a header no cross-site form can set.
The operator tokens (`Tokens`) are checked first, in memory; a token that is none of them is
looked up by its SHA-256 among the users' tokens in the store (`store/_access.py`), so a revoked
one fails from the next request on (docs/access.md).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import UsageError
from ..execution import off_loop
from ..store import OPERATOR_ACTOR, Access, UserToken, cookie_digest, token_digest

COOKIE = "wakeful_session"
CSRF_HEADER = b"x-wakeful-csrf"
OPEN_ROUTES = {("GET", "/health"), ("HEAD", "/health"), ("GET", "/ui/login"), ("POST", "/ui/login")}
# A share link's page, its form and its view: they check the link themselves (`_shares.py`).
OPEN_ROUTES |= {("GET", "/ui/share"), ("POST", "/ui/share"), ("GET", "/ui/shared")}
OPEN_ROUTES |= {("GET", "/ui/shared/log")}
# A share link's media (`/ui/shared/media/{digest}`): checked against the link's messages.
OPEN_PREFIXES = {("GET", "/ui/shared/media/")}
# The code and styles those pages load (no session data; the same for every server).
OPEN_ROUTES |= {("GET", f"/ui/static/{name}") for name in ("app.css", "share.js", "shared.js")}
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
OPERATOR = frozenset({"read", "drive", "approve", "admin"})
"""The scopes of an operator token (`--token`, `WAKEFUL_SERVER_TOKEN`, the token file); a
sensitive operator token has `sensitive` too (docs/access.md)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: their scopes, their user (None: an operator token) and how the token
    was presented."""

    via: str  # "bearer" or "cookie"
    scopes: frozenset[str] = OPERATOR
    user: str | None = None
    token_id: str | None = None

    @property
    def sensitive(self) -> bool:
        """Whether the token has the sensitive scope."""
        return "sensitive" in self.scopes

    @property
    def admin(self) -> bool:
        """Whether the token has the admin scope: it sees and touches every session."""
        return "admin" in self.scopes

    @property
    def name(self) -> str:
        """The caller as the log records them (`actor`): the user, or `operator`."""
        return self.user or OPERATOR_ACTOR


def user_principal(token: UserToken, via: str) -> Principal:
    """The principal of a user's token from the store."""
    return Principal(via, frozenset(token.scopes), token.user, token.id)


def _h(value: str) -> bytes:
    return token_digest(value)


class Tokens:
    """The configured tokens: standard ones, and those with the `sensitive` scope."""

    def __init__(self, standard: list[str], sensitive: list[str] | None = None) -> None:
        tokens = [*standard, *(sensitive or [])]
        if not tokens:
            raise UsageError("the server needs at least one token")
        for token in tokens:
            if len(token) < 8 or any(c.isspace() for c in token):
                raise UsageError("a server token needs 8 or more characters and no spaces")
        self._entries = [(_h(t), False) for t in standard] + [
            (_h(t), True) for t in sensitive or []
        ]
        self._cookies = [(self._cookie_digest(t), s) for t, s in self._entries]

    @staticmethod
    def _cookie_digest(token_hash: bytes) -> bytes:
        return cookie_digest(token_hash)

    @staticmethod
    def _match(presented: bytes, entries: list[tuple[bytes, bool]]) -> bool | None:
        found: bool | None = None
        for digest, sensitive in entries:  # no early exit: the time does not depend on which
            if hmac.compare_digest(presented, digest):
                found = sensitive if found is None else (found or sensitive)
        return found

    def check(self, token: str) -> Principal | None:
        """The principal of a bearer token, or None when it matches no configured token."""
        sensitive = self._match(_h(token), self._entries)
        return None if sensitive is None else _operator(sensitive, "bearer")

    def cookie_for(self, token: str) -> str | None:
        """The inspector cookie value for a valid token (None for an invalid one)."""
        if self.check(token) is None:
            return None
        return self._cookie_digest(_h(token)).hex()

    def check_cookie(self, value: str) -> Principal | None:
        """The principal of an inspector cookie value."""
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            return None
        sensitive = self._match(raw, self._cookies)
        return None if sensitive is None else _operator(sensitive, "cookie")


def _operator(sensitive: bool, via: str) -> Principal:
    return Principal(via, OPERATOR | {"sensitive"} if sensitive else OPERATOR)


def new_token() -> str:
    """A fresh random token (URL-safe, 256 bits)."""
    return secrets.token_urlsafe(32)


def load_or_create_token(path: Path) -> tuple[str, bool]:
    """The token stored at `path`, or a new one written there (mode 0600); and whether it is new."""
    try:
        token = path.read_text(encoding="utf-8").strip()
        if token:
            return token, False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    token = new_token()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token, True


def route_path(scope: Scope) -> str:
    """The request's path below the app's mount point (`root_path`): what the routes match.

    Mounted under a prefix (or behind a proxy that says so with `root_path`), `path` holds the
    prefix too; the open routes and the login page are known by their path inside the app.
    """
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def _send_json(
    send: Send, status: int, error: str, reason: str, extra: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps({"error": error, "reason": reason}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + extra})
    await send({"type": "http.response.body", "body": body})


def cookie_value(scope: Scope) -> str | None:
    """The inspector cookie the request carries, or None."""
    cookie = _header(scope, b"cookie")
    if not cookie:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(cookie)
    except Exception:  # a malformed Cookie header is no credential
        return None
    return jar[COOKIE].value if COOKIE in jar else None


def _open(method: str, path: str) -> bool:
    """Whether `method path` is served without a credential (`OPEN_ROUTES`, `OPEN_PREFIXES`)."""
    if (method, path) in OPEN_ROUTES:
        return True
    # one segment after the prefix: `..` or a second `/` reaches nothing else
    return any(
        method == m and path.startswith(p) and "/" not in path[len(p) :] and ".." not in path
        for m, p in OPEN_PREFIXES
    )


class AuthMiddleware:
    """Reject unauthenticated requests (401) before routing; record the principal in the scope."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: Tokens,
        login_page: Callable[[str, str], bytes],
        users: Access | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.login_page = login_page
        self.users = users  # the store's users' tokens (None: operator tokens only)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _open(scope["method"], route_path(scope)):
            await self.app(scope, receive, send)
            return
        principal = await self._principal(scope)
        if not isinstance(principal, Principal):
            await self._unauthorized(scope, send, principal)
            return
        if (
            principal.via == "cookie"
            and scope["method"] not in SAFE_METHODS
            and _header(scope, CSRF_HEADER) != "1"
        ):
            await _send_json(
                send,
                403,
                "forbidden",
                "cookie requests that change state need X-Wakeful-CSRF: 1",
                [],
            )
            return
        scope["wakeful.principal"] = principal
        await self.app(scope, receive, send)

    async def _principal(self, scope: Scope) -> Principal | str | None:
        """The caller; else why their user token is refused (revoked, expired), or None when
        the request carries no credential that names one."""
        auth = _header(scope, b"authorization")
        if auth is not None:
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer":
                return None
            found = self.tokens.check(token.strip())
            if found is not None or self.users is None:
                return found
            return await self._held("bearer", digest=_h(token.strip()))
        value = cookie_value(scope)
        if value is None:
            return None
        found = self.tokens.check_cookie(value)
        if found is not None or self.users is None:
            return found
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            return None
        return await self._held("cookie", cookie=raw)

    async def _held(self, via: str, **key: bytes) -> Principal | str | None:
        """A user's token from the store, as a principal or the reason it is refused."""
        assert self.users is not None
        held = await off_loop(self.users.find_token, **key)
        if held is None:
            return None
        refused = held.refusal(self.users.clock.now_ms())
        return refused if refused is not None else user_principal(held, via)

    async def _unauthorized(self, scope: Scope, send: Send, refused: str | None) -> None:
        path = route_path(scope)
        if scope["method"] == "GET" and (path == "/" or path.startswith("/ui/")):
            query = bytes(scope.get("query_string", b"")).decode("latin-1")
            asked = path + (f"?{query}" if query else "")  # where the login returns to
            body = self.login_page(scope.get("root_path", ""), asked)
            headers = [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        reason = "a valid bearer token is required (Authorization: Bearer TOKEN)"
        if refused is not None:  # a user's token the store holds: say why it no longer works
            reason = f"{refused}; {reason}"
        await _send_json(
            send, 401, "unauthorized", reason, [(b"www-authenticate", b'Bearer realm="wakeful"')]
        )


class BodyTooLargeError(Exception):
    """The request body is over the configured limit."""


class BodyLimitMiddleware:
    """Answer 413 to a request whose body is over `max_bytes` (declared or actually sent)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await _send_json(send, 400, "bad_request", "malformed Content-Length", [])
                return
            if int(declared) > self.max_bytes:
                await self._too_large(send)
                return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLargeError
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLargeError:
            if started:
                raise
            await self._too_large(send)

    async def _too_large(self, send: Send) -> None:
        reason = f"the request body is over the limit of {self.max_bytes} bytes"
        await _send_json(send, 413, "too_large", reason, [(b"connection", b"close")])
