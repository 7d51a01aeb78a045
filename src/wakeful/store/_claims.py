"""Write-ahead execution claims: owner, random token, fencing epoch, lease (invariant 5).

A claim is taken before a drain starts and released when it ends cleanly; a crash leaves it.
A claim whose lease expired, or whose owner `is_dead`, may be taken over: the epoch grows and
the attempt count goes up, so every write of the old driver fails its fence check.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import ClaimLostError, NotFoundError
from ._append import ClaimToken
from ._records import Claim

if TYPE_CHECKING:
    from ..clock import Clock
    from ._backend import Backend


class ClaimsMixin:
    """Claim operations of `SqlStore`."""

    backend: Backend
    clock: Clock

    def acquire_claim(
        self,
        session_id: str,
        owner: str,
        lease_ms: int,
        is_dead: Callable[[str], bool] | None = None,
    ) -> Claim | None:
        """Take the session's claim; None if a live driver holds it.

        A released claim is retaken with attempts reset; a held one whose lease expired or whose
        owner `is_dead(owner)` is taken over (`taken_over=True`, attempts + 1).
        """
        now = self.clock.now_ms()
        token = secrets.token_hex(16)
        with self.backend.transaction(write=True) as tx:
            if tx.lock_session(session_id) is None:
                raise NotFoundError(f"no session {session_id}")
            row = tx.one(
                "SELECT owner, epoch, lease_until_ms, attempts, released FROM claims WHERE session_id = ?",
                (session_id,),
            )
            if row is None:
                tx.run(
                    "INSERT INTO claims (session_id, owner, token, epoch, lease_until_ms, attempts, released) "
                    "VALUES (?, ?, ?, 1, ?, 0, 0)",
                    (session_id, owner, token, now + lease_ms),
                )
                return Claim(session_id, owner, token, 1, now + lease_ms)
            old_owner, epoch, lease_until, attempts, released = row
            taken_over = False
            if not released:
                if lease_until > now and not (is_dead and is_dead(old_owner)):
                    return None
                taken_over = True
                attempts = int(attempts) + 1
            else:
                attempts = 0
            epoch = int(epoch) + 1
            tx.run(
                "UPDATE claims SET owner = ?, token = ?, epoch = ?, lease_until_ms = ?, attempts = ?, "
                "released = 0 WHERE session_id = ?",
                (owner, token, epoch, now + lease_ms, attempts, session_id),
            )
        return Claim(session_id, owner, token, epoch, now + lease_ms, attempts, taken_over)

    def renew_claim(self, claim: Claim, lease_ms: int) -> Claim:
        """Extend the lease; `ClaimLostError` if the claim was taken over or released."""
        until = self.clock.now_ms() + lease_ms
        with self.backend.transaction(write=True) as tx:
            changed = tx.run(
                "UPDATE claims SET lease_until_ms = ? WHERE session_id = ? AND token = ? "
                "AND epoch = ? AND released = 0",
                (until, claim.session_id, claim.token, claim.epoch),
            )
        if changed != 1:
            raise ClaimLostError(f"session {claim.session_id}: claim epoch {claim.epoch} was lost")
        return Claim(claim.session_id, claim.owner, claim.token, claim.epoch, until, claim.attempts)

    def release_claim(self, claim: Claim) -> bool:
        """Release the claim if still ours; return whether it was."""
        with self.backend.transaction(write=True) as tx:
            changed = tx.run(
                "UPDATE claims SET released = 1 WHERE session_id = ? AND token = ? AND epoch = ?",
                (claim.session_id, claim.token, claim.epoch),
            )
        return changed == 1

    def current_claim(self, session_id: str) -> Claim | None:
        """The session's unreleased claim, or None (a historical record, not proof of life)."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                "SELECT owner, token, epoch, lease_until_ms, attempts FROM claims "
                "WHERE session_id = ? AND released = 0",
                (session_id,),
            )
        if row is None:
            return None
        return Claim(session_id, row[0], row[1], int(row[2]), int(row[3]), int(row[4]))

    def claimed_sessions(self) -> list[Claim]:
        """Every unreleased claim (what recovery looks at)."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT session_id, owner, token, epoch, lease_until_ms, attempts FROM claims "
                "WHERE released = 0 ORDER BY session_id"
            )
        return [Claim(r[0], r[1], r[2], int(r[3]), int(r[4]), int(r[5])) for r in rows]


def fence(claim: Claim) -> ClaimToken:
    """The token a driver passes with every write made under `claim`."""
    return ClaimToken(claim.token, claim.epoch)
