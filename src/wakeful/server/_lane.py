"""The admission lane: prompts that arrive while the server's admission calls are busy share the
next thread hop and the next store transaction.

Up to `CALLS` worker-thread calls admit at once. A prompt that finds one of them free is
admitted alone, as it always was (one call; `Runtime.admit_together` of one request is `send`),
so two clients still overlap as before (SQLite joins their writes into one commit, PostgreSQL
runs them on two connections). A prompt that finds them all busy waits here; when a call
returns, the next one admits every waiting prompt in one transaction
(`SqlStore.admit_together`: one commit) and each request gets its own outcome. The store calls
stay off the event loop (worker threads, as `off_loop()`).
Invariant: each request gets the outcome, or the error, its own admission would have given,
and only once its transaction has committed.
"""

from __future__ import annotations

import asyncio

from ..execution import Runtime, SendResult, off_loop
from ..store import AdmissionRequest

CALLS = 2  # worker-thread calls admitting at once (docs/server.md, "Benchmark")

_Waiting = tuple[AdmissionRequest, "asyncio.Future[SendResult]"]


class AdmissionLane:
    """One server's admissions of prompts: at most `CALLS` worker-thread calls at a time; a
    call that starts when requests wait takes all of them (module docstring)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._waiting: list[_Waiting] = []  # never empty while fewer than CALLS calls run
        self._calls = 0
        self._batches: set[asyncio.Task[None]] = set()  # calls admitting those who waited

    async def admit(self, request: AdmissionRequest) -> SendResult:
        """Admit `request` (alone when a call is free, else with those waiting with it);
        its `SendResult`, or the error `Runtime.send` raises for it."""
        if self._calls >= CALLS:
            future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
            self._waiting.append((request, future))
            return await future
        self._calls += 1
        try:
            [out] = await off_loop(self._runtime.admit_together, [request])
        finally:
            self._pass_on()
        if isinstance(out, Exception):
            raise out
        return out

    def _pass_on(self) -> None:
        """After a call: admit those who waited meanwhile in the next one, if any."""
        self._calls -= 1
        if self._waiting:
            self._calls += 1
            batch, self._waiting = self._waiting, []
            task = asyncio.get_running_loop().create_task(self._admit_waiting(batch))
            self._batches.add(task)
            task.add_done_callback(self._batches.discard)

    async def _admit_waiting(self, batch: list[_Waiting]) -> None:
        """Admit the requests of `batch` in one call; settle each one's future."""
        try:
            outs = await off_loop(self._runtime.admit_together, [request for request, _ in batch])
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
