"""A step's single terminal event and its hosted calls (issue 37 item 23).

003: "Every local and hosted call reaches durable success or failure before the Step publishes
its single terminal ended or failed event." The runner publishes `step_done` once per step that
began: `ended` when its reply and its calls' results are durable (the step boundary's write, the
held final reply's write, or the turn's end after a completed step), `failed` when the turn ends
otherwise during it (a provider error, an interrupt, a spent allowance). `step_end` stays what
it was: the reply finished streaming.

Hosted calls (tools the provider ran itself: `ServerToolUseBlock`, Anthropic's `web_search`)
are tracked as calls: each one in a reply is published as a `tool_start` and a `tool_end`
(`hosted: true`) when the reply is kept, failed when its result block is an error or missing,
and listed in the step's `step_done`. They are durable as calls too: a `tool.hosted` event per
call (`HostedToolCall`: id, name, input, outcome) is committed with the reply that holds it,
so the log, not only the live stream, says which hosted calls a step made and how they ended.
"""

from __future__ import annotations

from pydantic import JsonValue

from ..events import HostedToolCall
from ..messages import Message, ServerToolResultBlock, ServerToolUseBlock
from ._live import LiveKind


def hosted_calls(message: Message) -> list[dict[str, JsonValue]]:
    """The hosted calls of a reply: id, name, input and `completed` / `failed` (its result is an
    error, or the reply holds none)."""
    results = {b.tool_use_id: b for b in message.blocks if isinstance(b, ServerToolResultBlock)}
    out: list[dict[str, JsonValue]] = []
    for block in message.blocks:
        if isinstance(block, ServerToolUseBlock):
            result = results.get(block.id)
            content = None if result is None else result.content
            kind = content.get("type") if isinstance(content, dict) else None
            failed = result is None or (isinstance(kind, str) and kind.endswith("error"))
            out.append(
                {
                    "call_id": block.id,
                    "name": block.name,
                    "input": block.input,
                    "status": "failed" if failed else "completed",
                }
            )
    return out


def hosted_events(message: Message) -> list[HostedToolCall]:
    """The `tool.hosted` events of a reply's hosted calls, to commit with the reply."""
    return [
        HostedToolCall(
            call_id=str(call["call_id"]),
            message_id=message.id,
            name=str(call["name"]),
            input=call["input"] if isinstance(call["input"], dict) else {},
            status="failed" if call["status"] == "failed" else "completed",
        )
        for call in hosted_calls(message)
    ]


def hosted_call_events(
    calls: list[dict[str, JsonValue]],
) -> list[tuple[LiveKind, dict[str, JsonValue]]]:
    """The live events of a reply's hosted calls, in order: each call's `tool_start`, then its
    `tool_end` (`hosted: true`, an error when the call failed, no output of its own)."""
    events: list[tuple[LiveKind, dict[str, JsonValue]]] = []
    for call in calls:
        named: dict[str, JsonValue] = {"call_id": call["call_id"], "name": call["name"]}
        events.append(("tool_start", {**named, "input": call["input"], "hosted": True}))
        failed = call["status"] == "failed"
        end = {**named, "hosted": True, "is_error": failed, "output": "", "output_chars": 0}
        events.append(("tool_end", end))
    return events


def step_done(
    turn_id: str, step: int, ended: bool, error: str | None, hosted: list[dict[str, JsonValue]]
) -> dict[str, JsonValue]:
    """The `step_done` event of a step: `ended` or `failed` (with the error), and its hosted
    calls."""
    outcome = "ended" if ended else "failed"
    return {
        "turn_id": turn_id,
        "step": step,
        "outcome": outcome,
        "error": error,
        "hosted_calls": list(hosted),
    }
