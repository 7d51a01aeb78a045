"""Shared rate limits: one bucket per configured provider endpoint or key, in the store, so
every worker and host draws from the same one (`docs/spend.md`, "Shared rate limits").

A bucket holds two levels that refill continuously: requests (at `rpm` per minute, up to
`burst_s` seconds' worth, at least one request) and tokens (at `tpm`, the same ceiling). A take
is one statement: it refills both levels to now and, when the bucket is not slowed
(`blocked_until_ms`), holds a request and is not in token debt, takes one request and marks the
bucket with the taker's nonce, which it returns: whoever reads its own nonce back has taken.
Tokens are charged after the reply (`charge`, the provider's count), so the level may go below
zero and the next take waits until that debt has refilled. A provider's 429 with `retry-after`
moves `blocked_until_ms` forward (`slow`), which every taker then waits for.

Invariant: a take that returns 0 has taken exactly one request from the bucket; no other
statement adds requests, so concurrent takers of one bucket never take more than it holds.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

from ._backend import Backend, Row, Tx

UNLIMITED = 1e12  # the rate and ceiling of a dimension no limit is set on

# Migration 22 (`_migrations/_v21.py`), the same on both backends.
RATE_BUCKETS = """
CREATE TABLE rate_buckets (
  key TEXT PRIMARY KEY,
  requests DOUBLE PRECISION NOT NULL,
  tokens DOUBLE PRECISION NOT NULL,
  at_ms BIGINT NOT NULL,
  blocked_until_ms BIGINT NOT NULL,
  taker TEXT NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class Rate:
    """A bucket's limits: requests and tokens per minute (None: unlimited) and how many
    seconds of them may be saved up."""

    rpm: int | None = None
    tpm: int | None = None
    burst_s: float = 1.0

    def per_ms(self, per_minute: int | None) -> tuple[float, float]:
        """(refill per millisecond, ceiling) of one dimension."""
        if per_minute is None:
            return UNLIMITED, UNLIMITED
        return per_minute / 60_000, per_minute * self.burst_s / 60

    @property
    def requests(self) -> tuple[float, float]:
        """(refill per millisecond, ceiling) of the requests; the ceiling is at least one."""
        rate, cap = self.per_ms(self.rpm)
        return rate, max(cap, 1.0)

    @property
    def tokens(self) -> tuple[float, float]:
        """(refill per millisecond, ceiling) of the tokens."""
        return self.per_ms(self.tpm)


def _take_sql(kind: str, now: int, rate: Rate) -> str:
    """The take's upsert, with the bucket's numbers written in (they come from configuration
    and the clock, never from input)."""
    least, greatest = ("MIN", "MAX") if kind == "sqlite" else ("LEAST", "GREATEST")
    (r_rate, r_cap), (t_rate, t_cap) = rate.requests, rate.tokens
    elapsed = f"{greatest}({now} - rate_buckets.at_ms, 0)"
    req = f"{least}(rate_buckets.requests + {elapsed} * {r_rate!r}, {r_cap!r})"
    tok = f"{least}(rate_buckets.tokens + {elapsed} * {t_rate!r}, {t_cap!r})"
    ok = f"(rate_buckets.blocked_until_ms <= {now} AND {req} >= 1 AND {tok} >= 0)"
    return (
        "INSERT INTO rate_buckets (key, requests, tokens, at_ms, blocked_until_ms, taker) "
        f"VALUES (?, {r_cap - 1!r}, {t_cap!r}, {now}, 0, ?) ON CONFLICT (key) DO UPDATE SET "
        f"requests = CASE WHEN {ok} THEN {req} - 1 ELSE rate_buckets.requests END, "
        f"tokens = CASE WHEN {ok} THEN {tok} ELSE rate_buckets.tokens END, "
        f"taker = CASE WHEN {ok} THEN excluded.taker ELSE rate_buckets.taker END, "
        f"at_ms = CASE WHEN {ok} THEN {greatest}(rate_buckets.at_ms, {now}) "
        "ELSE rate_buckets.at_ms END "
        "RETURNING taker, requests, tokens, at_ms, blocked_until_ms"
    )


def wait_ms(rate: Rate, now: int, requests: float, tokens: float, at: int, blocked: int) -> int:
    """How long until a bucket in this state (as last written, at `at`) allows a take."""
    (r_rate, r_cap), (t_rate, t_cap) = rate.requests, rate.tokens
    elapsed = max(now - at, 0)
    req = min(requests + elapsed * r_rate, r_cap)
    tok = min(tokens + elapsed * t_rate, t_cap)
    waits = [blocked - now, (1 - req) / r_rate if req < 1 else 0, -tok / t_rate if tok < 0 else 0]
    return max(1, math.ceil(max(waits)))


class RateBuckets:
    """The store's shared rate buckets (see the module docstring)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def take(self, key: str, rate: Rate, now_ms: int) -> int:
        """Take one request from bucket `key` (created full on its first take): 0 when taken,
        else the milliseconds until the bucket allows one (nothing taken). One statement."""
        nonce = secrets.token_hex(8)
        with self.backend.transaction(write=True) as tx:
            row = _one(tx, _take_sql(tx.kind, now_ms, rate), (key, nonce))
        if row[0] == nonce:
            return 0
        return wait_ms(rate, now_ms, float(row[1]), float(row[2]), int(row[3]), int(row[4]))

    def charge(self, key: str, tokens: int) -> None:
        """Charge a reply's `tokens` to bucket `key` (its level may go below zero: a debt the
        next take waits out)."""
        with self.backend.transaction(write=True) as tx:
            tx.send("UPDATE rate_buckets SET tokens = tokens - ? WHERE key = ?", (tokens, key))

    def slow(self, key: str, until_ms: int, now_ms: int) -> None:
        """No take from bucket `key` before `until_ms` (a provider's `retry-after`); a later
        slow-down already written stands."""
        with self.backend.transaction(write=True) as tx:
            greatest = "MAX" if tx.kind == "sqlite" else "GREATEST"
            tx.send(
                "INSERT INTO rate_buckets (key, requests, tokens, at_ms, blocked_until_ms, taker) "
                "VALUES (?, 0, 0, ?, ?, '') ON CONFLICT (key) DO UPDATE SET blocked_until_ms = "
                f"{greatest}(rate_buckets.blocked_until_ms, excluded.blocked_until_ms)",
                (key, now_ms, until_ms),
            )

    def state(self, key: str) -> tuple[float, float, int, int] | None:
        """The bucket as last written: (requests, tokens, at_ms, blocked_until_ms); None when
        nothing has taken from it yet."""
        with self.backend.transaction(write=False) as tx:
            row = tx.one(
                "SELECT requests, tokens, at_ms, blocked_until_ms FROM rate_buckets WHERE key = ?",
                (key,),
            )
        return None if row is None else (float(row[0]), float(row[1]), int(row[2]), int(row[3]))


def _one(tx: Tx, sql: str, params: tuple[str, str]) -> Row:
    rows = tx.all(sql, params)
    assert rows, "an upsert with RETURNING returns its row"
    return rows[0]
