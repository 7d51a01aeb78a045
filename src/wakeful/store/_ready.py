"""The ready queue: sessions a worker may start now, reserved for it in one transaction.

A session is *ready* when an idle promotion would settle an item of its inbox (any pending
item; while it awaits approval, only a decision) and no unreleased claim holds it. `reserve`
takes the claims of up to `limit` ready sessions for one owner in one transaction: a
reservation is the claim without a delivery, which the drain then makes under it. On
PostgreSQL the ready sessions' rows are locked ``FOR UPDATE SKIP LOCKED``, so workers on any
number of processes and hosts take disjoint sessions, none waiting on another's rows, as
PostgreSQL job queues do; on SQLite the write lock (``BEGIN IMMEDIATE``) lets one worker
reserve at a time, which is as disjoint, and as serial as every SQLite write.

Invariant a reader must not break: a claim is taken only with its session's row locked (as
`start_drain` and `Claims.acquire` take it), and each claims row changes by compare-and-set
in a statement of its own (under READ COMMITTED a fresh snapshot, which waits for and
re-reads a row another transaction changed): a session reserved elsewhere after the first
statement's snapshot was taken is left out, never shared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._ids import new_claim_token
from ._backend import Pending
from ._inbox import AWAITING_APPROVAL
from ._records import Claim

if TYPE_CHECKING:
    from ._backend import Tx


@dataclass(frozen=True, slots=True)
class Reservation:
    """A ready session's claim, taken for a worker: where the session lives, and whether a
    tool call of it is still `running` (left by a driver that released the claim: the drain
    settles it before it delivers anything)."""

    claim: Claim
    location: str | None
    running_call: bool


# Ready: a pending item a promotion would settle, no unreleased claim. `c` is the claims row
# (released, or none); `running` says whether a call is left running.
_READY = (
    "SELECT s.id, s.location, c.session_id IS NOT NULL, EXISTS (SELECT 1 FROM tool_calls t "
    "WHERE t.session_id = s.id AND t.status = 'running') FROM sessions s "
    "LEFT JOIN claims c ON c.session_id = s.id "
    "WHERE (c.session_id IS NULL OR c.released = 1) AND EXISTS (SELECT 1 FROM inbox i "
    "WHERE i.session_id = s.id AND i.status = 'pending' AND (s.status <> ? OR i.kind = 'approval'))"
)


def reserve_in(
    tx: Tx,
    owner: str,
    lease_ms: int,
    now: int,
    *,
    limit: int,
    where: str = "",
    params: Sequence[str] = (),
    skip: Sequence[str] = (),
) -> list[Reservation]:
    """Reserve up to `limit` ready sessions for `owner` in `tx` (a write transaction), the
    ones idle longest first; `where` (on `s`, with `params`) narrows them to some locations,
    and the sessions in `skip` are passed over. Returns what was reserved."""
    sql = _READY + (f" AND {where}" if where else "")
    if skip:
        sql += f" AND s.id NOT IN ({', '.join('?' for _ in skip)})"
    sql += " ORDER BY s.listed_ms, s.id LIMIT ?"
    rows = tx.all(
        sql + tx.row_lock(skip_locked=True, of="s"), (AWAITING_APPROVAL, *params, *skip, limit)
    )
    until = now + lease_ms
    sent: list[tuple[str, str, str | None, bool, Pending]] = []
    for sid, location, has_row, running in rows:
        token = new_claim_token()
        if has_row:  # compare-and-set: still released, as the locked row's claim was read
            pending = tx.query(
                "UPDATE claims SET owner = ?, token = ?, epoch = epoch + 1, lease_until_ms = ?, "
                "attempts = 0, released = 0 WHERE session_id = ? AND released = 1 "
                "RETURNING epoch",
                (owner, token, until, sid),
            )
        else:  # none yet: a row made meanwhile makes this one nothing
            pending = tx.query(
                "INSERT INTO claims (session_id, owner, token, epoch, lease_until_ms, attempts, "
                "released) VALUES (?, ?, ?, 1, ?, 0, 0) ON CONFLICT (session_id) DO NOTHING "
                "RETURNING epoch",
                (sid, owner, token, until),
            )
        sent.append((str(sid), token, location, bool(running), pending))
    out: list[Reservation] = []
    for sid, token, location, running, pending in sent:
        row = pending.one()
        if row is not None:
            claim = Claim(sid, owner, token, int(row[0]), until)
            out.append(Reservation(claim, location, running))
    return out


def look_in(
    tx: Tx,
    now: int,
    *,
    local_host: str | None,
    where: str = "",
    params: Sequence[str] = (),
    skip: Sequence[str] = (),
) -> tuple[bool, bool, list[str]]:
    """What a worker's look would find, in one statement that locks nothing: whether an
    expired claim is left (at a location `where` allows), whether a session is ready (as
    `reserve_in` picks them), and the owners on `local_host` holding live leases (the caller
    asks which of them are dead). A look that finds nothing costs one read, no write
    transaction (on PostgreSQL a write takes a transaction id and a WAL flush at its
    commit)."""
    in_places = f" AND {where}" if where else ""
    ready = _READY + in_places
    if skip:
        ready += f" AND s.id NOT IN ({', '.join('?' for _ in skip)})"
    expired = "SELECT 1 FROM claims WHERE released = 0 AND lease_until_ms <= ?" + (
        f" AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = claims.session_id{in_places})"
        if where
        else ""
    )
    sql = (
        f"SELECT 'expired', NULL WHERE EXISTS ({expired}) "
        f"UNION ALL SELECT 'ready', NULL WHERE EXISTS ({ready}) "
        "UNION ALL SELECT DISTINCT 'owner', owner FROM claims WHERE released = 0 "
        "AND lease_until_ms > ? AND owner LIKE ?"
    )
    host = f"{local_host}/%" if local_host else ""
    rows = tx.all(sql, (now, *params, AWAITING_APPROVAL, *params, *skip, now, host))
    kinds = {str(r[0]) for r in rows}
    owners = [str(r[1]) for r in rows if r[0] == "owner"]
    return "expired" in kinds, "ready" in kinds, owners
