"""Users, their scoped tokens, who owns which session, and share links (`SqlStore.access`).

Invariant: a secret (a token, a share link) is shown once, when it is made, and stored only as
its SHA-256 (`digest`); a token also as its inspector cookie (`cookie_digest`). A session's
owner is recorded on its root, and every session of the tree (children, and forks made by the
server, which records the forked session's owner on the fork) reads it through `root_id`. A
revoked or expired secret matches nothing from the transaction that revoked it on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast, get_args

from .._ids import new_share_id, new_token_id
from ..errors import NotFoundError, UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..clock import Clock
    from ._backend import Backend, Row, Tx

Scope = Literal["read", "drive", "approve", "admin", "sensitive"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
"""Every scope a token may carry (docs/access.md says what each allows)."""

_COOKIE_KEY = b"wakeful-inspector-cookie-v1"
_TOKEN_COLS = "id, user_name, scopes, label, created_ms, expires_ms, revoked_ms"
_SHARE_COLS = "id, session_id, turn_id, created_by, created_ms, expires_ms, revoked_ms"
_DELETION_COLS = "session_id, parent_id, owner, actor, deleted_ms, how"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.@-")


def token_digest(secret: str) -> bytes:
    """The SHA-256 of a token's text: what the store keeps and what a request is matched by."""
    import hashlib  # loaded on first use, not with the store (cold start, issue 25)

    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def cookie_digest(digest: bytes) -> bytes:
    """The inspector cookie of the token with `digest`: an HMAC of the digest, so a cookie
    never holds the token and a token's cookie is known without the token."""
    import hashlib
    import hmac

    return hmac.new(digest, _COOKIE_KEY, hashlib.sha256).digest()


def parse_scopes(text: str) -> tuple[Scope, ...]:
    """`read,drive` as scopes in their canonical order; `UsageError` naming an unknown one."""
    asked = {part.strip() for part in text.split(",") if part.strip()}
    if not asked:
        raise UsageError(f"a token needs at least one scope ({', '.join(SCOPES)})")
    unknown = sorted(asked - set(SCOPES))
    if unknown:
        raise UsageError(f"unknown scope {unknown[0]!r}: the scopes are {', '.join(SCOPES)}")
    return tuple(s for s in SCOPES if s in asked)


def check_user_name(name: str) -> str:
    """`name` when it can name a user (1 to 64 letters, digits, `_ . @ -`, not `operator` or
    `local`), else `UsageError`."""
    if not 1 <= len(name) <= 64 or not set(name) <= _NAME_CHARS:
        raise UsageError(f"bad user name {name!r}: 1 to 64 letters, digits, _ . @ -")
    if name in (OPERATOR_ACTOR, LOCAL_ACTOR):
        raise UsageError(f"{name!r} names another kind of actor in the log; pick another name")
    return name


OPERATOR_ACTOR = "operator"
"""The actor a server's operator token is recorded as (no user may take the name)."""
LOCAL_ACTOR = "local"
"""The actor of the command line and the library, before `:` and the OS user's name (alone
when the system names nobody); no user may take the name either."""


def local_actor() -> str:
    """The actor of the command line and the library: `local:` and the OS user's name (who
    ran the process; `local` when the system names nobody). A user's name has no `:`, so
    neither this nor `operator` can be mistaken for a server's user (docs/access.md)."""
    import getpass

    try:
        return f"{LOCAL_ACTOR}:{getpass.getuser()}"
    except Exception:  # no login name and no passwd entry (a bare container's uid)
        return LOCAL_ACTOR


@dataclass(frozen=True, slots=True)
class UserToken:
    """One token of a user, as listed: never the token's text."""

    id: str
    user: str
    scopes: tuple[Scope, ...]
    label: str | None
    created_ms: int
    expires_ms: int | None
    revoked_ms: int | None

    def refusal(self, now_ms: int) -> str | None:
        """Why the token is refused at `now_ms` (revoked, expired), or None while it is live."""
        if self.revoked_ms is not None:
            return f"the token {self.id} was revoked"
        if self.expires_ms is not None and self.expires_ms <= now_ms:
            return f"the token {self.id} expired at {utc_minute(self.expires_ms)} UTC"
        return None

    def to_json(self) -> dict[str, object]:
        """The token's listing as a JSON-ready dict (the CLI and API contract)."""
        return {
            "id": self.id,
            "user": self.user,
            "scopes": list(self.scopes),
            "label": self.label,
            "created_ms": self.created_ms,
            "expires_ms": self.expires_ms,
            "revoked_ms": self.revoked_ms,
        }


@dataclass(frozen=True, slots=True)
class ShareLink:
    """A read-only link to one session (or one turn of it), as listed: never its secret."""

    id: str
    session_id: str
    turn_id: str | None
    created_by: str | None
    created_ms: int
    expires_ms: int
    revoked_ms: int | None

    def to_json(self) -> dict[str, object]:
        """The link's listing as a JSON-ready dict (the CLI and API contract)."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "created_by": self.created_by,
            "created_ms": self.created_ms,
            "expires_ms": self.expires_ms,
            "revoked_ms": self.revoked_ms,
        }


def utc_minute(ms: int) -> str:
    """Epoch milliseconds as `2026-12-07 06:30` (UTC), as listings and refusals print them."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


@dataclass(frozen=True, slots=True)
class Deletion:
    """What is kept of a deleted session tree (its tombstone): its id, its parent's, its owner,
    who deleted it (`actor`), when, and how (`delete` or `prune`). Nothing of its content."""

    session_id: str
    parent_id: str | None
    owner: str | None
    actor: str | None
    deleted_ms: int
    how: str

    def to_json(self) -> dict[str, object]:
        """The tombstone as a JSON-ready dict (the CLI contract)."""
        return {
            "session_id": self.session_id,
            "parent_id": self.parent_id,
            "owner": self.owner,
            "actor": self.actor,
            "deleted_ms": self.deleted_ms,
            "how": self.how,
        }


def _token(row: Row) -> UserToken:
    scopes = tuple(cast(Scope, s) for s in str(row[2]).split(",") if s)
    return UserToken(str(row[0]), str(row[1]), scopes, row[3], int(row[4]), row[5], row[6])


def _share(row: Row) -> ShareLink:
    return ShareLink(str(row[0]), str(row[1]), row[2], row[3], int(row[4]), int(row[5]), row[6])


class Access:
    """A store's users, tokens, session owners and share links (module docstring)."""

    def __init__(self, backend: Backend, clock: Clock) -> None:
        self.backend = backend
        self.clock = clock

    # -- tokens ----------------------------------------------------------------------------

    def create_token(
        self,
        user: str,
        scopes: tuple[Scope, ...],
        *,
        label: str | None = None,
        expires_ms: int | None = None,
    ) -> tuple[UserToken, str]:
        """A new token of `user` (made on first use) with `scopes`, refused from `expires_ms`
        on (None: until revoked), and its text: the only time the text exists outside the
        caller."""
        check_user_name(user)
        if not scopes:
            raise UsageError(f"a token needs at least one scope ({', '.join(SCOPES)})")
        import secrets

        now = self.clock.now_ms()
        if expires_ms is not None and expires_ms <= now:
            raise UsageError("a token must expire in the future")
        secret = "wk_" + secrets.token_urlsafe(32)
        digest = token_digest(secret)
        token = UserToken(new_token_id(), user, scopes, label, now, expires_ms, None)
        with self.backend.transaction(write=True) as tx:
            if tx.one("SELECT 1 FROM users WHERE name = ?", (user,)) is None:
                tx.run("INSERT INTO users (name, created_ms) VALUES (?, ?)", (user, now))
            tx.run(
                "INSERT INTO user_tokens (id, user_name, digest, cookie, scopes, label, "
                "created_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    token.id,
                    user,
                    digest.hex(),
                    cookie_digest(digest).hex(),
                    ",".join(scopes),
                    label,
                    now,
                    expires_ms,
                ),
            )
        return token, secret

    def tokens(self, user: str | None = None) -> list[UserToken]:
        """Every token (of `user` when given), oldest first, revoked ones too."""
        where, params = ("WHERE user_name = ?", (user,)) if user else ("", ())
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                f"SELECT {_TOKEN_COLS} FROM user_tokens {where} ORDER BY created_ms, id", params
            )
        return [_token(r) for r in rows]

    def revoke_token(self, token_id: str) -> UserToken:
        """Revoke a token (again: a no-op); it matches no request from now on."""
        with self.backend.transaction(write=True) as tx:
            tx.run(
                "UPDATE user_tokens SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL",
                (self.clock.now_ms(), token_id),
            )
            row = tx.one(f"SELECT {_TOKEN_COLS} FROM user_tokens WHERE id = ?", (token_id,))
        if row is None:
            raise NotFoundError(f"no token {token_id}")
        return _token(row)

    def token_by(
        self, *, digest: bytes | None = None, cookie: bytes | None = None
    ) -> UserToken | None:
        """The live (not revoked, not expired) token whose text has `digest`, or whose cookie
        is `cookie`; None when there is none."""
        token = self.find_token(digest=digest, cookie=cookie)
        if token is None or token.refusal(self.clock.now_ms()) is not None:
            return None
        return token

    def find_token(
        self, *, digest: bytes | None = None, cookie: bytes | None = None
    ) -> UserToken | None:
        """The token whose text has `digest` (or whose cookie is `cookie`), live, revoked or
        expired (`UserToken.refusal` says which); None when no token has it."""
        column, value = ("digest", digest) if digest is not None else ("cookie", cookie)
        if value is None:
            return None
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                f"SELECT {_TOKEN_COLS} FROM user_tokens WHERE {column} = ?", (value.hex(),)
            )
        return None if row is None else _token(row)

    def users(self) -> list[str]:
        """Every user's name, in order."""
        with self.backend.transaction(write=False) as tx:
            return [str(r[0]) for r in tx.all("SELECT name FROM users ORDER BY name")]

    # -- owners ----------------------------------------------------------------------------

    def set_owner(self, root_id: str, user: str | None) -> None:
        """Record `user` as the owner of the root session `root_id` (None: nobody's, which
        only admins see); replaces an owner left by a deleted session of the same id."""
        with self.backend.transaction(write=True) as tx:
            set_owner_in(tx, root_id, user)

    def owner_of(self, session_id: str) -> str | None:
        """The owner of the session's root (None: the session or its owner is unknown)."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                "SELECT o.user_name FROM sessions s JOIN session_owners o "
                "ON o.root_id = s.root_id WHERE s.id = ?",
                (session_id,),
            )
        return None if row is None else str(row[0])

    def owned_roots(self, user: str) -> set[str]:
        """The ids of the root sessions `user` owns."""
        with self.backend.transaction(write=False) as tx:
            return owned_roots_in(tx, user)

    def owned(self, user: str, session_ids: list[str]) -> set[str]:
        """Which of `session_ids` belong to `user` (through their roots)."""
        if not session_ids:
            return set()
        marks = ", ".join("?" for _ in session_ids)
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT s.id FROM sessions s JOIN session_owners o ON o.root_id = s.root_id "
                f"WHERE o.user_name = ? AND s.id IN ({marks})",
                (user, *session_ids),
            )
        return {str(r[0]) for r in rows}

    # -- deletions -------------------------------------------------------------------------

    def deletions(self, session_id: str | None = None) -> list[Deletion]:
        """The tombstones of deleted session trees (of `session_id` when given), oldest first."""
        where, params = ("WHERE session_id = ?", (session_id,)) if session_id else ("", ())
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                f"SELECT {_DELETION_COLS} FROM session_deletions {where} "
                "ORDER BY deleted_ms, session_id",
                params,
            )
        return [Deletion(str(r[0]), r[1], r[2], r[3], int(r[4]), str(r[5])) for r in rows]

    # -- share links -----------------------------------------------------------------------

    def create_share(
        self, session_id: str, *, expires_ms: int, turn_id: str | None = None, by: str | None = None
    ) -> tuple[ShareLink, str]:
        """A new read-only link to the session (or one turn of it) until `expires_ms`, and its
        secret: the only time the secret exists outside the caller."""
        import secrets

        now = self.clock.now_ms()
        if expires_ms <= now:
            raise UsageError("a share link must expire in the future")
        secret = "wks_" + secrets.token_urlsafe(32)
        link = ShareLink(new_share_id(), session_id, turn_id, by, now, expires_ms, None)
        with self.backend.transaction(write=True) as tx:
            if tx.one("SELECT 1 FROM sessions WHERE id = ?", (session_id,)) is None:
                raise NotFoundError(f"no session {session_id}")
            tx.run(
                "INSERT INTO share_links (id, digest, session_id, turn_id, created_by, "
                "created_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (link.id, token_digest(secret).hex(), session_id, turn_id, by, now, expires_ms),
            )
        return link, secret

    def shares(self, session_id: str | None = None) -> list[ShareLink]:
        """Every share link (of `session_id` when given), oldest first, revoked ones too."""
        where, params = ("WHERE session_id = ?", (session_id,)) if session_id else ("", ())
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                f"SELECT {_SHARE_COLS} FROM share_links {where} ORDER BY created_ms, id", params
            )
        return [_share(r) for r in rows]

    def share(self, share_id: str) -> ShareLink:
        """One share link by id; `NotFoundError` when unknown."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one(f"SELECT {_SHARE_COLS} FROM share_links WHERE id = ?", (share_id,))
        if row is None:
            raise NotFoundError(f"no share link {share_id}")
        return _share(row)

    def revoke_share(self, share_id: str) -> ShareLink:
        """Revoke a share link (again: a no-op); it opens nothing from now on."""
        with self.backend.transaction(write=True) as tx:
            tx.run(
                "UPDATE share_links SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL",
                (self.clock.now_ms(), share_id),
            )
        return self.share(share_id)

    def share_by(self, secret: str) -> ShareLink | None:
        """The live (not revoked, not expired) link whose secret is `secret`, else None."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                f"SELECT {_SHARE_COLS} FROM share_links WHERE digest = ?",
                (token_digest(secret).hex(),),
            )
        if row is None:
            return None
        link = _share(row)
        if link.revoked_ms is not None or link.expires_ms <= self.clock.now_ms():
            return None
        return link


def set_owner_in(tx: Tx, root_id: str, user: str | None) -> None:
    """`Access.set_owner` inside `tx`: the session's creation writes its owner with its row,
    so no crash leaves a session its creator cannot see (`SqlStore.create_session`)."""
    tx.run("DELETE FROM session_owners WHERE root_id = ?", (root_id,))
    if user is not None:
        tx.run("INSERT INTO session_owners (root_id, user_name) VALUES (?, ?)", (root_id, user))


def inherit_owner_in(tx: Tx, session_id: str, fork_id: str) -> None:
    """Record the owner of `session_id`'s root (if any) as the owner of `fork_id`, a new root,
    inside `tx`: a fork belongs to whoever owns what it was forked from."""
    tx.run("DELETE FROM session_owners WHERE root_id = ?", (fork_id,))
    tx.run(
        "INSERT INTO session_owners (root_id, user_name) SELECT ?, o.user_name FROM sessions s "
        "JOIN session_owners o ON o.root_id = s.root_id WHERE s.id = ?",
        (fork_id, session_id),
    )


def record_deletions_in(
    tx: Tx, tops: Sequence[str], now_ms: int, actor: str | None, how: str
) -> None:
    """Write the tombstone of each of `tops` (a deleted tree's top session: a root, or a child
    deleted with its own children) inside the transaction that deletes them, before their rows
    go: its parent and owner are read from them. A session's log goes with it; this row is
    what stays of who deleted it (docs/access.md)."""
    for sid in tops:
        tx.run(
            f"INSERT INTO session_deletions ({_DELETION_COLS}) SELECT s.id, s.parent_id, "
            "o.user_name, ?, ?, ? FROM sessions s LEFT JOIN session_owners o "
            "ON o.root_id = s.root_id WHERE s.id = ?",
            (actor, now_ms, how, sid),
        )


def owned_roots_in(tx: Tx, user: str) -> set[str]:
    """The ids of the root sessions `user` owns, read in `tx`."""
    rows = tx.all("SELECT root_id FROM session_owners WHERE user_name = ?", (user,))
    return {str(r[0]) for r in rows}


def owners_in(tx: Tx, roots: Sequence[str]) -> dict[str, str]:
    """Root session -> its owner, for those of `roots` that have one, read in `tx`."""
    marks = ", ".join("?" for _ in roots)
    rows = tx.all(
        f"SELECT root_id, user_name FROM session_owners WHERE root_id IN ({marks})", list(roots)
    )
    return {str(root): str(name) for root, name in rows}
