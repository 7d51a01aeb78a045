"""One heartbeat per process: every claim this process's drains hold is renewed together.

A drain registers its claim when it takes it and drops it when it ends. Every third of a lease
the keeper renews all registered claims in one store transaction (one write per process and
period, however many sessions it drives), and tells the drain of each claim that was not renewed
(taken over or released elsewhere) through its `on_lost` callback, which stops its turn; the
lost driver's own writes would fail their fence check anyway (invariant 5).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..store import Claim, LocalStore, Outage, is_transient
from ._off_loop import off_loop

log = logging.getLogger("wakeful.leases")


@dataclass
class _Held:
    claim: Claim
    on_lost: Callable[[], None]


class LeaseKeeper:
    """Renews the leases of every claim held in this process; see the module docstring."""

    def __init__(self, store: LocalStore, lease_ms: int) -> None:
        self.store = store
        self.lease_ms = lease_ms
        self._held: dict[str, _Held] = {}  # by claim token
        self._task: asyncio.Future[None] | None = None

    def hold(self, claim: Claim, on_lost: Callable[[], None]) -> None:
        """Keep `claim` alive until `drop`; call `on_lost` if a renewal finds it gone."""
        self._held[claim.token] = _Held(claim, on_lost)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._beat())

    def drop(self, claim: Claim) -> None:
        """Stop renewing `claim` (its drain ended, or will release it)."""
        self._held.pop(claim.token, None)

    def held(self) -> list[Claim]:
        """The claims being kept alive right now."""
        return [h.claim for h in self._held.values()]

    async def renew_now(self) -> None:
        """Renew every held claim once; report the lost ones."""
        held = list(self._held.values())
        if not held:
            return
        kept = await off_loop(self.store.claims.renew, [h.claim for h in held], self.lease_ms)
        for h in held:
            if h.claim.session_id not in kept and self._held.pop(h.claim.token, None) is not None:
                h.on_lost()

    async def _beat(self) -> None:
        period = max(self.lease_ms / 3000, 0.05)
        outage = Outage(
            log, "renewing leases"
        )  # a busy or lost store is logged when it starts and ends
        while self._held:
            await asyncio.sleep(period)
            try:
                await self.renew_now()
            except Exception as err:  # a store fault: try again next period, the lease has slack
                if is_transient(err):
                    outage.failed(err)
                else:
                    log.warning("lease renewal failed: %s: %s", type(err).__name__, err)
            else:
                outage.ok()

    async def aclose(self) -> None:
        """Stop the heartbeat (held claims are kept as they are)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
