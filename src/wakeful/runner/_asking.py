"""Approvals inside a turn: which calls of a reply wait for a decision, and asking for it.

A call whose permission is `ask` (valid input, a known tool, not allowed `always` in this
session) needs a decision before it runs. Such calls wait durably first (`approval.requested`,
committed with the reply instead of their `tool.started`). With nobody present the turn then
pauses (`_approvals.py`); with someone present (`RunContext.ask`, a terminal) each is asked, one
at a time, and the decisions are durable (`approval.decided`, committed by the runner with the
calls' `tool.started`) before any call runs. A person who leaves the question (Ctrl-C, an
interrupt, the callback answering None) leaves that call and the ones after it waiting, as if
nobody had been there: the turn pauses and `wakeful approve` decides them later. A failing
callback denies.
"""

from __future__ import annotations

import asyncio

from ..events import ApprovalDecided, ApprovalRequested, Decision
from ..messages import Message
from ._approvals import preview
from ._context import Ask, AskResult, RunContext
from .tools import permission_key


def needs_approval(
    ctx: RunContext, message: Message, grants: frozenset[str]
) -> list[ApprovalRequested]:
    """The calls of `message` whose permission is `ask` (valid input, a known tool, not in
    `grants`, the tools allowed `always` in this session): what someone must decide before
    they run."""
    out: list[ApprovalRequested] = []
    for call in message.tool_calls():
        tool = ctx.tools.get(call.name)
        if tool is None or ctx.policy.decide(permission_key(tool, call.name)) != "ask":
            continue
        if call.name in grants:
            continue
        try:
            tool.input_model.model_validate(call.input)
        except ValueError:  # the call fails anyway: nobody is asked to approve it
            continue
        shown = preview(call.name, dict(call.input), ctx.tool_context.workspace)
        request = ApprovalRequested(
            call_id=call.id,
            message_id=message.id,
            name=call.name,
            input=dict(call.input),
            preview=shown,
        )
        out.append(request)
    return out


async def ask_approvals(
    ctx: RunContext, message: Message, grants: frozenset[str]
) -> tuple[dict[str, bool], frozenset[str], list[ApprovalDecided], tuple[ApprovalRequested, ...]]:
    """Decide the calls of `message`: those allowed `always` (`grants`) run; the interactive
    callback is asked about each other call needing approval, one at a time. Returns the
    decisions by call id, the grants with the `always` answers added, the `approval.decided`
    events to commit before any call runs, and the requests left undecided (the person left
    the question: they stay waiting, the turn pauses)."""
    decided = {c.id: True for c in message.tool_calls() if c.name in grants}
    ask = ctx.ask
    if ask is None:
        return decided, grants, [], ()
    events: list[ApprovalDecided] = []
    requests = needs_approval(ctx, message, grants)
    for n, request in enumerate(requests):
        if request.name in grants:  # an `always` given for an earlier call here
            decided[request.call_id] = True
            continue
        decision = await _asked(ctx, ask, request)
        if decision is None:  # left: this call and the rest wait for `wakeful approve`
            return decided, grants, events, tuple(requests[n:])
        if decision == "always":
            grants = grants | {request.name}
        decided[request.call_id] = decision != "deny"
        events.append(
            ApprovalDecided(call_id=request.call_id, decision=decision, name=request.name)
        )
    return decided, grants, events, ()


async def _asked(ctx: RunContext, ask: Ask, request: ApprovalRequested) -> Decision | None:
    """The callback's answer as a decision; None when the person left the question (an
    interrupt while asking, or before, or the callback answered None): the call stays
    waiting. A failing callback denies; it must not crash the turn."""
    if ctx.interrupt.is_set():
        return None
    asking = asyncio.ensure_future(ask(request.name, dict(request.input)))
    waiter = asyncio.ensure_future(ctx.interrupt.wait())
    try:
        await asyncio.wait({asking, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if not asking.done():
        asking.cancel()
        await asyncio.gather(asking, return_exceptions=True)
        return None
    try:
        answer = asking.result()
    except Exception:  # a failing callback denies; it must not crash the turn
        return "deny"
    return None if answer is None else _decision(answer)


def _decision(answer: AskResult) -> Decision:
    """An answer of the approval callback as a decision (anything unclear denies)."""
    if answer is True or answer == "allow":
        return "allow"
    if answer == "always":
        return "always"
    return "deny"
