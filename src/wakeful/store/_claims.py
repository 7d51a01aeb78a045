"""Write-ahead execution claims: owner, random token, fencing epoch, lease (invariant 5).

A claim is taken before a drain's first write and released when the drain ends cleanly; a crash
leaves it. A claim whose lease expired, or whose owner `is_dead`, may be taken over: the epoch
grows and the attempt count goes up, so every write of the old driver fails its fence check.

Invariant a reader must not break: every change of a claims row is a compare-and-set on what
the transaction read under a row lock (PostgreSQL `FOR UPDATE`), because claims are also
renewed and taken over without the session lock (`renew_claims`, `take_over_claims`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import ClaimLostError, NotFoundError
from . import _inbox
from ._append import ClaimToken
from ._backend import Pending, Row, iter_chunks
from ._records import Claim, DrainStart

if TYPE_CHECKING:
    from ..clock import Clock
    from ._backend import Backend, Tx

IsDead = Callable[[str], bool]
_CLAIM_COLS = "session_id, owner, token, epoch, lease_until_ms, attempts"


def _read_claim(tx: Tx, session_id: str) -> Row | None:
    """The session's claims row (epoch, lease_until_ms, attempts, released, owner), row-locked."""
    return tx.one(
        "SELECT epoch, lease_until_ms, attempts, released, owner FROM claims WHERE session_id = ?"
        + tx.row_lock(),
        (session_id,),
    )


def _claim_in(
    tx: Tx, session_id: str, row: Row | None, owner: str, lease_ms: int, now: int,
    is_dead: IsDead | None,
) -> Claim | None:  # fmt: skip
    """Take the claim whose row `_read_claim` returned (the session is locked); None if live."""
    token = secrets.token_hex(16)
    if row is None:
        tx.run(
            "INSERT INTO claims (session_id, owner, token, epoch, lease_until_ms, attempts, released) "
            "VALUES (?, ?, ?, 1, ?, 0, 0)",
            (session_id, owner, token, now + lease_ms),
        )
        return Claim(session_id, owner, token, 1, now + lease_ms)
    epoch, lease_until, attempts, released, old_owner = row
    if not released and lease_until > now and not (is_dead and is_dead(old_owner)):
        return None
    return _retake(
        tx, session_id, owner, token, int(epoch), int(attempts), bool(released), now + lease_ms
    )


def _retake(
    tx: Tx, session_id: str, owner: str, token: str, epoch: int, attempts: int, released: bool,
    until: int,
) -> Claim:  # fmt: skip
    """Move a claims row read at `epoch` to a new owner (compare-and-set on the epoch)."""
    attempts = 0 if released else attempts + 1
    changed = tx.run(
        "UPDATE claims SET owner = ?, token = ?, epoch = ?, lease_until_ms = ?, attempts = ?, "
        "released = 0 WHERE session_id = ? AND epoch = ?",
        (owner, token, epoch + 1, until, attempts, session_id, epoch),
    )
    if changed != 1:  # cannot happen under the row lock; refuse rather than share a session
        raise ClaimLostError(f"session {session_id}: its claim changed while being taken")
    return Claim(session_id, owner, token, epoch + 1, until, attempts, taken_over=not released)


class ClaimsMixin:
    """Claim operations of `SqlStore`."""

    backend: Backend
    clock: Clock

    def acquire_claim(
        self, session_id: str, owner: str, lease_ms: int, is_dead: IsDead | None = None
    ) -> Claim | None:
        """Take the session's claim; None if a live driver holds it.

        A released claim is retaken with attempts reset; a held one whose lease expired or whose
        owner `is_dead(owner)` is taken over (`taken_over=True`, attempts + 1).
        """
        with self.backend.transaction(write=True) as tx:
            if tx.lock_session(session_id) is None:
                raise NotFoundError(f"no session {session_id}")
            row = _read_claim(tx, session_id)
            return _claim_in(tx, session_id, row, owner, lease_ms, self.clock.now_ms(), is_dead)

    def start_drain(
        self, session_id: str, owner: str, lease_ms: int, is_dead: IsDead | None = None,
        *, start_turn: str,
    ) -> DrainStart:  # fmt: skip
        """Claim the session and start its next turn, in one transaction.

        - A live driver holds the claim: nothing is written, `busy=True`.
        - The claim is free and nothing is deliverable: nothing is written (`claim=None`).
        - The claim is free: it is taken, the next inputs are promoted (steers, or one queued
          item: the session is idle) and, if they produced messages, `start_turn` starts with
          them; a crash can leave a claim with a started turn, never one without.
        - The claim is an orphan (expired lease, dead owner): it is taken over and nothing is
          promoted, because the earlier driver's calls and turn must be healed first.
        """
        now = self.clock.now_ms()
        with self.backend.transaction(write=True) as tx:
            if tx.lock_session(session_id) is None:
                raise NotFoundError(f"no session {session_id}")
            row = _read_claim(tx, session_id)
            orphan = row is not None and not row[3]
            if not orphan and not _inbox.deliverable(tx, session_id, idle=True):
                return DrainStart(None)
            claim = _claim_in(tx, session_id, row, owner, lease_ms, now, is_dead)
            if claim is None:
                return DrainStart(None, busy=True)
            if claim.taken_over:
                return DrainStart(claim)
            delivered = _inbox.promote_in(
                tx, session_id, now, idle=True, claim=ClaimToken(claim.token, claim.epoch),
                start_turn=start_turn,
            )  # fmt: skip
        return DrainStart(claim, delivered=tuple(delivered))

    def take_over_claims(
        self, owner: str, lease_ms: int, is_dead: IsDead, *, local_host: str | None = None,
        limit: int = 16,
    ) -> list[Claim]:  # fmt: skip
        """Take over up to `limit` orphaned claims in one transaction; return them.

        An orphan's lease expired, or its owner (a process on `local_host`) `is_dead`.
        Concurrent callers take disjoint sets without waiting on each other (PostgreSQL:
        ``FOR UPDATE SKIP LOCKED``; SQLite: one writer at a time). Each claim taken has a new
        token, the next epoch and one more attempt; the old driver's writes fail their fence.
        """
        now = self.clock.now_ms()
        until = now + lease_ms
        pattern = f"{local_host}/%" if local_host else ""
        taken: list[Claim] = []
        with self.backend.transaction(write=True) as tx:
            rows = tx.all(
                "SELECT session_id, owner, epoch, lease_until_ms, attempts FROM claims "
                "WHERE released = 0 AND (lease_until_ms <= ? OR owner LIKE ?) "
                "ORDER BY lease_until_ms, session_id LIMIT ?" + tx.row_lock(skip_locked=True),
                (now, pattern, limit),
            )
            for sid, old_owner, epoch, lease_until, attempts in rows:
                if lease_until > now and not is_dead(old_owner):
                    continue
                token = secrets.token_hex(16)
                taken.append(
                    _retake(tx, sid, owner, token, int(epoch), int(attempts), False, until)
                )
        return taken

    def renew_claims(self, claims: Sequence[Claim], lease_ms: int) -> set[str]:
        """Extend the leases of `claims` in one transaction; return the session ids still held.

        A claim that was taken over or released is not renewed (and not returned).
        """
        until = self.clock.now_ms() + lease_ms
        sent: list[Pending] = []
        with self.backend.transaction(write=True) as tx:
            for chunk in iter_chunks([(c.session_id, c.token) for c in claims], 250):
                marks = ", ".join("?" for _ in chunk)
                # By primary key; a token is random, so matching one of the chunk's is exact.
                sent.append(tx.query(
                    f"UPDATE claims SET lease_until_ms = ? WHERE session_id IN ({marks}) "
                    f"AND token IN ({marks}) AND released = 0 RETURNING session_id",
                    (until, *(sid for sid, _ in chunk), *(token for _, token in chunk)),
                ))  # fmt: skip
        # Read after the commit: on PostgreSQL the updates and the COMMIT travel together, so a
        # process paused mid-renewal (SIGSTOP, a stall) never sits on the claims' row locks,
        # which other workers' takeovers would skip (SKIP LOCKED) for as long as it is paused.
        return {r[0] for pending in sent for r in pending.all()}

    def renew_claim(self, claim: Claim, lease_ms: int) -> Claim:
        """Extend the lease; `ClaimLostError` if the claim was taken over or released."""
        if claim.session_id not in self.renew_claims([claim], lease_ms):
            raise ClaimLostError(f"session {claim.session_id}: claim epoch {claim.epoch} was lost")
        until = self.clock.now_ms() + lease_ms
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
                f"SELECT {_CLAIM_COLS} FROM claims WHERE session_id = ? AND released = 0",
                (session_id,),
            )
        return None if row is None else _claim_row(row)

    def claimed_sessions(self) -> list[Claim]:
        """Every unreleased claim (what recovery looks at)."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                f"SELECT {_CLAIM_COLS} FROM claims WHERE released = 0 ORDER BY session_id"
            )
        return [_claim_row(r) for r in rows]

    def startable_sessions(self, limit: int = 1000) -> list[str]:
        """Sessions with pending input and no unreleased claim (a drain may start them now)."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT DISTINCT i.session_id FROM inbox i "
                "LEFT JOIN claims c ON c.session_id = i.session_id AND c.released = 0 "
                "WHERE i.status = 'pending' AND c.session_id IS NULL ORDER BY 1 LIMIT ?",
                (limit,),
            )
        return [r[0] for r in rows]


def _claim_row(row: Row) -> Claim:
    sid, owner, token, epoch, lease_until, attempts = row
    return Claim(sid, owner, token, int(epoch), int(lease_until), int(attempts))


def fence(claim: Claim) -> ClaimToken:
    """The token a driver passes with every write made under `claim`."""
    return ClaimToken(claim.token, claim.epoch)
