"""A tool call's durable retries: how many each call has had, and the next one's event.

A call whose tool declares itself safe to retry (`retryable_failure`, docs/tools.md, "Retries")
is made again after a transient failure while its budget lasts (`retry.max_retries`, counted per
call). Each retry is a durable `retry.scheduled` of kind `tool_unavailable` with its backoff.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..events import RetryScheduled
from ._retry import backoff_ms

if TYPE_CHECKING:
    from ..messages import ToolCallBlock
    from ._context import RunContext
    from ._turn_state import TurnState

TOOL_RETRY_KIND = "tool_unavailable"  # the kind of a tool call's durable retry


class ToolRetries:
    """The retries of one turn's tool calls. `lock` serializes the calls of one step that fail
    at once, so their retry events are written one at a time."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self._attempts: dict[str, int] = {}  # tool call id -> its attempts

    def plan(
        self, call: ToolCallBlock, err: BaseException, state: TurnState, ctx: RunContext
    ) -> RetryScheduled | None:
        """The next retry of `call` after `err` (its attempt counted), or None once the call's
        budget is spent (the failure is then the call's result). Hold `lock` around it and the
        event's commit."""
        attempt = self._attempts.get(call.id, 1) + 1
        if attempt > ctx.retry.max_retries + 1:
            return None
        self._attempts[call.id] = attempt
        delay = backoff_ms(attempt - 1, ctx.retry, None, ctx.rng)
        return RetryScheduled(
            turn_id=state.turn_id,
            step=state.step,
            attempt=attempt,
            deadline_ms=ctx.clock.now_ms() + delay,
            error_kind=TOOL_RETRY_KIND,
            error=f"{call.name}: {err}",
            delay_ms=delay,
            code=type(err).__name__,
            max_attempts=ctx.retry.max_retries + 1,
        )
