"""`AsyncClient`: the asynchronous HTTP client of a `wakeful serve` server (over httpx).

The same methods as `Client`, awaited; `log` and `events_stream` are async iterators that
reconnect with `Last-Event-ID` like the sync ones.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx

from . import _wire as w
from ._wire import ServerEvent


class AsyncClient:
    """An async client of one server. `token` defaults to `$WAKEFUL_SERVER_TOKEN`."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        stream_read_timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        token = token if token is not None else os.environ.get("WAKEFUL_SERVER_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self.stream_read_timeout = stream_read_timeout
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout,
                                  transport=transport)  # fmt: skip

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

    async def list_sessions(self, *, roots: bool = True, archived: bool | None = False, limit: int = 50,
                      cursor: str | None = None, q: str | None = None) -> dict[str, Any]:  # fmt: skip
        """A page of sessions (`archived=None`: both); `next_cursor` continues."""
        return await self._send(w.sessions_req(roots, archived, limit, cursor, q))

    async def create_session(self, *, title: str | None = None, agent: str | None = None,
                       model: str | None = None, metadata: dict[str, Any] | None = None,
                       prompt: str | None = None, **prompt_options: Any) -> dict[str, Any]:  # fmt: skip
        """Create a session; with `prompt`, admit it too (options as for `prompt`)."""
        body = None
        if prompt is not None:
            body = w.prompt_body(prompt, None, prompt_options.get("input_id"),
                                 prompt_options.get("delivery", "steer"),
                                 prompt_options.get("resume", True), prompt_options.get("wait", False),
                                 prompt_options.get("metadata"))  # fmt: skip
        return await self._send(w.create_req(title, agent, model, metadata, body))

    async def get_session(self, session_id: str) -> dict[str, Any]:
        """One session with children, pending count, work state and claim."""
        return await self._send(w.session_req("GET", session_id))

    async def fork(self, session_id: str, through_seq: int | None = None, *,
                   title: str | None = None, agent: str | None = None,
                   model: str | None = None) -> dict[str, Any]:  # fmt: skip
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

    async def prompt(self, session_id: str, text: str | None = None, *,
               blocks: list[dict[str, Any]] | None = None, input_id: str | None = None,
               delivery: str = "steer", resume: bool = True, wait: bool = False,
               metadata: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        """Admit a prompt; `resume` wakes the server's driver; `wait` returns after the drain."""
        body = w.prompt_body(text, blocks, input_id, delivery, resume, wait, metadata)
        return await self._send(w.session_req("POST", session_id, "/prompt", body))

    async def interrupt(self, session_id: str) -> dict[str, Any]:
        """Hard-interrupt the session's current turn."""
        return await self._send(w.session_req("POST", session_id, "/interrupt"))

    async def move(self, session_id: str, location: str, *, input_id: str | None = None,
             resume: bool = True) -> dict[str, Any]:  # fmt: skip
        """Move the session to the directory `location` of the server's host."""
        body = {k: v for k, v in {"location": location, "input_id": input_id, "resume": resume}.items()
                if v is not None}  # fmt: skip
        return await self._send(w.session_req("POST", session_id, "/move", body))

    async def compact(self, session_id: str, *, tail_turns: int | None = None,
                input_id: str | None = None, resume: bool = True) -> dict[str, Any]:  # fmt: skip
        """Request a manual compaction."""
        body = {k: v for k, v in {"tail_turns": tail_turns, "input_id": input_id, "resume": resume}.items()
                if v is not None}  # fmt: skip
        return await self._send(w.session_req("POST", session_id, "/compact", body))

    async def approvals(self, session_id: str) -> list[dict[str, Any]]:
        """The calls the session waits on: `call_id`, `name`, `input`, `preview`."""
        out = await self._send(w.session_req("GET", session_id, "/approvals"))
        return list(out["approvals"])

    async def approve(self, session_id: str, call_id: str, decision: str = "allow", *,
                 resume: bool = True) -> dict[str, Any]:  # fmt: skip
        """Decide on a waiting call: `allow`, `always` or `deny` (see docs/approvals.md)."""
        body = {"decision": decision, "resume": resume}
        return await self._send(
            w.session_req("POST", session_id, f"/approvals/{quote(call_id, safe='')}", body)
        )

    # -- reads -------------------------------------------------------------------------------

    async def messages(self, session_id: str, after_seq: int = 0, *, sensitive: bool = False) -> dict[str, Any]:  # fmt: skip
        """The transcript (system text redacted unless `sensitive` and the token allows it)."""
        return await self._send(
            w.session_req(
                "GET", session_id, "/messages", after_seq=after_seq, sensitive=sensitive or None
            )
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

    async def receipts(self, session_id: str, *, sensitive: bool = False) -> dict[str, Any]:
        """Prompt receipts (section text only with `sensitive` and the scope)."""
        return await self._send(w.session_req("GET", session_id, "/receipts", sensitive=sensitive or None))  # fmt: skip

    async def events(self, session_id: str, after: int = 0, *, limit: int = 1000,
               sensitive: bool = False) -> dict[str, Any]:  # fmt: skip
        """One JSON page of a session's durable events after `after`."""
        return await self._send(
            w.session_req(
                "GET", session_id, "/log", after=after, limit=limit, sensitive=sensitive or None
            )
        )

    # -- streams -----------------------------------------------------------------------------

    def log(self, session_id: str, after: int = 0, *, follow: bool = True, live: bool = False,
            idle_timeout: float | None = None, sensitive: bool = False,
            pings: bool = False) -> AsyncIterator[ServerEvent]:  # fmt: skip
        """A session's log as SSE: durable events (`message`), one `sync`, `live` deltas."""
        params = w.log_params(after, follow, live, idle_timeout, sensitive)
        return self._stream(f"/sessions/{session_id}/log", params, follow, pings)

    def events_stream(self, after: int = 0, *, follow: bool = True, live: bool = False,
                      idle_timeout: float | None = None, sensitive: bool = False,
                      pings: bool = False) -> AsyncIterator[ServerEvent]:  # fmt: skip
        """The instance-wide stream: every session's events by global id."""
        params = w.log_params(after, follow, live, idle_timeout, sensitive)
        return self._stream("/events", params, follow, pings)

    async def _stream(self, path: str, params: dict[str, Any], follow: bool, pings: bool) -> AsyncIterator[ServerEvent]:  # fmt: skip
        last_id: str | None = None
        failures = 0
        timeout = httpx.Timeout(self._http.timeout.connect, read=self.stream_read_timeout)
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                async with self._http.stream("GET", path, params=params, headers=headers,
                                             timeout=timeout) as response:  # fmt: skip
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
