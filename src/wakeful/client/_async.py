"""`AsyncClient`: the asynchronous HTTP client of a `wakeful serve` server (over httpx).

The same methods as `Client`, awaited; `log` and `events_stream` are async iterators that
reconnect with `Last-Event-ID` like the sync ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from . import _wire as w
from ._wire import ServerEvent


class AsyncClient:
    """An async client of one server. `token` defaults to `$WAKEFUL_SERVER_TOKEN`; `headers` are
    sent with every request; `timeout` (seconds) bounds each request but a stream's reads."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        stream_read_timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        headers = w.auth_headers(token, headers)
        self.base_url = base_url.rstrip("/")
        self.stream_read_timeout = stream_read_timeout
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, req: w.Req) -> dict[str, Any]:
        try:
            response = await self._http.request(
                req.method, req.path, params=req.params, json=req.body
            )
        except httpx.TransportError as err:
            raise w.unreachable(self.base_url, err) from err
        w.raise_for(response)
        data: dict[str, Any] = response.json()
        return data

    # -- sessions ----------------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """`GET /health` (needs no token)."""
        return await self._send(w.Req("GET", "/health"))

    async def list_sessions(
        self,
        *,
        roots: bool = True,
        archived: bool | None = False,
        limit: int = 50,
        cursor: str | None = None,
        q: str | None = None,
        agent: str | None = None,
        location: str | None = None,
    ) -> dict[str, Any]:
        """A page of sessions (`archived=None`: both), each with its `summary`; only those of
        `agent` and at `location` (`this`: the server's workspace, or an absolute directory)
        when given; `next_cursor` continues."""
        return await self._send(w.sessions_req(roots, archived, limit, cursor, q, agent, location))

    async def create_session(
        self,
        *,
        title: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        metadata: dict[str, Any] | None = None,
        prompt: str | None = None,
        session_id: str | None = None,
        location: str | None = None,
        **prompt_options: Any,
    ) -> dict[str, Any]:
        """Create a session (with `session_id`, that id: 409 `ConflictError` when taken;
        `location`, a directory of the server's host); with `prompt`, admit it too (options as
        for `prompt`)."""
        body = None
        if prompt is not None:
            body = w.prompt_body(
                prompt,
                None,
                prompt_options.get("input_id"),
                prompt_options.get("delivery", "steer"),
                prompt_options.get("resume", True),
                prompt_options.get("wait", False),
                prompt_options.get("metadata"),
            )
        return await self._send(
            w.create_req(title, agent, model, metadata, body, session_id, location)
        )

    async def get_session(self, session_id: str) -> dict[str, Any]:
        """One session with children, pending count, work state and claim."""
        return await self._send(w.session_req("GET", session_id))

    async def fork(
        self,
        session_id: str,
        through_seq: int | None = None,
        *,
        title: str | None = None,
        agent: str | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        """Fork a session through `through_seq` (default: all of it); `agent`/`model` make the
        fork run as them (the original is untouched)."""
        fields = {"through_seq": through_seq, "title": title, "agent": agent, "model": model}
        body = {k: v for k, v in fields.items() if v is not None}
        return await self._send(w.session_req("POST", session_id, "/fork", body))

    async def archive(self, session_id: str, archived: bool = True) -> dict[str, Any]:
        """Set (or with `archived=False` clear) the archive marker."""
        tail = "/archive" if archived else "/unarchive"
        return await self._send(w.session_req("POST", session_id, tail))

    async def delete(self, session_id: str) -> dict[str, Any]:
        """Delete a session and its children; the counts removed."""
        return await self._send(w.session_req("DELETE", session_id))

    # -- inputs ------------------------------------------------------------------------------

    async def prompt(
        self,
        session_id: str,
        text: str | None = None,
        *,
        blocks: list[dict[str, Any]] | None = None,
        input_id: str | None = None,
        delivery: str = "steer",
        resume: bool = True,
        wait: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Admit a prompt; `resume` wakes the server's driver; `wait` returns after the drain."""
        body = w.prompt_body(text, blocks, input_id, delivery, resume, wait, metadata)
        return await self._send(w.session_req("POST", session_id, "/prompt", body))

    async def interrupt(self, session_id: str) -> dict[str, Any]:
        """Hard-interrupt the session's current turn."""
        return await self._send(w.session_req("POST", session_id, "/interrupt"))

    async def move(
        self, session_id: str, location: str, *, input_id: str | None = None, resume: bool = True
    ) -> dict[str, Any]:
        """Move the session to the directory `location` of the server's host."""
        body = {
            k: v
            for k, v in {"location": location, "input_id": input_id, "resume": resume}.items()
            if v is not None
        }
        return await self._send(w.session_req("POST", session_id, "/move", body))

    async def compact(
        self,
        session_id: str,
        *,
        tail_turns: int | None = None,
        input_id: str | None = None,
        resume: bool = True,
    ) -> dict[str, Any]:
        """Request a manual compaction."""
        body = {
            k: v
            for k, v in {"tail_turns": tail_turns, "input_id": input_id, "resume": resume}.items()
            if v is not None
        }
        return await self._send(w.session_req("POST", session_id, "/compact", body))

    async def approvals(self, session_id: str) -> list[dict[str, Any]]:
        """The calls the session waits on: `call_id`, `name`, `input`, `preview`."""
        out = await self._send(w.session_req("GET", session_id, "/approvals"))
        return list(out["approvals"])

    async def approve(
        self, session_id: str, call_id: str, decision: str = "allow", *, resume: bool = True
    ) -> dict[str, Any]:
        """Decide on a waiting call: `allow`, `always` or `deny` (see docs/approvals.md)."""
        body = {"decision": decision, "resume": resume}
        return await self._send(
            w.session_req("POST", session_id, f"/approvals/{quote(call_id, safe='')}", body)
        )

    async def raise_budget(
        self, session_id: str, amount: str, *, resume: bool = True
    ) -> dict[str, Any]:
        """Raise the session's budget (`+5usd`, `+20000tokens`, or a new limit `5usd`); one its
        budget paused continues (see docs/spend.md)."""
        body = {"amount": amount, "resume": resume}
        return await self._send(w.session_req("POST", session_id, "/budget", body))

    # -- reads -------------------------------------------------------------------------------

    async def messages(
        self,
        session_id: str,
        after_seq: int = 0,
        *,
        limit: int | None = None,
        sensitive: bool = False,
    ) -> dict[str, Any]:
        """The transcript after `after_seq` (system text redacted unless `sensitive` and the
        token allows it); with `limit`, a page of at most that many (`next_after` continues)."""
        return await self._send(
            w.session_req(
                "GET",
                session_id,
                "/messages",
                after_seq=after_seq,
                limit=limit,
                sensitive=sensitive or None,
            )
        )

    async def context(self, session_id: str, *, sensitive: bool = False) -> dict[str, Any]:
        """The session's context: the active history its next request carries (`messages`,
        in request order; system text redacted unless `sensitive`)."""
        return await self._send(
            w.session_req("GET", session_id, "/context", sensitive=sensitive or None)
        )

    async def pending(self, session_id: str) -> dict[str, Any]:
        """The pending inbox."""
        return await self._send(w.session_req("GET", session_id, "/pending"))

    async def turns(self, session_id: str) -> dict[str, Any]:
        """Turns as run records."""
        return await self._send(w.session_req("GET", session_id, "/turns"))

    async def usage(self, session_id: str) -> dict[str, Any]:
        """Usage in total and per turn."""
        return await self._send(w.session_req("GET", session_id, "/usage"))

    async def usage_report(self, by: str = "session", since: str | None = None) -> dict[str, Any]:
        """Every recorded request's usage grouped by session, agent, model, day or user, and
        the total (`since`: an age such as `7d` or an ISO date)."""
        return await self._send(w.Req("GET", "/usage", w.usage_params(by, since)))

    async def budget_limits(
        self, *, agent: str | None = None, user: str | None = None
    ) -> dict[str, Any]:
        """The agent and user budgets of the server's configuration and what each spent in
        its period (`agent`, `user`: only theirs; a non-admin token: only its own user's)."""
        return await self._send(w.Req("GET", "/budgets", w.budgets_params(agent, user)))

    async def receipts(self, session_id: str, *, sensitive: bool = False) -> dict[str, Any]:
        """Prompt receipts (section text only with `sensitive` and the scope)."""
        return await self._send(
            w.session_req("GET", session_id, "/receipts", sensitive=sensitive or None)
        )

    async def events(
        self, session_id: str, after: int = 0, *, limit: int = 1000, sensitive: bool = False
    ) -> dict[str, Any]:
        """One JSON page of a session's durable events after `after`."""
        return await self._send(
            w.session_req(
                "GET", session_id, "/log", after=after, limit=limit, sensitive=sensitive or None
            )
        )

    # -- shaping (docs/rewind.md) ------------------------------------------------------------

    async def rewind(
        self,
        session_id: str,
        *,
        turn_id: str | None = None,
        input_id: str | None = None,
        message_id: str | None = None,
        files: bool = False,
        force: bool = False,
        revision: int | None = None,
    ) -> dict[str, Any]:
        """Revert the session to just before a turn, an input or a message (none named: its
        newest turn); the later messages leave the active history, not the log. With `files`,
        restore the files those turns changed (a 409 `ConflictError` lists files changed since
        by something else, unless `force`); `revision` (the `last_seq` read) guards against a
        session that changed since. Answers what it did: `hidden`, `files_restored`,
        `files_left`, `shell_calls`, `prompt` and `warnings`."""
        return await self._send(
            w.rewind_req(session_id, turn_id, input_id, message_id, files, force, revision)
        )

    async def unrevert(self, session_id: str, *, force: bool = False) -> dict[str, Any]:
        """Undo the session's rewind (a 422 `UsageError` when there is none or a new input made
        it final); answers as `rewind`. `force` overwrites files changed since the rewind."""
        return await self._send(w.unrevert_req(session_id, force))

    async def edit_history(
        self,
        session_id: str,
        *,
        revision: int,
        delete_turn: str | None = None,
        message_id: str | None = None,
        text: str | None = None,
        heal_pairing: bool = False,
    ) -> dict[str, Any]:
        """Delete a turn (`delete_turn`), replace a message's text (`message_id`, `text`) or
        write the drop-only pairing heal back (`heal_pairing`) as
        one write guarded by `revision`, the session's `last_seq` read: a stale one is a 409
        `ConflictError` and nothing is written. Answers `{"session_id", "revision"}` (the new)."""
        return await self._send(
            w.history_req(session_id, revision, delete_turn, message_id, text, heal_pairing)
        )

    async def artifacts(
        self,
        session_id: str,
        *,
        kind: str | None = None,
        since_ms: int | None = None,
        limit: int = 100,
    ) -> dict[str, Any]:
        """The session's artifacts (`{"artifacts": [...]}`), newest update first, optionally of
        one `kind` and updated at or after `since_ms` (epoch ms); `limit` at most 500."""
        return await self._send(w.artifacts_req(session_id, kind, since_ms, limit))

    async def add_artifact(
        self, session_id: str, kind: str, uri: str, label: str = "", meta: Any = None
    ) -> dict[str, Any]:
        """Record an artifact of the session, upserted by (`kind`, `uri`); answers it."""
        return await self._send(w.add_artifact_req(session_id, kind, uri, label, meta))

    async def find_artifacts(
        self,
        uri: str | None = None,
        *,
        kind: str | None = None,
        since_ms: int | None = None,
        location: str | None = None,
        limit: int = 100,
    ) -> dict[str, Any]:
        """Reverse lookup across every session: the artifacts with exactly this `uri`, or of
        the sessions living at `location` (`this`: the server's workspace), of `kind` and
        updated at or after `since_ms`, newest update first (`{"artifacts": [...]}`, each
        with its `session_id`)."""
        return await self._send(w.find_artifacts_req(uri, kind, limit, since_ms, location))

    async def metadata(self, session_id: str) -> dict[str, Any]:
        """The session's metadata: `{"session_id", "metadata"}`."""
        return await self._send(w.metadata_req(session_id))

    async def update_metadata(self, session_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge `patch` into the session's metadata (a None value removes the key; at least
        one key); answers the merged object as `metadata` does."""
        return await self._send(w.metadata_req(session_id, patch))

    async def extension_state(self, session_id: str, namespace: str) -> dict[str, Any]:
        """Every value an extension stored in the session:
        `{"session_id", "namespace", "values"}`."""
        return await self._send(w.extension_req("GET", session_id, namespace))

    async def set_extension_state(
        self, session_id: str, namespace: str, key: str, value: Any
    ) -> dict[str, Any]:
        """Store one JSON value (not null) under `namespace`/`key`; answers the namespace as
        `extension_state` does (a 422 `UsageError` past the size bounds)."""
        return await self._send(
            w.extension_req("PUT", session_id, namespace, key, {"value": value})
        )

    async def delete_extension_state(
        self, session_id: str, namespace: str, key: str
    ) -> dict[str, Any]:
        """Remove one extension value (none there: nothing happens); answers the namespace."""
        return await self._send(w.extension_req("DELETE", session_id, namespace, key))

    # -- hosts that keep sessions (docs/hosts.md) -------------------------------------------

    async def rename(self, session_id: str, title: str) -> dict[str, Any]:
        """Set the session's title; answers the session."""
        return await self._send(w.rename_req(session_id, title))

    async def append_events(
        self, session_id: str, events: list[dict[str, Any]], blobs: Sequence[bytes] = ()
    ) -> dict[str, Any]:
        """Append events (each as the log shows its `data`) of the kinds a host may write,
        with `blobs`, in one transaction: `{"seqs", "ids", "last_seq"}`. A 409
        `ConflictError` while the session is driven; a 422 `UsageError` names a refused kind."""
        return await self._send(w.append_req(session_id, events, blobs))

    async def put_blob(self, data: bytes, session_id: str | None = None) -> dict[str, Any]:
        """Store bytes once by SHA-256 (referenced by `session_id`): `{"digest", "bytes"}`."""
        return await self._send(w.put_blob_req(data, session_id))

    async def get_blob(self, digest: str) -> bytes:
        """A blob's bytes (needs a token with the sensitive scope: 403 `UnauthorizedError`)."""
        try:
            response = await self._http.get(f"/blobs/{quote(digest, safe='')}")
        except httpx.TransportError as err:
            raise w.unreachable(self.base_url, err) from err
        w.raise_for(response)
        return response.content

    async def prune(self, older_than_ms: int, action: str = "preview") -> dict[str, Any]:
        """Root sessions idle since before `older_than_ms`: `preview`, `archive` or `delete`
        them; answers the counts."""
        return await self._send(w.prune_req(older_than_ms, action))

    # -- streams -----------------------------------------------------------------------------

    def log(
        self,
        session_id: str,
        after: int = 0,
        *,
        follow: bool = True,
        live: bool = False,
        idle_timeout: float | None = None,
        sensitive: bool = False,
        pings: bool = False,
    ) -> AsyncIterator[ServerEvent]:
        """A session's log as SSE: durable events (`message`), one `sync`, `live` deltas."""
        params = w.log_params(after, follow, live, idle_timeout, sensitive)
        return self._stream(f"/sessions/{session_id}/log", params, follow, pings)

    def events_stream(
        self,
        after: int = 0,
        *,
        follow: bool = True,
        live: bool = False,
        idle_timeout: float | None = None,
        sensitive: bool = False,
        pings: bool = False,
    ) -> AsyncIterator[ServerEvent]:
        """The instance-wide stream: every session's events by global id."""
        params = w.log_params(after, follow, live, idle_timeout, sensitive)
        return self._stream("/events", params, follow, pings)

    async def _stream(
        self, path: str, params: dict[str, Any], follow: bool, pings: bool
    ) -> AsyncIterator[ServerEvent]:
        last_id: str | None = None
        failures = 0
        timeout = httpx.Timeout(self._http.timeout.connect, read=self.stream_read_timeout)
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                async with self._http.stream(
                    "GET", path, params=params, headers=headers, timeout=timeout
                ) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        w.raise_for(response)
                    async for event in w.aparse_sse(response.aiter_lines()):
                        if event.id is not None:
                            last_id = event.id
                        failures = 0
                        if event.event != "ping" or pings:
                            yield event
                return
            except w.RETRYABLE as err:
                failures += 1
                if not follow or failures > w.MAX_RECONNECTS:
                    raise w.unreachable(self.base_url, err) from err
                await asyncio.sleep(w.backoff_s(failures))
