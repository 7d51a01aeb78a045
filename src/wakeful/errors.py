"""The one exception tree of wakeful.

Callers decide what to do by the *type* of an error, never by its message::

    WakefulError
    ├── UsageError                  a developer or user mistake (bad argument, bad config)
    │   └── InvalidMessageError     a message or wire payload that does not fit the model
    ├── ProviderError               a model request failed (kinds below; `retryable` says if retry may help)
    │   ├── RateLimitError          retryable, may carry retry_after_ms
    │   ├── OverloadedError         retryable (overloaded / internal server error)
    │   ├── TransportError          retryable; `delivered` is False (unsent) or None (unknown)
    │   ├── IncompleteStreamError   retryable (stream ended before its finish)
    │   ├── ContextOverflowError    not retried as-is; compaction may rebuild the step once
    │   ├── ContentFilterError      terminal
    │   ├── AuthenticationError     pauses the turn (needs the user)
    │   └── InvalidRequestError     terminal (blocked)
    ├── CompactionError             compaction could not make room (the turn fails)
    │   └── CompactionPromptTooLongError  the summary request stayed too long after shrinking
    └── StoreError                  a store fault
        ├── NotFoundError           no such session / input / blob
        ├── ConflictError           an id reused with different content, a stale write
        ├── ClaimLostError          this driver no longer owns the session (fencing)
        ├── StoreBusyError          the database stayed locked past the busy timeout
        └── MigrationError          the database schema is newer or broken
"""

from __future__ import annotations


class WakefulError(Exception):
    """Base of every error wakeful raises on purpose."""


class UsageError(WakefulError):
    """A developer or user mistake: a bad argument, a bad configuration value."""


class InvalidMessageError(UsageError):
    """A message or wire payload that does not fit the model; `field` names the offender."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message if field is None else f"{field}: {message}")
        self.field = field


class ProviderError(WakefulError):
    """A model request failed. Subclasses are the typed kinds; `retryable` drives retry."""

    kind: str = "provider"
    retryable: bool = False

    def __init__(self, message: str, *, retry_after_ms: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class RateLimitError(ProviderError):
    kind = "rate_limit"
    retryable = True


class OverloadedError(ProviderError):
    kind = "overloaded"
    retryable = True


class TransportError(ProviderError):
    """The request did not complete. `delivered` is False when it surely never left, else None."""

    kind = "transport"
    retryable = True

    def __init__(
        self, message: str, *, delivered: bool | None = None, retry_after_ms: int | None = None
    ) -> None:
        super().__init__(message, retry_after_ms=retry_after_ms)
        self.delivered = delivered


class IncompleteStreamError(ProviderError):
    kind = "incomplete_stream"
    retryable = True


class ContextOverflowError(ProviderError):
    kind = "context_overflow"


class ContentFilterError(ProviderError):
    kind = "content_filter"


class AuthenticationError(ProviderError):
    kind = "authentication"


class InvalidRequestError(ProviderError):
    kind = "invalid_request"


class CompactionError(WakefulError):
    """Compaction failed too many times in a row, or could not make room for the request."""


class CompactionPromptTooLongError(CompactionError):
    """The summary request was still too long for the model after its bounded shrinking."""


class StoreError(WakefulError):
    """A store fault."""


class NotFoundError(StoreError):
    """No such session, input or blob."""


class ConflictError(StoreError):
    """An id reused with different content, or a write that lost a race."""


class ClaimLostError(StoreError):
    """This driver no longer holds the session's claim; it must write nothing more."""


class StoreBusyError(StoreError):
    """The database stayed locked longer than the busy timeout."""


class MigrationError(StoreError):
    """The database schema is newer than this wakeful, or a migration failed."""


__all__ = [
    "AuthenticationError",
    "ClaimLostError",
    "CompactionError",
    "CompactionPromptTooLongError",
    "ConflictError",
    "ContentFilterError",
    "ContextOverflowError",
    "IncompleteStreamError",
    "InvalidMessageError",
    "InvalidRequestError",
    "MigrationError",
    "NotFoundError",
    "OverloadedError",
    "ProviderError",
    "RateLimitError",
    "StoreBusyError",
    "StoreError",
    "TransportError",
    "UsageError",
    "WakefulError",
]
