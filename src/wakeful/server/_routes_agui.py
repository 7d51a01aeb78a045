"""AG-UI over HTTP: run a session from an AG-UI client, and follow it as AG-UI events.

`POST /sessions/{id}/agui` takes a `RunAgentInput` (the AG-UI package's type): its newest user
message is admitted as a prompt (input id from the message's id, so the whole history sent
again admits nothing twice), its `resume` entries are approval decisions (`docs/approvals.md`);
the answer streams the run that takes them, to its `RUN_FINISHED` (or `RUN_ERROR`).
`GET /sessions/{id}/agui` follows the session's runs. Both resume after `Last-Event-ID`
(`SEQ:K`, `_agui.py`), so a reconnect sees every event once.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from ag_ui.core import RunAgentInput, TextPart, UserMessage
from pydantic import JsonValue
from sse_starlette import EventSourceResponse, ServerSentEvent

from ..errors import ConflictError, NotFoundError
from ..events import InputDelivered, InputEnqueued, StoredEvent, TurnStarted
from ..execution import off_loop, pending_approvals
from ._agui import AGUI_ID, TYPES, AguiView, parse_cursor
from ._api import ApiError, Call, Registry
from ._hub import Subscription
from ._models import AguiQuery
from ._state import ServerState

ops = Registry()
_BATCH = 500
_INPUT_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,120}$")
_DECISIONS = frozenset({"allow", "always", "deny"})
Until = Callable[[StoredEvent, list[Any]], bool]
ID = "^[0-9]{1,16}(:[0-9]{1,6})?$"
# In OpenAPI 3.1 the `schema` of text/event-stream describes one event.
EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One AG-UI event (`data`: its JSON, camelCase, as the `ag-ui-protocol` "
    "types dump it: RUN_STARTED, RUN_FINISHED, RUN_ERROR, STATE_SNAPSHOT, TEXT_MESSAGE_START, "
    "TEXT_MESSAGE_CONTENT, TEXT_MESSAGE_END, TOOL_CALL_START, TOOL_CALL_ARGS, TOOL_CALL_END, "
    "TOOL_CALL_RESULT); `id` is `SEQ:K`, the cursor of a reconnect.",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]{1,16}:[0-9]{1,6}$"},
        "data": {"type": "string", "contentMediaType": "application/json"},
        "retry": {"type": "integer"},
    },
    "required": ["data"],
}


def _cursor(call: Call[Any, Any], default: str) -> tuple[int, int]:
    header = call.request.headers.get("last-event-id")
    try:
        return parse_cursor(header if header and header.strip() else default)
    except ValueError:
        raise ApiError(400, "bad_header", "Last-Event-ID must be SEQ or SEQ:K") from None


async def _fed(state: ServerState, sid: str, after: int) -> list[StoredEvent]:
    return await off_loop(state.reads.events, sid, after, _BATCH, TYPES)


async def _stream(
    state: ServerState,
    sid: str,
    cursor: tuple[int, int],
    sub: Subscription | None,
    idle_timeout: float | None,
    until: Until | None = None,
) -> AsyncIterator[ServerSentEvent]:
    """Rebuild the projection up to `cursor` silently, then emit every AG-UI event after it;
    with `sub`, wait for commits (the hub's doorbell) and read them from the store."""
    view = AguiView(sid)
    seq, skip, last = cursor[0], cursor[1], 0
    try:
        while True:
            batch = await _fed(state, sid, last)
            for stored in batch:
                last = stored.seq
                out = view.feed(stored)
                done = until is not None and until(stored, out)
                first = 0 if stored.seq > seq else len(out)
                if stored.seq == seq and skip >= 0:  # `SEQ:K`: the rest of that event's
                    first = skip + 1
                for k in range(first, len(out)):
                    yield ServerSentEvent(
                        data=out[k].model_dump_json(by_alias=True), id=f"{stored.seq}:{k}"
                    )
                if done:
                    return
            if batch:
                continue
            if sub is None:
                return
            try:
                await asyncio.wait_for(sub.queue.get(), idle_timeout)
            except TimeoutError:
                return
            while not sub.queue.empty():  # one read of the store answers every doorbell
                sub.queue.get_nowait()
    finally:
        if sub is not None:
            state.hub.unsubscribe(sub)


def _response(stream: AsyncIterator[ServerSentEvent], state: ServerState) -> EventSourceResponse:
    return EventSourceResponse(
        stream,
        ping=state.settings.keepalive_s,
        send_timeout=state.settings.send_timeout_s,
        headers={"Cache-Control": "no-store"},
    )


@ops.op(
    "GET",
    "/sessions/{session_id}/agui",
    tag="agui",
    query=AguiQuery,
    stream=True,
    sse=(EVENT, ID),
    errors=(400, 401, 404, 422),
)
async def agui_follow(call: Call[AguiQuery, Any]) -> Any:
    """The session's runs as AG-UI events (SSE), after a cursor; resumable."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    await off_loop(state.reads.get_session, sid)
    cursor = _cursor(call, call.query.after)
    sub = await state.hub.subscribe(sid) if call.query.follow else None
    return _response(_stream(state, sid, cursor, sub, call.query.idle_timeout), state)


def _decision(entry: Any) -> str:
    """A resume entry as an approval decision: `cancelled` denies; a resolved entry's payload
    is `{"decision": ...}`, a decision string, or a boolean (true allows)."""
    if entry.status == "cancelled":
        return "deny"
    payload = entry.payload
    if isinstance(payload, dict):
        payload = payload.get("decision")
    if payload is True:
        return "allow"
    if payload is False:
        return "deny"
    if isinstance(payload, str) and payload in _DECISIONS:
        return payload
    raise ApiError(
        422,
        "invalid",
        f"resume entry {entry.interrupt_id}: payload must be "
        '{"decision": "allow" | "always" | "deny"} (or true / false)',
    )


def _prompt(body: RunAgentInput) -> tuple[str, dict[str, JsonValue]] | None:
    """The newest user message as (input id, payload), or None when there is none."""
    users = [m for m in body.messages if isinstance(m, UserMessage)]
    if not users:
        return None
    message = users[-1]
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        text = "\n\n".join(p.text for p in content if isinstance(p, TextPart))
    if not text.strip() or "\x00" in text:
        raise ApiError(422, "invalid", "the newest user message has no text (or holds NUL)")
    mid = message.id
    input_id = (
        f"agui_{mid}"
        if _INPUT_ID.match(mid)
        else "agui_" + hashlib.sha256(mid.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    )
    # the client's message id, so the stream shows its message under the id it knows
    return input_id, {"text": text, "metadata": {AGUI_ID: mid}}


def _admit(state: ServerState, sid: str, body: RunAgentInput, actor: str) -> dict[str, bool]:
    """Record the resume entries' decisions and the newest user message as `actor`'s (in a
    worker thread; nothing is woken), each checked before any is written. `ApiError` 422 when the
    input holds neither, `NotFoundError` for an entry naming no waiting or decided call.
    Returns each input id with whether this request created it."""
    decisions = [(e.interrupt_id, _decision(e)) for e in body.resume or ()]
    prompt = _prompt(body)
    if not decisions and prompt is None:
        raise ApiError(422, "invalid", "nothing to run: no user message and no resume entries")
    waiting = {r.call_id for r in pending_approvals(state.reads, sid)}
    out: dict[str, bool] = {}
    for call_id, decision in decisions:
        if call_id in waiting:
            continue
        try:  # decided before: the same request sent again admits nothing
            item = state.reads.input(sid, f"approval_{call_id}")
        except NotFoundError:
            raise NotFoundError(f"no call {call_id} awaits approval") from None
        if item.payload.get("decision") != decision:
            raise ConflictError(f"the call {call_id} was decided otherwise")
        out[item.input_id] = False
    for call_id, decision in decisions:
        if call_id in waiting:
            sent = state.runtime.approve(sid, call_id, decision, resume=False, actor=actor)
            out[sent.input_id] = sent.created
    if prompt is not None:
        input_id, payload = prompt
        sent = state.runtime.send(
            session_id=sid,
            input_id=input_id,
            payload=payload,
            resume=False,
            create=False,
            actor=actor,
        )
        out[sent.input_id] = sent.created
    return out


def _start(state: ServerState, sid: str, mine: set[str]) -> tuple[int, int]:
    """Where the run of `mine` starts: before the first of them was admitted, or before the
    start of the run open then (the stream begins with its `RUN_STARTED`)."""
    view = AguiView(sid)
    last = 0
    while batch := state.reads.events(sid, last, _BATCH, TYPES):
        for stored in batch:
            event = stored.event
            if isinstance(event, InputEnqueued) and event.input_id in mine:
                return ((view.run_seq if view.run_id else stored.seq) - 1, -1)
            view.feed(stored)
            last = stored.seq
    return (last, -1)


def _until(mine: set[str]) -> Until:
    """The stream of a run request ends with the run that took all of `mine`."""
    taken: set[str] = set()

    def done(stored: StoredEvent, out: list[Any]) -> bool:
        event = stored.event
        if isinstance(event, InputDelivered) and event.input_id in mine:
            taken.add(event.input_id)
        elif isinstance(event, TurnStarted):
            taken.update(mine.intersection(event.input_ids))
        ended = any(getattr(e, "type", None) in ("RUN_FINISHED", "RUN_ERROR") for e in out)
        return ended and taken >= mine

    return done


@ops.op(
    "POST",
    "/sessions/{session_id}/agui",
    tag="agui",
    body=RunAgentInput,
    stream=True,
    sse=(EVENT, ID),
    errors=(400, 401, 404, 409, 413, 422),
)
async def agui_run(call: Call[Any, RunAgentInput]) -> Any:
    """Run the session from an AG-UI `RunAgentInput`; stream that run as AG-UI events."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    body = call.body
    if body.thread_id != sid:
        raise ApiError(422, "invalid", f"threadId must be the session's id ({sid})")
    admitted = await off_loop(_admit, state, sid, body, call.principal.name)
    mine = set(admitted)
    sub = await state.hub.subscribe(sid)
    state.wake(sid)
    header = call.request.headers.get("last-event-id")
    if header and header.strip():
        cursor = _cursor(call, "0")
    else:
        # a request sent again (nothing created) streams the run of what it admitted first
        new = {i for i, created in admitted.items() if created}
        cursor = await off_loop(_start, state, sid, new or mine)
    return _response(_stream(state, sid, cursor, sub, None, _until(mine)), state)
