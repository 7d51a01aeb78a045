"""Users' tokens over the API (`/admin/tokens`, the admin scope) and who the caller is
(`GET /whoami`); docs/access.md. A token's text is in the answer that creates it, and nowhere
else: listings show ids, users and scopes."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ..execution import off_loop, parse_interval
from ..store import SCOPES, UserToken, check_user_name, parse_scopes
from ._api import Call, Registry
from ._models import _In, _Out
from ._state import ServerState

ops = Registry()


class TokenIn(_In):
    """A new token: its user (made on first use), scopes, an optional label and how long it
    lasts (`expires`; none: until revoked)."""

    user: str = Field(min_length=1, max_length=64)
    scopes: list[str] = Field(min_length=1, description=f"Of {', '.join(SCOPES)}.")
    label: str | None = Field(None, max_length=200)
    expires: str | None = Field(
        None, max_length=16, description="Refused after this long: 30m, 24h, 7d (null: never)."
    )


class TokenOut(_Out):
    """A token as listed: never its text."""

    id: str
    user: str
    scopes: list[str]
    label: str | None
    created_ms: int
    expires_ms: int | None
    revoked_ms: int | None


class TokensOut(_Out):
    """Every token, oldest first (revoked ones too)."""

    tokens: list[TokenOut]


class NewTokenOut(_Out):
    """A token just made, and its text: shown this once, stored only as a hash."""

    token: TokenOut
    secret: str


class WhoamiOut(_Out):
    """The caller: their user (null: an operator token), scopes, and whether they are admin."""

    user: str | None
    scopes: list[str]
    admin: bool


def token_out(token: UserToken) -> TokenOut:
    """The API shape of a token."""
    return TokenOut.model_validate(token.to_json())


@ops.op("GET", "/whoami", tag="access", response=WhoamiOut, errors=(401,))
async def whoami(call: Call[Any, Any]) -> WhoamiOut:
    """Who the caller's token belongs to, and its scopes."""
    p = call.principal
    ordered = [s for s in SCOPES if s in p.scopes]
    return WhoamiOut(user=p.user, scopes=ordered, admin=p.admin)


@ops.op("GET", "/admin/tokens", tag="access", response=TokensOut, errors=(401, 403), scope="admin")
async def list_tokens(call: Call[Any, Any]) -> TokensOut:
    """Every user's tokens (ids, users, scopes; never a token's text)."""
    state: ServerState = call.state
    found = await off_loop(state.runtime.store.access.tokens)
    return TokensOut(tokens=[token_out(t) for t in found])


@ops.op(
    "POST",
    "/admin/tokens",
    tag="access",
    body=TokenIn,
    status=201,
    response=NewTokenOut,
    errors=(400, 401, 403, 413, 422),
    scope="admin",
)
async def create_token(call: Call[Any, TokenIn]) -> NewTokenOut:
    """Make a token for a user; its text is in this answer only."""
    state: ServerState = call.state
    b = call.body
    scopes = parse_scopes(",".join(b.scopes))  # UsageError (422): an unknown scope
    access = state.runtime.store.access
    expires_ms = None if b.expires is None else access.clock.now_ms() + parse_interval(b.expires)
    token, secret = await off_loop(
        access.create_token, check_user_name(b.user), scopes, label=b.label, expires_ms=expires_ms
    )
    return NewTokenOut(token=token_out(token), secret=secret)


@ops.op(
    "DELETE",
    "/admin/tokens/{token_id}",
    tag="access",
    response=TokenOut,
    errors=(401, 403, 404),
    scope="admin",
    path_schemas={"token_id": {"type": "string", "pattern": "^tok_[0-9a-f]{16}$"}},
)
async def revoke_token(call: Call[Any, Any]) -> TokenOut:
    """Revoke a token: it is refused from the next request on."""
    state: ServerState = call.state
    token = await off_loop(state.runtime.store.access.revoke_token, call.path["token_id"])
    return token_out(token)
