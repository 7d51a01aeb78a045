"""Input endpoints: admit a prompt (steer or queue), interrupt, request a compaction.

Admission is durable before anything runs (invariant 1): the store writes the input, then, with
`resume`, the coordinator of this process is woken. Reusing an input id with the same content
returns the original (`created: false`); with different content it is a 409.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from ..errors import UsageError
from ..messages import block_from_dict
from ..runner import TurnResult
from ._api import Call, Registry, respond
from ._models import AdmissionOut, CompactIn, InterruptOut, PromptIn, TurnSummaryOut
from ._state import ServerState, db

ops = Registry()


def _payload(body: PromptIn) -> dict[str, JsonValue]:
    if body.blocks is not None:
        for block in body.blocks:  # InvalidMessageError (422) names the first bad field
            block_from_dict(block)
        payload: dict[str, JsonValue] = {"blocks": list(body.blocks)}  # type: ignore[dict-item]
    else:
        payload = {"text": body.text}
    if body.metadata:
        payload["metadata"] = body.metadata
    return payload


def _turn(t: TurnResult) -> TurnSummaryOut:
    return TurnSummaryOut(
        turn_id=t.turn_id, outcome=t.outcome, steps=t.steps, input_tokens=t.usage.input_tokens,
        output_tokens=t.usage.output_tokens, error=t.error, final_text=t.final_text,
    )  # fmt: skip


async def admit_prompt(state: ServerState, session_id: str, body: PromptIn) -> AdmissionOut:
    """Admit `body` into an existing session; wake it (and wait for it) as asked."""
    if body.wait and not body.resume:
        raise UsageError("wait=true needs resume=true")
    payload = _payload(body)
    adm = await db(state.store.admit, session_id, body.input_id, "user", payload, body.delivery)
    state.hub.nudge()
    item = adm.item  # its status as of admission; re-read only after waiting for the drain
    turns: list[TurnSummaryOut] | None = None
    if body.resume and body.wait:
        results = await state.runtime.coordinator.resume(session_id)
        turns = [_turn(t) for t in state.runtime.turns_of(results)]
        item = await db(state.store.input, session_id, item.input_id)
    elif body.resume:
        state.wake(session_id)
    return AdmissionOut(
        session_id=session_id, input_id=item.input_id, created=adm.created, status=item.status,
        turns=turns,
    )  # fmt: skip


@ops.op("POST", "/sessions/{session_id}/prompt", tag="inputs", body=PromptIn, status=202,
        response=AdmissionOut, also={200: ("Admitted and driven (`wait: true`)", AdmissionOut)},
        errors=(400, 401, 404, 409, 413, 422))  # fmt: skip
async def prompt(call: Call[Any, PromptIn]) -> Any:
    """Admit a prompt (steer or queue); with `resume` (default) wake the session's drain."""
    out = await admit_prompt(call.state, call.path["session_id"], call.body)
    return respond(out, 200 if call.body.wait else 202)


@ops.op("POST", "/sessions/{session_id}/interrupt", tag="inputs", response=InterruptOut,
        errors=(401, 404))  # fmt: skip
async def interrupt(call: Call[Any, Any]) -> InterruptOut:
    """Hard-interrupt the current turn, here or in whichever process drives the session."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    stopped = state.runtime.interrupt(sid)
    state.hub.nudge()
    return InterruptOut(session_id=sid, requested=True, stopped_local=stopped)


@ops.op("POST", "/sessions/{session_id}/compact", tag="inputs", body=CompactIn, status=202,
        response=AdmissionOut, errors=(400, 401, 404, 409, 413, 422))  # fmt: skip
async def compact(call: Call[Any, CompactIn]) -> AdmissionOut:
    """Request a manual compaction: a control item in the inbox, driven like any input."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    payload: dict[str, JsonValue] = {"reason": "manual"}
    if call.body.tail_turns is not None:
        payload["tail_turns"] = call.body.tail_turns
    adm = await db(state.store.admit, sid, call.body.input_id, "compaction", payload, "steer")
    if call.body.resume:
        state.wake(sid)
    else:
        state.hub.nudge()
    return AdmissionOut(session_id=sid, input_id=adm.item.input_id, created=adm.created,
                        status=adm.item.status)  # fmt: skip
