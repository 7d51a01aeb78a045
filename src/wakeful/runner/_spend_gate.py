"""What a request waits for before it is sent: its session's budget, and the shared rate limit
of its model (`docs/spend.md`).

Before a step's first request the budget is checked (`_budget_gate.py`: past a limit the turn
pauses; past its notice share a `budget.noticed` is written and shown once). Before each
request, once it is built (after any compaction it needed), the turn takes a request from its
model's bucket (`RateGate`, kept in the store by the driver, so every worker and host draws
from the same one); so does each summary request of a compaction, from its summary model's
bucket. When the bucket has none, the wait is a durable retry: a `retry.scheduled` with error
kind `rate_limited` and its deadline, waited for as a failed request's retry is (new steer
input cuts it short; a restarted driver waits out the deadline it finds), then the turn takes
again. A wait is not a failed attempt: the attempt's number stays and no retry budget is
spent. A step's reply clears its wait; a compaction's outcome (its boundary, failure or skip)
clears the wait of its summary request, in the same transaction. After a reply, its tokens are
charged to the bucket; a provider's 429 that says when to come back (`retry-after`) slows the
whole bucket, not only this turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ..errors import RateLimitError
from ..events import RetryScheduled, SessionEvent
from ..providers import Usage
from ._budget_gate import check_budget, check_scopes
from ._context import RunContext
from ._port import SessionPort
from ._waits import wait_until

RATE_KIND = "rate_limited"  # the `error_kind` of a wait for a shared rate limit


Commit = Callable[[Sequence[SessionEvent]], Awaitable[None]]
Live = Callable[..., None]


async def check_spend(ctx: RunContext, commit: Commit, live: Live, attempt: int) -> None:
    """The budget before a step's first attempt (`BudgetExceeded` pauses the turn): a notice
    due is written and shown."""
    if attempt != 1:
        return
    percent = ctx.budget.notice_percent
    for notice in (
        await check_scopes(ctx.scopes, percent, ctx.spend),
        await check_budget(ctx.budget, ctx.spend),
    ):
        if notice is not None:
            await commit([notice])
            live("notice", text=notice.text, about="budget")


async def take_rate(
    ctx: RunContext,
    port: SessionPort,
    commit: Commit,
    live: Live,
    spec: str,
    where: tuple[str | None, int, int],
) -> bool:
    """Take a request from the bucket of model `spec` for the request at `where` (turn id,
    step, attempt: a step's attempt, or a compaction's summary request), waiting durably
    (see the module docstring) until it allows one. Returns whether a wait was scheduled
    (whoever sent the request then clears it: a step's reply, a compaction's outcome)."""
    gate = ctx.rates
    if gate is None:
        return False
    turn_id, step, attempt = where
    waited = False
    while (wait := await gate.take(spec)) is not None:
        key, delay = wait
        deadline = ctx.clock.now_ms() + delay
        error = f"rate limit {key}: the shared bucket allows the next request in {delay} ms"
        await commit(
            [
                RetryScheduled(
                    turn_id=turn_id,
                    step=step,
                    attempt=attempt,
                    deadline_ms=deadline,
                    error_kind=RATE_KIND,
                    error=error,
                    delay_ms=delay,
                )
            ]
        )
        waited = True
        live("retry", attempt=attempt, delay_ms=delay, error_kind=RATE_KIND)
        await wait_until(ctx, port, deadline)
    return waited


async def charge_rate(ctx: RunContext, spec: str, usage: Usage) -> None:
    """Charge a reply's tokens (input + output, as the provider counted them) to the bucket
    of model `spec`."""
    if ctx.rates is not None:
        await ctx.rates.charge(spec, usage.input_tokens + usage.output_tokens)


async def share_retry_after(ctx: RunContext, err: BaseException, spec: str | None = None) -> None:
    """A provider's 429 with `retry-after` slows the bucket of model `spec` (default: `ctx`'s
    model) for every process (`RateGate.slow`); other failures change nothing."""
    after = err.retry_after_ms if isinstance(err, RateLimitError) else None
    if ctx.rates is not None and after:
        await ctx.rates.slow(spec or ctx.model_spec, ctx.clock.now_ms() + after)
