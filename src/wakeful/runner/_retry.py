"""Durable retry decisions: which errors retry, how long to wait, what a failure ends as.

Decisions read the error's type, never its message. The delay is exponential with jitter,
capped; a provider's `retry-after` raises it (up to the cap) and is never shortened.
"""

from __future__ import annotations

import random

from ..config import RetryConfig
from ..errors import (
    AuthenticationError,
    CorruptStateError,
    InvalidRequestError,
    ProviderError,
    UsageError,
)
from ..events import Outcome


def is_retryable(err: BaseException) -> bool:
    """Rate limit, overloaded/internal, transport and incomplete-stream errors retry."""
    return isinstance(err, ProviderError) and err.retryable


def backoff_ms(
    retry_number: int, config: RetryConfig, retry_after_ms: int | None, rng: random.Random
) -> int:
    """The wait before retry number `retry_number` (1-based), in milliseconds."""
    base = min(config.max_delay_ms, config.initial_delay_ms * 2 ** (retry_number - 1))
    spread = base * config.jitter_percent / 100
    delay = int(min(config.max_delay_ms, max(1.0, base + rng.uniform(-spread, spread))))
    if retry_after_ms is not None and retry_after_ms > 0:
        delay = max(delay, min(retry_after_ms, config.max_delay_ms))
    return delay


def terminal_outcome(err: BaseException) -> Outcome:
    """What a turn ends as when `err` stops it (000): authentication pauses; an invalid
    protocol (`InvalidRequestError`), corrupt durable state (`CorruptStateError`) and a
    permanent configuration error (`UsageError`) block; anything else fails."""
    if isinstance(err, AuthenticationError):
        return "paused"
    if isinstance(err, InvalidRequestError | CorruptStateError | UsageError):
        return "blocked"
    return "failed"


def error_kind(err: BaseException) -> str:
    """A stable kind name for an error (the typed kind for provider errors)."""
    if isinstance(err, ProviderError):
        return err.kind
    return type(err).__name__
