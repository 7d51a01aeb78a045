"""The admission lane: prompts that arrive while an admission is being written share the next
thread hop and the next store transaction.

A prompt that finds the lane idle is admitted alone, as it always was (one worker-thread call;
`Runtime.admit_together` of one request is `send`). Prompts that arrive while a call is under
way wait here; when it returns, one worker-thread call admits all of them in one transaction
(`SqlStore.admit_together`: one commit) and each request gets its own outcome. The store
calls stay off the event loop (a worker thread, as `db()`).
Invariant: each request gets the outcome, or the error, its own admission would have given,
and only once its transaction has committed.
"""

from __future__ import annotations

import asyncio

from ..execution import Runtime, SendResult
from ..store import AdmissionRequest
from ._state import db

_Waiting = tuple[AdmissionRequest, "asyncio.Future[SendResult]"]


class AdmissionLane:
    """One server's admissions of prompts: at most one worker-thread call at a time, which
    takes every request waiting when it starts (module docstring)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._waiting: list[_Waiting] = []
        self._busy = False
        self._next: asyncio.Task[None] | None = None  # the call admitting those who waited

    async def admit(self, request: AdmissionRequest) -> SendResult:
        """Admit `request` (alone when the lane is idle, else with those waiting with it);
        its `SendResult`, or the error `Runtime.send` raises for it."""
        if self._busy:
            future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
            self._waiting.append((request, future))
            return await future
        self._busy = True
        try:
            [out] = await db(self._runtime.admit_together, [request])
        finally:
            self._pass_on()
        if isinstance(out, Exception):
            raise out
        return out

    def _pass_on(self) -> None:
        """After a call: admit those who waited meanwhile, or let the lane go idle."""
        if self._waiting:
            self._next = asyncio.get_running_loop().create_task(self._admit_waiting())
        else:
            self._busy = False
            self._next = None

    async def _admit_waiting(self) -> None:
        """Admit every waiting request in one call; settle each one's future."""
        batch, self._waiting = self._waiting, []
        try:
            outs = await db(self._runtime.admit_together, [request for request, _ in batch])
        except asyncio.CancelledError:  # the server is stopping: nobody waits any more
            batch, self._waiting = batch + self._waiting, []
            for _, future in batch:
                future.cancel()
            raise
        except Exception as err:  # the call itself failed: every request of it fails
            for _, future in batch:
                if not future.done():
                    future.set_exception(err)
        else:
            for (_, future), out in zip(batch, outs, strict=True):
                if future.done():  # its request was cancelled
                    continue
                if isinstance(out, Exception):
                    future.set_exception(out)
                else:
                    future.set_result(out)
        finally:
            self._pass_on()
