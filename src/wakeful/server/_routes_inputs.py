"""Input endpoints: admit a prompt (steer or queue), interrupt, request a compaction, move.

Admission is durable before anything runs (invariant 1): the store writes the input, then, with
`resume`, the coordinator of this process is woken. Reusing an input id with the same content
returns the original (`created: false`); with different content it is a 409.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from ..errors import NotFoundError, UsageError
from ..execution import SendResult, off_loop
from ..messages import block_from_dict
from ..runner import TurnResult
from ..store import AdmissionRequest
from ._api import ApiError, Call, Registry, respond
from ._models import (
    AdmissionOut,
    CompactIn,
    InterruptOut,
    MoveIn,
    MoveOut,
    PromptIn,
    TurnSummaryOut,
)
from ._state import ServerState

ops = Registry()


def _payload(body: PromptIn) -> dict[str, JsonValue]:
    if body.blocks is not None:
        for block in body.blocks:  # InvalidMessageError (422) names the first bad field
            block_from_dict(block)
        payload: dict[str, JsonValue] = {"blocks": list(body.blocks)}
    else:
        payload = {"text": body.text}
    if body.metadata:
        payload["metadata"] = body.metadata
    return payload


def _turn(t: TurnResult) -> TurnSummaryOut:
    return TurnSummaryOut(
        turn_id=t.turn_id,
        outcome=t.outcome,
        steps=t.steps,
        input_tokens=t.usage.input_tokens,
        output_tokens=t.usage.output_tokens,
        cache_read_tokens=t.usage.cache_read_tokens,
        cache_write_tokens=t.usage.cache_write_tokens,
        error=t.error,
        final_text=t.final_text,
        truncated=t.truncated,
    )


async def admit_prompt(
    state: ServerState, session_id: str, body: PromptIn, *, actor: str, resolve: bool = False
) -> AdmissionOut:
    """Admit `body` into an existing session as `actor`'s (the caller: `Principal.name`);
    wake it (and wait for it) as asked.

    With `resolve`, `session_id` may be a unique prefix. The admission itself looks the id up
    (an unknown session is a `NotFoundError` and nothing is written), so a whole id costs no
    query of its own; only an id no session has is then resolved as a prefix (404 for none,
    422 for several) and admitted again, in a second worker-thread call. The admission goes
    through the server's `AdmissionLane`: alone when one of its calls is free, else in one
    transaction with the prompts that arrived while they were busy."""
    if body.wait and not body.resume:
        raise UsageError("wait=true needs resume=true")
    payload = _payload(body)

    def request(sid: str) -> AdmissionRequest:
        return AdmissionRequest(sid, body.input_id, "user", payload, body.delivery, actor)

    def resolved() -> tuple[str, SendResult]:
        sid = state.reads.resolve_session_id(session_id)
        return sid, state.runtime.send(
            session_id=sid,
            input_id=body.input_id,
            payload=payload,
            delivery=body.delivery,
            resume=False,
            create=False,
            actor=actor,
        )

    try:
        sent = await state.lane.admit(request(session_id))
    except NotFoundError:
        if not resolve:
            raise
        session_id, sent = await off_loop(resolved)
    state.hub.nudge()
    status = sent.status  # as of admission; re-read only after waiting for the drain
    turns: list[TurnSummaryOut] | None = None
    if body.resume and body.wait:
        turns = [_turn(t) for t in await state.runtime.drive(session_id)]
        status = (await off_loop(state.reads.input, session_id, sent.input_id)).status
    elif body.resume:
        state.wake(session_id)
    return AdmissionOut(
        session_id=session_id,
        input_id=sent.input_id,
        created=sent.created,
        status=status,
        message_id=None if status == "rejected" else sent.message_id,
        turns=turns,
    )


@ops.op(
    "POST",
    "/sessions/{session_id}/prompt",
    tag="inputs",
    body=PromptIn,
    status=202,
    response=AdmissionOut,
    also={200: ("Admitted and driven (`wait: true`)", AdmissionOut)},
    errors=(400, 401, 404, 409, 413, 422),
    resolve_id=False,
)
async def prompt(call: Call[Any, PromptIn]) -> Any:
    """Admit a prompt (steer or queue); with `resume` (default) wake the session's drain."""
    out = await admit_prompt(
        call.state, call.path["session_id"], call.body, actor=call.principal.name, resolve=True
    )
    return respond(out, 200 if call.body.wait else 202)


@ops.op(
    "POST",
    "/sessions/{session_id}/interrupt",
    tag="inputs",
    response=InterruptOut,
    errors=(401, 404),
)
async def interrupt(call: Call[Any, Any]) -> InterruptOut:
    """Hard-interrupt the current turn, here or in whichever process drives the session; on an
    idle session nothing is written (`requested: false`)."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    requested = await off_loop(state.runtime.busy, sid)  # idle: nothing is written
    stopped = await state.runtime.ainterrupt(sid, actor=call.principal.name) if requested else False
    state.hub.nudge()
    return InterruptOut(session_id=sid, requested=requested, stopped_local=stopped)


@ops.op(
    "POST",
    "/sessions/{session_id}/compact",
    tag="inputs",
    body=CompactIn,
    status=202,
    response=AdmissionOut,
    errors=(400, 401, 404, 409, 413, 422),
)
async def compact(call: Call[Any, CompactIn]) -> AdmissionOut:
    """Request a manual compaction: a control item in the inbox, driven like any input."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    sent = await off_loop(
        state.runtime.compact,
        sid,
        tail_turns=call.body.tail_turns,
        input_id=call.body.input_id,
        resume=False,
        actor=call.principal.name,
    )
    if call.body.resume:
        state.wake(sid)
    else:
        state.hub.nudge()
    return AdmissionOut(
        session_id=sid,
        input_id=sent.input_id,
        created=sent.created,
        status=sent.status,
        message_id=sent.message_id,
    )


@ops.op(
    "POST",
    "/sessions/{session_id}/move",
    tag="inputs",
    body=MoveIn,
    status=202,
    response=MoveOut,
    errors=(400, 401, 404, 409, 413, 422),
)
async def move(call: Call[Any, MoveIn]) -> MoveOut:
    """Move the session to another directory of this host: a control item applied at its next
    idle boundary (tools, instructions, configuration and permissions follow). A destination
    that is not a directory here is refused (400) and nothing is stored."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    await off_loop(state.reads.get_session, sid)  # 404 first
    try:
        sent = await off_loop(
            state.runtime.move,
            sid,
            call.body.location,
            input_id=call.body.input_id,
            resume=False,
            actor=call.principal.name,
        )
    except UsageError as err:
        raise ApiError(400, "bad_location", str(err)) from None
    item = await off_loop(state.reads.input, sid, sent.input_id)
    if call.body.resume:
        state.wake(sid)
    else:
        state.hub.nudge()
    return MoveOut(
        session_id=sid,
        input_id=item.input_id,
        created=sent.created,
        status=item.status,
        location=str(item.payload["location"]),
    )
