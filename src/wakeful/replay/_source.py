"""A recorded step, read back: its receipt, the request rebuilt and verified against the
receipt's digest, and the reply and usage the session recorded for it.

Invariant: nothing here writes. A request is only handed out after it rebuilt to exactly the
recorded digest (the provider of the receipt's own model shapes the body), so what a replay
sends is what was sent, adapted only by the target provider's own wire format.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pydantic import JsonValue

from ..errors import CorruptStateError, NotFoundError
from ..events import MessageAdded, ReceiptRecorded, UsageRecorded
from ..messages import Message
from ..providers import ModelRequest, Provider, make_provider
from ..runner import rebuild_request, request_digest
from ..store import SqlStore


@dataclass(frozen=True, slots=True)
class Step:
    """A step receipt and where it sits: its turn's number (1-based, in start order)."""

    turn: int
    receipt: ReceiptRecorded


def step_receipts(store: SqlStore, session_id: str) -> list[Step]:
    """The session's step receipts in order, each with its turn's number."""
    order = {t.turn_id: n for n, t in enumerate(store.turns(session_id), 1)}
    return [
        Step(order.get(r.turn_id or "", 0), r)
        for r in store.receipts(session_id)
        if r.purpose == "step"
    ]


def pick(steps: list[Step], turn: int | None, step: int | None, attempt: int | None) -> int:
    """The index in `steps` of the receipt asked for: `turn` (default the newest with a step),
    `step` in it (default its last), `attempt` (default the last). `NotFoundError` naming
    what exists when nothing matches."""
    if not steps:
        raise NotFoundError("no step receipt in this session (nothing was sent yet)")
    turn = turn if turn is not None else steps[-1].turn
    in_turn = [i for i, s in enumerate(steps) if s.turn == turn]
    if not in_turn:
        have = sorted({s.turn for s in steps})
        raise NotFoundError(f"no turn {turn} with a request (turns: {', '.join(map(str, have))})")
    if step is not None:
        in_turn = [i for i in in_turn if steps[i].receipt.step == step]
        if not in_turn:
            raise NotFoundError(f"no step {step} in turn {turn}")
    if attempt is not None:
        in_turn = [i for i in in_turn if steps[i].receipt.attempt == attempt]
        if not in_turn:
            raise NotFoundError(f"no attempt {attempt} of that step in turn {turn}")
    if step is None:  # the last step: its newest attempt
        last = steps[in_turn[-1]].receipt.step
        in_turn = [i for i in in_turn if steps[i].receipt.step == last]
    return in_turn[-1]


def label(step: Step) -> str:
    """How a step is named in output: `turn T step S attempt A`."""
    r = step.receipt
    return f"turn {step.turn} step {r.step} attempt {r.attempt}"


def body_text(body: JsonValue) -> str:
    """A body as printed and diffed: indented JSON, keys sorted."""
    return json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False)


def body_diff(before: JsonValue, after: JsonValue, old: str, new: str) -> list[str]:
    """A unified diff of two bodies (lines without their newline)."""
    return list(
        difflib.unified_diff(
            body_text(before).splitlines(), body_text(after).splitlines(), old, new, lineterm=""
        )
    )


def wire_provider(spec: str, options: Mapping[str, Any]) -> Provider:
    """A provider of `spec` used only for its `wire_request` (the body it sends): built with
    the `[providers]` options but no key check, since nothing is sent through it."""
    return make_provider(spec, **dict(options))


@dataclass(frozen=True, slots=True)
class Recorded:
    """A step as the session recorded it: the receipt, its request (rebuilt, verified), the
    reply (None: the attempt got none, e.g. a failed attempt) with its usage, and the time
    from the receipt's commit to the reply's (the request's latency, within a commit)."""

    session_id: str
    step: Step
    request: ModelRequest
    reply: Message | None
    usage: UsageRecorded | None
    latency_ms: int | None
    seq: int
    wire: str  # the name of the provider the request was built for (its `to_wire` shaping)


def load_step(store: SqlStore, session_id: str, step: Step, options: Mapping[str, Any]) -> Recorded:
    """The recorded step: its request rebuilt through the provider of the receipt's model and
    checked against the receipt's digest (`CorruptStateError` when it does not rebuild), the
    reply that followed it and the usage recorded for it."""
    receipt = step.receipt
    provider = wire_provider(receipt.model, options)
    request = rebuild_request(store, session_id, receipt, provider.name)
    if request_digest(provider, request) != receipt.request_digest:
        raise CorruptStateError(
            f"the request of {label(step)} does not rebuild to its recorded digest "
            f"(`wakeful debug prompt {session_id} --turn {step.turn} --step {receipt.step}` "
            "shows it); it cannot be replayed as sent"
        )
    types = ["receipt.recorded", "message.added", "usage.recorded"]
    seq, at, reply, reply_at, usage = 0, 0, None, 0, None
    for stored in store.events(session_id, types=types):
        event = stored.event
        if isinstance(event, ReceiptRecorded) and event.receipt_id == receipt.receipt_id:
            seq, at = stored.seq, stored.at_ms
        elif isinstance(event, UsageRecorded) and event.receipt_id == receipt.receipt_id:
            usage = event
        elif (
            seq
            and reply is None
            and isinstance(event, MessageAdded)
            and event.message.role == "assistant"
            and event.turn_id == receipt.turn_id
        ):
            reply, reply_at = event.message, stored.at_ms
    latency = reply_at - at if reply is not None else None
    return Recorded(session_id, step, request, reply, usage, latency, seq, provider.name)


def for_target(store: SqlStore, recorded: Recorded, target: Provider) -> ModelRequest:
    """The recorded request as `target` takes it: the same sections and messages, the history
    shaped for the target's wire format (pairing repair is per provider), its model, and an
    output allowance within the target's."""
    request = recorded.request
    if target.name != recorded.wire:
        request = rebuild_request(store, recorded.session_id, recorded.step.receipt, target.name)
    limit = request.max_output_tokens
    allowance = target.max_output_tokens if limit is None else min(limit, target.max_output_tokens)
    return replace(request, model=target.model, max_output_tokens=allowance, attempt=1)
