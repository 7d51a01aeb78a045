"""The first commits of a recovery batch's drives, in one transaction (issue 36 item 4).

A worker takes over a batch of orphans, heals them in one write (`_recovery.recover_batch`)
and starts their drives together. Each resumed turn's first commit is its first step's
receipt (with the session's first instruction delta): one commit per session, all within a
few milliseconds of each other. `FirstWrites` takes those commits and writes them as one
`LocalStore.append_batch`, each session's events fenced by its own claim (invariant 5): one
commit for the batch where each drive paid one.

The invariant a reader must not break: **a member's `write` returns only once its events are
durable**, or raises what its own append would have raised (`ClaimLostError` when its claim
was taken meanwhile; the batch's store error, for every member of it). So a receipt is still
durable before its request is sent (invariant 7); nothing waits on a write that did not
commit.

The batch is written once every member has written or left (`leave`: its drive ended, or
wrote through another unit first), or `window_s` after the first write arrived: one slow
member (a retry's stored wait, a tool server starting) delays the others' first requests by
at most that. A member writing after the batch was written writes alone, as any commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import ClaimLostError
from ..events import SessionEvent
from ..store import ClaimToken, LocalStore
from ._off_loop import off_loop

WINDOW_S = 0.5
"""How long the first write of a batch waits for the members that have not written yet."""


@dataclass(slots=True)
class _Arrived:
    events: list[SessionEvent]
    claim: ClaimToken
    blobs: list[bytes]
    done: asyncio.Future[None] = field(repr=False)


class FirstWrites:
    """The first commits of the drives of `members` (session ids), written together (see the
    module docstring). One per batch; used on the event loop."""

    def __init__(
        self, store: LocalStore, members: Iterable[str], window_s: float = WINDOW_S
    ) -> None:
        self._store = store
        self._waiting = set(members)  # members that have neither written nor left
        self._arrived: dict[str, _Arrived] = {}
        self._window_s = window_s
        self._timer: asyncio.TimerHandle | None = None
        self._written = False  # the batch went (or had nothing to write): later writes alone
        self._commit: asyncio.Future[None] | None = None  # (a reference to the running write)

    async def write(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        claim: ClaimToken | None,
        blobs: Sequence[bytes] = (),
    ) -> None:
        """Append `events` (with `blobs`) to `session_id` under `claim`, fenced, with the
        batch's other first writes when the session is a member still expected; alone
        otherwise. Returns once they are durable; raises as `LocalStore.append` would."""
        if session_id not in self._waiting or self._written or claim is None or not events:
            self.leave(session_id)
            await off_loop(self._store.append, session_id, events, claim, blobs=blobs)
            return
        self._waiting.discard(session_id)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._arrived[session_id] = _Arrived(list(events), claim, list(blobs), done)
        if not self._waiting:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self._window_s, self._flush)
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            if self._arrived.pop(session_id, None) is not None:  # not sent: withdrawn
                self._flush_if_complete()
            else:  # sent: its outcome is nobody's now
                done.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise

    def leave(self, session_id: str) -> None:
        """`session_id` will not write through the batch (its drive ended, or its first
        write is another unit's): the others stop waiting for it."""
        if session_id in self._waiting:
            self._waiting.discard(session_id)
            self._flush_if_complete()

    def _flush_if_complete(self) -> None:
        if not self._waiting and not self._written:
            self._flush()

    def _flush(self) -> None:
        """Write what arrived, in one transaction (on the loop: the write runs off it)."""
        if self._written:
            return
        self._written = True
        if self._timer is not None:
            self._timer.cancel()
        arrived, self._arrived = self._arrived, {}
        if arrived:
            self._commit = asyncio.ensure_future(self._append(arrived))

    async def _append(self, arrived: dict[str, _Arrived]) -> None:
        """`append_batch` of `arrived`; each member's future gets its own outcome."""
        batch = [(sid, a.events, a.claim) for sid, a in arrived.items()]
        blobs = {sid: a.blobs for sid, a in arrived.items() if a.blobs}
        try:
            written = await off_loop(self._store.append_batch, batch, blobs)
        except asyncio.CancelledError:  # the loop is closing: nobody waits for an outcome
            for a in arrived.values():
                a.done.cancel()
            raise
        except Exception as err:  # the one transaction failed: so did each member's write
            for a in arrived.values():
                if not a.done.done():
                    a.done.set_exception(err)
            return
        for sid, a in arrived.items():
            if a.done.done():
                continue
            if sid in written:
                a.done.set_result(None)
            else:
                a.done.set_exception(ClaimLostError(f"session {sid}: the claim was lost"))
