"""The durable log over HTTP: JSON pages, and Server-Sent Events that follow it live.

`GET /sessions/{id}/log` (SSE ids are the session's `seq`) and `GET /events` (the instance-wide
stream; ids are global event ids). Following subscribes to the hub *before* capturing the
watermark, replays up to it, sends one `sync` event, then streams; `Last-Event-ID` resumes after
the last id a client saw, so a reconnect loses and repeats nothing. Durable events are unnamed
SSE messages; `event: sync` marks the watermark; `event: live` carries live-only deltas (no id,
no replay). Keep-alive comments go out every `keepalive_s` seconds.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from ..errors import NotFoundError
from ..events import StoredEvent
from ..execution import off_loop
from ..store import Access
from ._api import ApiError, Call, Registry
from ._hub import Live, Subscription
from ._models import EventOut, EventsOut, LogQuery
from ._redact import event_json
from ._state import ServerState

ops = Registry()
Position = tuple[int, int]
_LAST_ID = re.compile(r"^\s*[0-9]{1,16}\s*$")
_STREAM = {"text/event-stream": "Server-Sent Events (with `follow=true` or that Accept header)"}


@dataclass(frozen=True)
class _Source:
    """How to read one log: a batch after a position, the key of an event (its SSE id and the
    client's cursor), its position (the log's order: `(0, seq)` in a session, `(tx, id)`
    instance-wide, docs/store.md), the watermark's position and a client cursor's position."""

    fetch: Callable[[Position], list[StoredEvent]]
    key: Callable[[StoredEvent], int]
    pos: Callable[[StoredEvent], Position]
    watermark: Callable[[], Position]
    resolve: Callable[[int], Position]
    sync_field: str
    gap_free: bool  # per-session seq has no gaps: a jump means the queue missed something
    # A non-admin's view of the instance log: only their sessions' events are sent (their
    # positions still advance the cursor); None: every event.
    visible: Visible | None = None

    def shown(self, ev: StoredEvent) -> bool:
        """Whether the caller may see `ev` (known: `fetch` or `Visible.learn` looked it up)."""
        return self.visible is None or self.visible.shown(ev)


class Visible:
    """Which sessions' events one non-admin may see, looked up once per session (in a worker
    thread: `learn`) and remembered for the stream's life."""

    def __init__(self, access: Access, user: str | None) -> None:
        self.access = access
        self.user = user
        self.seen: dict[str, bool] = {}

    def learn(self, events: list[StoredEvent]) -> list[StoredEvent]:
        """Look up the owners of the sessions of `events` not known yet; `events` unchanged."""
        new = sorted({e.session_id for e in events} - self.seen.keys())
        owned = self.access.owned(self.user, new) if new and self.user else set()
        self.seen.update((sid, sid in owned) for sid in new)
        return events

    def known(self, ev: StoredEvent) -> bool:
        """Whether the owner of `ev`'s session was looked up."""
        return ev.session_id in self.seen

    def shown(self, ev: StoredEvent) -> bool:
        """Whether `ev`'s session is the caller's."""
        return self.seen.get(ev.session_id, False)


def _start(call: Call[LogQuery, Any]) -> int:
    after = call.query.after
    header = call.request.headers.get("last-event-id")
    if header is not None and header.strip():
        if not _LAST_ID.match(header):
            raise ApiError(400, "bad_header", "Last-Event-ID must be a non-negative integer")
        after = int(header)  # (the newer cursor: the client saw it after `after`)
    return after


def _wants_stream(call: Call[LogQuery, Any]) -> bool:
    return call.query.follow or "text/event-stream" in call.request.headers.get("accept", "")


def _event(key: int, data: str) -> ServerSentEvent:
    return ServerSentEvent(data=data, id=str(key))


def _durable(ev: StoredEvent, key: int, sensitive: bool) -> ServerSentEvent:
    return _event(key, json.dumps(event_json(ev, sensitive=sensitive)))


async def _drain_queue(sub: Subscription) -> None:
    while not sub.queue.empty():
        sub.queue.get_nowait()


async def _queued(
    src: _Source, item: Any, last: int, at: Position, sensitive: bool
) -> tuple[list[ServerSentEvent], int, Position]:
    """What one item from the hub's queue sends a follower at cursor (`last`, `at`): a live
    delta, or a durable event after any the queue missed (filled from the store, never
    skipped); and the follower's new cursor."""
    if isinstance(item, Live):
        shown = src.visible is None or src.visible.seen.get(item.session_id, False)
        return ([ServerSentEvent(data=item.data, event="live")] if shown else []), last, at
    key, pos = src.key(item.event), src.pos(item.event)
    if pos <= at:
        return [], last, at
    out: list[ServerSentEvent] = []
    if src.gap_free and key > last + 1:  # fill from the store, never skip
        for ev in await off_loop(src.fetch, at):
            if src.key(ev) >= key:
                break
            last, at = src.key(ev), src.pos(ev)
            out.append(_durable(ev, last, sensitive))
    if src.visible is not None and not src.visible.known(item.event):
        await off_loop(src.visible.learn, [item.event])
    if src.shown(item.event):
        out.append(_event(key, item.data(sensitive)))
    return out, key, pos


async def _stream(
    state: ServerState,
    src: _Source,
    sub: Subscription | None,
    after: int,
    query: LogQuery,
    sensitive: bool,
) -> AsyncIterator[ServerSentEvent]:
    """Replay, then (with a subscription) the sync marker and live events; see the docstring."""
    try:
        watermark = await off_loop(src.watermark)
    except NotFoundError:  # deleted between the check and the stream
        if sub is not None:
            state.hub.unsubscribe(sub)
        return
    try:
        last, at = after, await off_loop(src.resolve, after)  # the client's cursor and its position
        while at < watermark:
            batch = [e for e in await off_loop(src.fetch, at) if src.pos(e) <= watermark]
            for ev in batch:
                last, at = src.key(ev), src.pos(ev)
                if src.shown(ev):
                    yield _durable(ev, last, sensitive)
            if not batch:
                break
        if sub is None:
            return
        if at < watermark:
            last, at = watermark[1], watermark
        yield ServerSentEvent(data=json.dumps({src.sync_field: last}), event="sync", id=str(last))
        while True:
            if sub.lagged:  # the queue overflowed: re-read the store from where we are
                sub.lagged = False
                await _drain_queue(sub)
                while batch := await off_loop(src.fetch, at):
                    for ev in batch:
                        last, at = src.key(ev), src.pos(ev)
                        if src.shown(ev):
                            yield _durable(ev, last, sensitive)
            try:
                item = await asyncio.wait_for(sub.queue.get(), query.idle_timeout)
            except TimeoutError:
                return
            sent, last, at = await _queued(src, item, last, at, sensitive)
            for one in sent:
                yield one
    finally:
        if sub is not None:
            state.hub.unsubscribe(sub)


async def _response(
    state: ServerState, src: _Source, session_id: str | None, call: Call[LogQuery, Any]
) -> Any:
    sensitive = call.want_sensitive()
    after = _start(call)
    if not _wants_stream(call):
        batch = await off_loop(src.fetch, await off_loop(src.resolve, after))
        batch = batch[: call.query.limit]
        nxt = src.key(batch[-1]) if batch else after
        shown = [e for e in batch if src.shown(e)]
        return EventsOut(
            events=[EventOut.model_validate(event_json(e, sensitive=sensitive)) for e in shown],
            next_after=nxt,
            redacted=not sensitive,
        )
    sub = None
    if call.query.follow:
        sub = await state.hub.subscribe(session_id, live=call.query.live)
    stream = _stream(state, src, sub, after, call.query, sensitive)
    return EventSourceResponse(
        stream,
        ping=state.settings.keepalive_s,
        send_timeout=state.settings.send_timeout_s,
        headers={"Cache-Control": "no-store"},
    )


@ops.op(
    "GET",
    "/sessions/{session_id}/log",
    tag="log",
    query=LogQuery,
    response=EventsOut,
    stream=True,
    errors=(400, 401, 403, 404, 422),
)
async def session_log(call: Call[LogQuery, Any]) -> Any:
    """A session's durable events after `after` (exclusive): JSON, or SSE that follows."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    await off_loop(state.reads.get_session, sid)
    limit = call.query.limit
    src = _Source(
        fetch=lambda at: state.reads.events(sid, at[1], limit=limit),
        key=lambda ev: ev.seq,
        pos=lambda ev: (0, ev.seq),
        watermark=lambda: (0, state.reads.high_water(sid)),
        resolve=lambda seq: (0, seq),
        sync_field="seq",
        gap_free=True,
    )
    return await _response(state, src, sid, call)


@ops.op(
    "GET",
    "/events",
    tag="log",
    query=LogQuery,
    response=EventsOut,
    stream=True,
    errors=(400, 401, 403, 422),
)
async def instance_log(call: Call[LogQuery, Any]) -> Any:
    """Every session's durable events in the instance-wide log's order (ids as cursors): JSON,
    or SSE that follows; a non-admin gets their own sessions' events only."""
    state: ServerState = call.state
    limit = call.query.limit
    p = call.principal
    visible = None if p.admin else Visible(state.runtime.store.access, p.user)

    def fetch(at: Position) -> list[StoredEvent]:
        batch = state.reads.feed.events_since(at[1], limit, after_tx=at[0])
        return batch if visible is None else visible.learn(batch)

    src = _Source(
        fetch=fetch,
        key=lambda ev: ev.id,
        pos=lambda ev: ev.position,
        watermark=state.reads.feed.last_event_position,
        resolve=state.reads.feed.event_position,
        sync_field="id",
        gap_free=False,
        visible=visible,
    )
    return await _response(state, src, None, call)
