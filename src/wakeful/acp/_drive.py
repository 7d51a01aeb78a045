"""Driving a session for an editor: its inputs run here while its stream goes to the client.

A prompt (or the recovery a `session/load` starts) drives the session with the runtime's
coordinator and forwards `runtime.events(...)` to the editor as session updates. Permission is
wakeful's **durable approval**: a call whose permission is `ask` pauses the turn with its
`approval.requested` (nothing runs); the driver then asks the editor
(`session/request_permission`), records the answer as an approval decision (an inbox item,
durable before the call runs) and drives the session on. A killed agent therefore loses no
question: the session still awaits the decision, and the next prompt asks again before its own
input runs. A question the editor cancels (`session/cancel`) stays undecided.

The invariant: every update of a turn is sent before the driver acts on that turn's end (asks
about its calls, or answers the prompt), so the editor sees a call before it is asked about it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from acp import Client, RequestError
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    AllowedOutcome,
    PermissionOption,
    StopReason,
    TextContentBlock,
)

from ..events import ApprovalRequested
from ..execution import Durable, EventStream, ReasoningChunk, Runtime, TextChunk, TurnEnd, off_loop
from ..runner import TurnResult
from . import _updates

log = logging.getLogger("wakeful.acp")

# The choices a permission request offers and the approval decision each records.
OPTIONS = (
    PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="always", name="Always allow (this session)", kind="allow_always"),
    PermissionOption(option_id="deny", name="Deny", kind="reject_once"),
)
_CATCH_UP_S = 10.0  # how long a turn's last updates may take to reach the stream's reader


@dataclass
class Driver:
    """One drive of one session for the editor: the updates forwarded, the turns run."""

    runtime: Runtime
    client: Client
    session_id: str
    root: Path
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    turns: list[TurnResult] = field(default_factory=list)
    _ended: set[str] = field(default_factory=set)
    _seen: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(
        self, admit: Callable[[], list[str]] | None, *, ask: bool = True
    ) -> TurnResult | None:
        """Admit inputs (`admit`, called in a worker thread, returns their ids) and drive
        the session until they are settled and nothing awaits a decision the editor can give
        (`ask` false: calls awaiting approval are left waiting). Without `admit`, drive what
        the session has (pending input, a turn a crash left open) once. Returns the last turn
        run here."""
        async with self.runtime.events(self.session_id) as stream:
            forward = asyncio.create_task(self._forward(stream))
            try:
                if admit is None:
                    await self._ran(await self.runtime.drive(self.session_id))
                    await self._drive([], ask)
                else:
                    await self._drive(await off_loop(admit), ask)
            finally:
                forward.cancel()
                await asyncio.gather(forward, return_exceptions=True)
        return self.turns[-1] if self.turns else None

    async def _drive(self, inputs: list[str], ask: bool) -> None:
        rt, sid = self.runtime, self.session_id
        while not self.cancelled.is_set():
            waiting = await off_loop(rt.approvals, sid) if ask else []
            if waiting:
                decided = await self._ask(waiting)
                if decided is None:
                    return
                inputs = decided + inputs
            if not inputs:
                return
            await self._ran(await rt.drive_input(sid, inputs.pop(0)))

    async def _ran(self, ran: list[TurnResult]) -> None:
        """Note the turns run, once the stream's reader has forwarded the end of each."""
        self.turns += ran
        want = {t.turn_id for t in ran}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _CATCH_UP_S
        while not want <= self._ended and (left := deadline - loop.time()) > 0:
            self._seen.clear()
            try:
                await asyncio.wait_for(self._seen.wait(), left)
            except TimeoutError:
                log.warning(
                    "session %s: updates of its last turn were not all sent", self.session_id
                )

    async def _forward(self, stream: EventStream) -> None:
        send = self.client.session_update
        sid = self.session_id
        async for item in stream:
            if isinstance(item, TextChunk) and item.text:
                await send(
                    sid,
                    AgentMessageChunk(
                        session_update="agent_message_chunk",
                        content=TextContentBlock(type="text", text=item.text),
                    ),
                )
            elif isinstance(item, ReasoningChunk) and item.text:
                await send(
                    sid,
                    AgentThoughtChunk(
                        session_update="agent_thought_chunk",
                        content=TextContentBlock(type="text", text=item.text),
                    ),
                )
            elif isinstance(item, Durable):
                for update in _updates.live(item.event.event, self.root):
                    await send(sid, update)
            elif isinstance(item, TurnEnd) and item.turn_id is not None:
                self._ended.add(item.turn_id)
                self._seen.set()

    async def _ask(self, waiting: list[ApprovalRequested]) -> list[str] | None:
        """Ask the editor about each waiting call; record each answer as an approval decision
        (not woken: this driver drives it). Returns the decisions' input ids, or None when the
        editor cancelled a question (the calls not yet decided stay waiting)."""
        decided: list[str] = []
        for request in waiting:
            decision = await self._question(request)
            if decision is None:
                return None
            sent = await off_loop(
                self.runtime.approve, self.session_id, request.call_id, decision, resume=False
            )
            decided.append(sent.input_id)
        return decided

    async def _question(self, request: ApprovalRequested) -> str | None:
        call = _updates.call_asked(
            request.call_id, request.name, request.input, self.root, request.preview
        )
        asking = asyncio.ensure_future(
            self.client.request_permission(self.session_id, call, list(OPTIONS))
        )
        cancel = asyncio.ensure_future(self.cancelled.wait())
        try:
            await asyncio.wait({asking, cancel}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancel.cancel()
        if not asking.done():
            asking.cancel()
            return None
        outcome = asking.result().outcome
        if not isinstance(outcome, AllowedOutcome):
            return None
        if outcome.option_id not in {o.option_id for o in OPTIONS}:
            raise RequestError.invalid_params({"optionId": outcome.option_id})
        return outcome.option_id


def stop_reason(turn: TurnResult | None, cancelled: bool) -> StopReason:
    """Why a prompt ended, in ACP's terms; `RequestError` (the editor shows its message) for a
    turn that failed, was blocked, or paused for something the editor cannot give."""
    if cancelled:
        return "cancelled"
    if turn is None or turn.outcome == "completed":
        return "max_tokens" if turn is not None and turn.truncated else "end_turn"
    if turn.outcome == "interrupted":
        return "cancelled"
    if turn.error_kind == "awaiting_approval":  # a question the editor did not answer
        return "cancelled"
    if turn.error_kind == "StepLimitError":
        return "max_turn_requests"
    if turn.error_kind == "content_filter":
        return "refusal"
    raise RequestError(
        -32603,
        f"the turn {turn.outcome}: {turn.error or turn.error_kind}",
        {"outcome": turn.outcome, "error_kind": turn.error_kind},
    )
