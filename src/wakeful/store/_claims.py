"""Write-ahead execution claims: owner, random token, fencing epoch, lease (invariant 5).

A claim is taken before a drain's first write and released when the drain ends cleanly; a crash
leaves it. A claim whose lease expired, or whose owner `is_dead`, may be taken over: the epoch
grows and the attempt count goes up, so every write of the old driver fails its fence check.

Invariant a reader must not break: every change of a claims row is a compare-and-set on what
the transaction read under a row lock (PostgreSQL `FOR UPDATE`), because claims are also
renewed and taken over without the session lock (`renew`, `take_over`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .._ids import new_claim_token
from ..errors import ClaimLostError, NotFoundError
from ._append import ClaimToken
from ._backend import Pending, Row, iter_chunks
from ._idle import IdleMixin
from ._owner import owner_is_dead
from ._ready import Reservation, look_in, reserve_in
from ._records import Claim, SessionRow

if TYPE_CHECKING:
    from ..clock import Clock
    from ._backend import Backend, Tx

IsDead = Callable[[str], bool]
# Which locations a worker serves: (only, exclude). `only` None: every location but `exclude`
# (and sessions without a location); a list: just those (and sessions without a location).
Places = tuple[Sequence[str] | None, Sequence[str]] | None


def place_filter(places: Places) -> tuple[str, list[str]]:
    """The SQL condition on `s.location` (and its parameters) that `places` sets; "" for all."""
    if places is None:
        return "", []
    only, exclude = places
    conds: list[str] = []
    params: list[str] = []
    if only is not None:
        marks = ", ".join("?" for _ in only)
        conds.append(f"(s.location IS NULL{f' OR s.location IN ({marks})' if only else ''})")
        params += list(only)
    if exclude:
        conds.append(
            f"(s.location IS NULL OR s.location NOT IN ({', '.join('?' for _ in exclude)}))"
        )
        params += list(exclude)
    return " AND ".join(conds), params


def _in_places(where: str, column: str = "session_id") -> str:
    """` AND` the session named by `column` is at one of the locations `where` allows."""
    if not where:
        return ""
    return f" AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = {column} AND {where})"


_CLAIM_COLS = "session_id, owner, token, epoch, lease_until_ms, attempts"


def _alive(owner: str, lease_until_ms: int, now: int) -> bool:
    """Whether an unreleased claim's driver may still run: its lease holds and its owner is
    not a process on this host that is gone (the rule a takeover uses too)."""
    return lease_until_ms > now and not owner_is_dead(owner)


def demote_stale(tx: Tx, rows: Sequence[SessionRow], now: int) -> list[SessionRow]:
    """`rows` as a reader should see them: a session whose row says `running` while its claim
    belongs to a dead owner (the lease expired, or the owner is a process on this host that no
    longer runs; no unreleased claim at all) reads `interrupted` until a driver recovers it.
    The spec's `demoteStaleRunningStatus`; nothing is written."""
    running = [r.id for r in rows if r.status == "running"]
    if not running:
        return list(rows)
    live: set[str] = set()
    for start in range(0, len(running), 500):
        chunk = running[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        for sid, owner, lease_until in tx.all(
            "SELECT session_id, owner, lease_until_ms FROM claims "
            f"WHERE released = 0 AND session_id IN ({marks})",
            list(chunk),
        ):
            if _alive(str(owner), int(lease_until), now):
                live.add(str(sid))
    return [
        replace(r, status="interrupted") if r.status == "running" and r.id not in live else r
        for r in rows
    ]


def read_claim(tx: Tx, session_id: str) -> Row | None:
    """The session's claims row (epoch, lease_until_ms, attempts, released, owner), row-locked."""
    return claim_query(tx, session_id).one()


def claim_query(tx: Tx, session_id: str) -> Pending:
    """`read_claim`'s statement, sent: its row is read with what is sent after it."""
    return tx.query(
        "SELECT epoch, lease_until_ms, attempts, released, owner FROM claims WHERE session_id = ?"
        + tx.row_lock(),
        (session_id,),
    )


def claim_in(
    tx: Tx,
    session_id: str,
    row: Row | None,
    owner: str,
    lease_ms: int,
    now: int,
    is_dead: IsDead | None,
) -> Claim | None:
    """Take the claim whose row `read_claim` returned (the session is locked); None if live."""
    token = new_claim_token()
    if row is None:
        tx.send(  # (answered with what follows it: its error, if any, raised there)
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
    tx: Tx,
    session_id: str,
    owner: str,
    token: str,
    epoch: int,
    attempts: int,
    released: bool,
    until: int,
) -> Claim:
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


def _dead_owners(tx: Tx, now: int, local_host: str, is_dead: IsDead) -> list[str]:
    """The owners on `local_host` that hold live leases and `is_dead`."""
    held = tx.all(
        "SELECT DISTINCT owner FROM claims WHERE released = 0 AND lease_until_ms > ? "
        "AND owner LIKE ?",
        (now, f"{local_host}/%"),
    )
    return [owner for (owner,) in held if is_dead(owner)]


def release_query(tx: Tx, session_id: str, claim: ClaimToken) -> Pending:
    """Release `claim` if it is still the session's, sent: a row when it was."""
    return tx.query(
        "UPDATE claims SET released = 1 WHERE session_id = ? AND token = ? AND epoch = ? "
        "AND released = 0 RETURNING session_id",
        (session_id, claim.token, claim.epoch),
    )


def running_call_query(tx: Tx, session_id: str) -> Pending:
    """Whether a tool call of the session is still `running` (a row when one is), sent."""
    return tx.query(
        "SELECT 1 FROM tool_calls WHERE session_id = ? AND status = 'running' LIMIT 1",
        (session_id,),
    )


class Claims(IdleMixin):
    """A store's claims, and what workers scan for beside them (`SqlStore.claims`): who
    drives which session, taken, renewed, taken over and released; which sessions wait for a
    worker serving their location; which idle sessions' provider caches are about to expire
    (`_idle.py`)."""

    def __init__(self, backend: Backend, clock: Clock) -> None:
        self.backend = backend
        self.clock = clock

    def acquire(
        self, session_id: str, owner: str, lease_ms: int, is_dead: IsDead | None = None
    ) -> Claim | None:
        """Take the session's claim; None if a live driver holds it.

        A released claim is retaken with attempts reset; a held one whose lease expired or whose
        owner `is_dead(owner)` is taken over (`taken_over=True`, attempts + 1).
        """
        with self.backend.transaction(write=True) as tx:
            if tx.lock_session(session_id) is None:
                raise NotFoundError(f"no session {session_id}")
            row = read_claim(tx, session_id)
            return claim_in(tx, session_id, row, owner, lease_ms, self.clock.now_ms(), is_dead)

    def take_over(
        self,
        owner: str,
        lease_ms: int,
        is_dead: IsDead,
        *,
        local_host: str | None = None,
        limit: int = 16,
        places: Places = None,
    ) -> list[Claim]:
        """Take over up to `limit` orphaned claims in one transaction; return them.

        An orphan's lease expired, or its owner (a process on `local_host`) `is_dead`.
        Concurrent callers take disjoint sets without waiting on each other (PostgreSQL:
        ``FOR UPDATE SKIP LOCKED``; SQLite: one writer at a time). Each claim taken has a new
        token, the next epoch and one more attempt; the old driver's writes fail their fence.
        `places` limits them to sessions of some locations (`place_filter`).
        """
        now = self.clock.now_ms()
        until = now + lease_ms
        where, params = place_filter(places)
        columns = "SELECT session_id, epoch, attempts FROM claims WHERE released = 0 AND "
        order = " ORDER BY lease_until_ms, session_id LIMIT ?"
        rest = _in_places(where, "claims.session_id") + order
        with self.backend.transaction(write=True) as tx:
            lock = tx.row_lock(skip_locked=True)
            rows = tx.all(columns + "lease_until_ms <= ?" + rest + lock, (now, *params, limit))
            # Then live leases of dead owners on this host. Which owners are dead is asked
            # first: the live claims of running drivers (this worker's own, whose leases end
            # sooner, among them) must not fill the limit and hide the orphans behind them.
            dead: list[str] = []
            if local_host and len(rows) < limit:
                dead = _dead_owners(tx, now, local_host, is_dead)
            if dead:
                marks = ", ".join("?" for _ in dead)
                rows += tx.all(
                    columns + f"lease_until_ms > ? AND owner IN ({marks})" + rest + lock,
                    (now, *dead, *params, limit - len(rows)),
                )
            taken = [
                _retake(tx, sid, owner, new_claim_token(), int(epoch), int(attempts), False, until)
                for sid, epoch, attempts in rows
            ]
        return taken

    def reserve(
        self,
        owner: str,
        lease_ms: int,
        *,
        limit: int,
        places: Places = None,
        skip: Sequence[str] = (),
    ) -> list[Reservation]:
        """Take the claims of up to `limit` ready sessions (pending input a promotion would
        settle, no unreleased claim) for `owner`, in one transaction, those idle longest
        first; `places` limits them to some locations (`place_filter`), `skip` passes over
        some. Concurrent callers take disjoint sessions without waiting on each other
        (PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite: one writer at a time); see
        `_ready.py`. Nothing is delivered: the drain delivers under the claim."""
        if limit <= 0:
            return []
        where, params = place_filter(places)
        with self.backend.transaction(write=True) as tx:
            return reserve_in(
                tx,
                owner,
                lease_ms,
                self.clock.now_ms(),
                limit=limit,
                where=where,
                params=params,
                skip=skip,
            )

    def look(
        self,
        is_dead: IsDead,
        *,
        local_host: str | None = None,
        places: Places = None,
        skip: Sequence[str] = (),
    ) -> tuple[bool, bool]:
        """Whether `take_over` would find an orphan (an expired lease, or a live one of a
        dead owner on `local_host`) and whether `reserve` would find a ready session, in one
        read that locks nothing (`_ready.look_in`): a worker writes only when there is work."""
        where, params = place_filter(places)
        with self.backend.transaction(write=False) as tx:
            expired, ready, owners = look_in(
                tx,
                self.clock.now_ms(),
                local_host=local_host,
                where=where,
                params=params,
                skip=skip,
            )
        return expired or any(is_dead(o) for o in owners), ready

    def release_all(self, claims: Sequence[Claim]) -> set[str]:
        """Release `claims` (those still ours) in one transaction; return the sessions whose
        claim was released."""
        sent: list[Pending] = []
        with self.backend.transaction(write=True) as tx:
            for claim in claims:
                sent.append(
                    tx.query(
                        "UPDATE claims SET released = 1 WHERE session_id = ? AND token = ? "
                        "AND epoch = ? RETURNING session_id",
                        (claim.session_id, claim.token, claim.epoch),
                    )
                )
        return {r[0] for pending in sent for r in pending.all()}

    def any_orphaned(self, places: Places = None) -> bool:
        """Whether an unreleased claim whose lease has run out is left (at a location `places`
        allows): work a takeover has yet to pick up. Its row may be locked by a paused writer,
        which `take_over` passes over until the database ends that writer's transaction.
        """
        where, params = place_filter(places)
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                "SELECT 1 FROM claims WHERE released = 0 AND lease_until_ms <= ?"
                + _in_places(where, "claims.session_id")
                + " LIMIT 1",
                (self.clock.now_ms(), *params),
            )
        return row is not None

    def renew(self, claims: Sequence[Claim], lease_ms: int) -> set[str]:
        """Extend the leases of `claims` in one transaction; return the session ids still held.

        A claim that was taken over or released is not renewed (and not returned).
        """
        until = self.clock.now_ms() + lease_ms
        sent: list[Pending] = []
        with self.backend.transaction(write=True) as tx:
            for chunk in iter_chunks([(c.session_id, c.token) for c in claims], 250):
                marks = ", ".join("?" for _ in chunk)
                # By primary key; a token is random, so matching one of the chunk's is exact.
                sent.append(
                    tx.query(
                        f"UPDATE claims SET lease_until_ms = ? WHERE session_id IN ({marks}) "
                        f"AND token IN ({marks}) AND released = 0 RETURNING session_id",
                        (until, *(sid for sid, _ in chunk), *(token for _, token in chunk)),
                    )
                )
        # Read after the commit: on PostgreSQL the updates and the COMMIT travel together, so a
        # process paused mid-renewal (SIGSTOP, a stall) never sits on the claims' row locks,
        # which other workers' takeovers would skip (SKIP LOCKED) for as long as it is paused.
        return {r[0] for pending in sent for r in pending.all()}

    def renew_one(self, claim: Claim, lease_ms: int) -> Claim:
        """Extend the lease; `ClaimLostError` if the claim was taken over or released."""
        if claim.session_id not in self.renew([claim], lease_ms):
            raise ClaimLostError(f"session {claim.session_id}: claim epoch {claim.epoch} was lost")
        until = self.clock.now_ms() + lease_ms
        return Claim(claim.session_id, claim.owner, claim.token, claim.epoch, until, claim.attempts)

    def release(self, claim: Claim) -> bool:
        """Release the claim if still ours; return whether it was."""
        with self.backend.transaction(write=True) as tx:
            changed = tx.run(
                "UPDATE claims SET released = 1 WHERE session_id = ? AND token = ? AND epoch = ?",
                (claim.session_id, claim.token, claim.epoch),
            )
        return changed == 1

    def release_and_look(self, claim: Claim) -> tuple[bool, bool]:
        """Release the claim if still ours and say whether input is pending, in one
        transaction: whether it was released, and whether an item waits. The session's row
        is locked first, as an admission locks it, so an admission either committed before
        (its item is seen here) or commits after this release (and its wake finds the claim
        free): no input is left waiting for a driver that already left."""
        sid = claim.session_id
        with self.backend.transaction(write=True) as tx:
            tx.lock_query(sid)  # read with the rest: one round trip on PostgreSQL
            released = release_query(tx, sid, fence(claim))
            pending = tx.query(
                "SELECT 1 FROM inbox WHERE session_id = ? AND status = 'pending' LIMIT 1", (sid,)
            )
        return released.one() is not None, pending.one() is not None

    def is_live(self, session_id: str) -> bool:
        """Whether a driver that may still run holds the session (an unreleased claim whose
        lease holds and whose owner is not a dead process on this host)."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                "SELECT owner, lease_until_ms FROM claims WHERE session_id = ? AND released = 0",
                (session_id,),
            )
        return row is not None and _alive(str(row[0]), int(row[1]), self.clock.now_ms())

    def current(self, session_id: str) -> Claim | None:
        """The session's unreleased claim, or None (a historical record, not proof of life)."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                f"SELECT {_CLAIM_COLS} FROM claims WHERE session_id = ? AND released = 0",
                (session_id,),
            )
        return None if row is None else _claim_row(row)

    def held(self) -> list[Claim]:
        """Every unreleased claim (what recovery looks at)."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                f"SELECT {_CLAIM_COLS} FROM claims WHERE released = 0 ORDER BY session_id"
            )
        return [_claim_row(r) for r in rows]

    def startable(self, limit: int = 1000, *, places: Places = None) -> list[str]:
        """Sessions with pending input and no unreleased claim (a drain may start them now);
        `places` limits them to sessions of some locations (`place_filter`)."""
        where, params = place_filter(places)
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT DISTINCT i.session_id FROM inbox i "
                "LEFT JOIN claims c ON c.session_id = i.session_id AND c.released = 0 "
                "WHERE i.status = 'pending' AND c.session_id IS NULL"
                + _in_places(where, "i.session_id")
                + " ORDER BY 1 LIMIT ?",
                (*params, limit),
            )
        return [r[0] for r in rows]

    def locations(self, session_ids: Sequence[str]) -> dict[str, str | None]:
        """The location of each named session (unknown ids are left out)."""
        out: dict[str, str | None] = {}
        with self.backend.transaction(write=False) as tx:
            for chunk in iter_chunks(list(session_ids), 250):
                marks = ", ".join("?" for _ in chunk)
                rows = tx.all(f"SELECT id, location FROM sessions WHERE id IN ({marks})", chunk)
                out.update({r[0]: r[1] for r in rows})
        return out

    def unnoted_waits(self, places: Places, limit: int = 1000) -> dict[str, str]:
        """Sessions with pending input, no claim and no wait note, whose location is *outside*
        `places` (id -> location): the ones a worker serving only `places` leaves waiting."""
        only, exclude = places or (None, ())
        if only is None and not exclude:
            return {}
        where: list[str] = ["s.location IS NOT NULL"]
        params: list[str] = []
        if only is not None and only:
            where.append(f"s.location NOT IN ({', '.join('?' for _ in only)})")
            params += list(only)
        if exclude:
            where.append(f"s.location IN ({', '.join('?' for _ in exclude)})")
            params += list(exclude)
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT DISTINCT s.id, s.location FROM inbox i JOIN sessions s ON s.id = i.session_id "
                "LEFT JOIN claims c ON c.session_id = i.session_id AND c.released = 0 "
                "LEFT JOIN session_waits w ON w.session_id = i.session_id "
                f"WHERE i.status = 'pending' AND c.session_id IS NULL AND w.session_id IS NULL "
                f"AND {' AND '.join(where)} ORDER BY 1 LIMIT ?",
                (*params, limit),
            )
        return {r[0]: r[1] for r in rows}

    def note_waits(self, waits: dict[str, str]) -> None:
        """Record that these sessions (id -> location) wait for a worker serving their
        location; sessions not named keep their notes (`clear_wait` ends one)."""
        if not waits:
            return
        now = self.clock.now_ms()
        with self.backend.transaction(write=True) as tx:
            for sid, location in sorted(waits.items()):
                tx.run(
                    "INSERT INTO session_waits (session_id, location, noted_ms) VALUES (?, ?, ?) "
                    "ON CONFLICT (session_id) DO UPDATE SET location = excluded.location, "
                    "noted_ms = excluded.noted_ms",
                    (sid, location, now),
                )

    def clear_wait(self, session_id: str) -> None:
        """Forget that the session waits for its location (a driver serving it took it)."""
        with self.backend.transaction(write=True) as tx:
            tx.run("DELETE FROM session_waits WHERE session_id = ?", (session_id,))


def _claim_row(row: Row) -> Claim:
    sid, owner, token, epoch, lease_until, attempts = row
    return Claim(sid, owner, token, int(epoch), int(lease_until), int(attempts))


def fence(claim: Claim) -> ClaimToken:
    """The token a driver passes with every write made under `claim`."""
    return ClaimToken(claim.token, claim.epoch)
