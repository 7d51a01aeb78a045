"""What the sync and async clients share: request specs, error mapping, the SSE parser.

Errors keep wakeful's tree: a 404 raises an `ApiError` that is also a `NotFoundError`, a 409
also a `ConflictError`, 400/413/422 also a `UsageError`, 503 also a `StoreBusyError`; callers
catch the same types as with a local store. Every `ApiError` has `status`, `error` and `reason`.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from ..errors import (
    ConflictError,
    NotFoundError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)


class ApiError(StoreError):
    """The server answered with an error status (see the module docstring for the subtypes)."""

    def __init__(self, status: int, error: str, reason: str) -> None:
        super().__init__(f"{reason} (HTTP {status})")
        self.status = status
        self.error = error
        self.reason = reason


class RemoteNotFoundError(ApiError, NotFoundError):
    """404: no such session, input or route."""


class RemoteConflictError(ApiError, ConflictError):
    """409: an input id reused with other content, or the session is busy here."""


class RemoteUsageError(ApiError, UsageError):
    """400, 413 or 422: the request was malformed, too large or invalid."""


class RemoteBusyError(ApiError, StoreBusyError):
    """503: the server's store stayed busy; retry."""


class UnauthorizedError(ApiError):
    """401 or 403: no valid token, or a scope the token lacks."""


class ServerUnreachableError(StoreUnavailableError):
    """The server could not be reached, or the connection broke before it answered."""


def unreachable(base_url: str, err: httpx.TransportError) -> ServerUnreachableError:
    """The error a client raises for a transport failure talking to `base_url`."""
    return ServerUnreachableError(
        f"cannot reach the server at {base_url}: {err or type(err).__name__}"
    )


_BY_STATUS: dict[int, type[ApiError]] = {
    400: RemoteUsageError,
    401: UnauthorizedError,
    403: UnauthorizedError,
    404: RemoteNotFoundError,
    409: RemoteConflictError,
    413: RemoteUsageError,
    422: RemoteUsageError,
    503: RemoteBusyError,
}


def raise_for(response: httpx.Response) -> None:
    """Raise the mapped `ApiError` for an error response (the body must have been read)."""
    if response.status_code < 400:
        return
    try:
        body = response.json()
        error, reason = str(body["error"]), str(body["reason"])
    except (ValueError, KeyError, TypeError):
        error, reason = "http_error", response.text[:200] or response.reason_phrase
    raise _BY_STATUS.get(response.status_code, ApiError)(response.status_code, error, reason)


@dataclass(frozen=True, slots=True)
class Req:
    """One API call: method, path, query parameters and JSON body."""

    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    body: Any = None


def _q(**params: Any) -> dict[str, Any]:
    """Query parameters without the unset ones, booleans as `true`/`false`."""
    return {
        k: (str(v).lower() if isinstance(v, bool) else v)
        for k, v in params.items()
        if v is not None
    }


def _body(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def sessions_req(
    roots: bool,
    archived: bool | None,
    limit: int,
    cursor: str | None,
    q: str | None,
    agent: str | None = None,
    location: str | None = None,
) -> Req:
    """GET /sessions."""
    flag = "all" if archived is None else str(archived).lower()
    return Req(
        "GET",
        "/sessions",
        _q(
            roots=roots,
            archived=flag,
            limit=limit,
            cursor=cursor,
            q=q,
            agent=agent,
            location=location,
        ),
    )


def prompt_body(
    text: str | None,
    blocks: list[dict[str, Any]] | None,
    input_id: str | None,
    delivery: str,
    resume: bool,
    wait: bool,
    metadata: dict[str, Any] | None,
) -> dict[str, Any]:
    """The body of a prompt."""
    return _body(
        text=text,
        blocks=blocks,
        input_id=input_id,
        delivery=delivery,
        resume=resume,
        wait=wait,
        metadata=metadata,
    )


def create_req(
    title: str | None,
    agent: str | None,
    model: str | None,
    metadata: dict[str, Any] | None,
    prompt: dict[str, Any] | None,
    session_id: str | None = None,
    location: str | None = None,
) -> Req:
    """POST /sessions."""
    return Req(
        "POST",
        "/sessions",
        body=_body(
            id=session_id,
            title=title,
            agent=agent,
            model=model,
            metadata=metadata,
            location=location,
            prompt=prompt,
        ),
    )


def auth_headers(token: str | None, headers: Mapping[str, str] | None) -> dict[str, str]:
    """A client's headers: `headers` as given, then the bearer `token` (default:
    `$WAKEFUL_SERVER_TOKEN`), which a given `Authorization` header replaces."""
    token = token if token is not None else os.environ.get("WAKEFUL_SERVER_TOKEN")
    out = {"Authorization": f"Bearer {token}"} if token else {}
    return out | dict(headers or {})


# -- what hosts that keep sessions write (`RemoteStore`; docs/hosts.md) -------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def append_req(session_id: str, events: list[dict[str, Any]], blobs: Sequence[bytes]) -> Req:
    """POST /sessions/{id}/events."""
    return session_req(
        "POST", session_id, "/events", {"events": events, "blobs": [_b64(b) for b in blobs]}
    )


def put_blob_req(data: bytes, session_id: str | None) -> Req:
    """POST /blobs."""
    return Req("POST", "/blobs", body=_body(data=_b64(data), session_id=session_id))


def usage_params(by: str, since: str | None) -> dict[str, Any]:
    """The query of GET /usage."""
    return _q(by=by, since=since)


def budgets_params(agent: str | None, user: str | None) -> dict[str, Any]:
    """The query of GET /budgets."""
    return _q(agent=agent, user=user)


def prune_req(older_than_ms: int, action: str) -> Req:
    """POST /prune."""
    return Req("POST", "/prune", body={"older_than_ms": older_than_ms, "action": action})


def rename_req(session_id: str, title: str) -> Req:
    """PATCH /sessions/{id}."""
    return session_req("PATCH", session_id, body={"title": title})


def session_req(
    method: str, session_id: str, tail: str = "", body: Any = None, **params: Any
) -> Req:
    """A call on one session: `/sessions/{id}{tail}`."""
    return Req(method, f"/sessions/{session_id}{tail}", _q(**params), body)


def rewind_req(
    session_id: str,
    turn_id: str | None,
    input_id: str | None,
    message_id: str | None,
    files: bool,
    force: bool,
    revision: int | None,
) -> Req:
    """POST /sessions/{id}/rewind."""
    body = _body(
        turn_id=turn_id,
        input_id=input_id,
        message_id=message_id,
        files=files,
        force=force,
        revision=revision,
    )
    return session_req("POST", session_id, "/rewind", body)


def unrevert_req(session_id: str, force: bool) -> Req:
    """POST /sessions/{id}/unrevert."""
    return session_req("POST", session_id, "/unrevert", {"force": force})


def history_req(
    session_id: str,
    revision: int,
    delete_turn: str | None,
    message_id: str | None,
    text: str | None,
    heal_pairing: bool = False,
) -> Req:
    """POST /sessions/{id}/history."""
    body = _body(
        revision=revision,
        delete_turn=delete_turn,
        message_id=message_id,
        text=text,
        heal_pairing=heal_pairing or None,
    )
    return session_req("POST", session_id, "/history", body)


def artifacts_req(session_id: str, kind: str | None, since_ms: int | None, limit: int) -> Req:
    """GET /sessions/{id}/artifacts."""
    return session_req("GET", session_id, "/artifacts", kind=kind, since_ms=since_ms, limit=limit)


def add_artifact_req(session_id: str, kind: str, uri: str, label: str, meta: Any) -> Req:
    """POST /sessions/{id}/artifacts (`meta` None is sent as null)."""
    body = {"kind": kind, "uri": uri, "label": label, "meta": meta}
    return session_req("POST", session_id, "/artifacts", body)


def find_artifacts_req(
    uri: str | None,
    kind: str | None,
    limit: int,
    since_ms: int | None = None,
    location: str | None = None,
) -> Req:
    """GET /artifacts: the reverse lookup."""
    return Req(
        "GET",
        "/artifacts",
        _q(uri=uri, kind=kind, since_ms=since_ms, location=location, limit=limit),
    )


def metadata_req(session_id: str, patch: dict[str, Any] | None = None) -> Req:
    """GET /sessions/{id}/metadata, or with `patch` PATCH it (a None value removes a key)."""
    if patch is None:
        return session_req("GET", session_id, "/metadata")
    return session_req("PATCH", session_id, "/metadata", {"patch": patch})


def extension_req(
    method: str, session_id: str, namespace: str, key: str | None = None, body: Any = None
) -> Req:
    """A call on an extension's namespace (`key` None: the whole namespace); both are quoted
    as one path segment each."""
    tail = f"/extensions/{quote(namespace, safe='')}"
    if key is not None:
        tail += f"/{quote(key, safe='')}"
    return session_req(method, session_id, tail, body)


def log_params(
    after: int, follow: bool, live: bool, idle_timeout: float | None, sensitive: bool
) -> dict[str, Any]:
    """Query parameters of a log stream."""
    return _q(
        after=after,
        follow=follow,
        live=live,
        idle_timeout=idle_timeout,
        sensitive=sensitive or None,
    )


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """One Server-Sent Event: `event` is message (a durable event), sync, live or ping."""

    event: str
    id: str | None
    data: Any


class SseParser:
    """Turns SSE lines into events, one line at a time (keep-alive comments become `ping`)."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None  # this event's own id field (live deltas have none)

    def line(self, line: str) -> ServerEvent | None:
        """Feed one line; return the event it completes, if any."""
        if not line:
            if not self._data:
                self._event, self._id = "", None
                return None
            text = "\n".join(self._data)
            try:
                payload: Any = json.loads(text)
            except ValueError:
                payload = text
            event = ServerEvent(self._event or "message", self._id, payload)
            self._data, self._event, self._id = [], "", None
            return event
        if line.startswith(":"):
            return ServerEvent("ping", None, None)
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return None


def parse_sse(lines: Iterable[str]) -> Iterator[ServerEvent]:
    """Parse SSE lines into events."""
    parser = SseParser()
    for line in lines:
        if (event := parser.line(line)) is not None:
            yield event


async def aparse_sse(lines: AsyncIterable[str]) -> AsyncIterator[ServerEvent]:
    """Parse async SSE lines into events."""
    parser = SseParser()
    async for line in lines:
        if (event := parser.line(line)) is not None:
            yield event


RETRYABLE = (httpx.TransportError,)
MAX_RECONNECTS = 8


def backoff_s(failures: int) -> float:
    """Delay before reconnect number `failures` (50 ms doubling, capped at 2 s)."""
    return float(min(0.05 * 2 ** (failures - 1), 2.0))
