"""The one exception tree of wakeful.

Callers decide what to do by the *type* of an error, never by its message::

    WakefulError
    ├── UsageError                  a developer or user mistake (bad argument, bad config)
    │   ├── InvalidMessageError     a message or wire payload that does not fit the model
    │   ├── AmbiguousIdError        an id prefix that names more than one session
    │   ├── SearchOffError          a search in a store whose full-text index is turned off
    │   ├── LocationUnavailableError  the session's location is not on this host
    │   ├── FileRestoreError        files a rewind would restore cannot be written (nothing changed)
    │   └── InstructionSourceError  an instruction source (AGENTS.md…) cannot be read (the turn is blocked)
    ├── ProviderError               a model request failed (kinds below; `retryable` says if retry may help)
    │   ├── RateLimitError          retryable, may carry retry_after_ms
    │   ├── OverloadedError         retryable (the server is busy: 503, 529, overloaded_error)
    │   │   └── ServerError         retryable (any other 5xx: the server failed), kind server_error
    │   ├── TransportError          retryable; `delivered` is False (unsent) or None (unknown)
    │   ├── IncompleteStreamError   retryable (stream ended before its finish)
    │   ├── ContextOverflowError    not retried as-is; compaction may rebuild the step once
    │   ├── ContentFilterError      terminal
    │   ├── AuthenticationError     pauses the turn (needs the user)
    │   └── InvalidRequestError     terminal (blocked)
    ├── StepLimitError              the turn used its agent's step allowance (the turn fails)
    ├── CompactionError             compaction could not make room (the turn fails)
    │   ├── CompactionPromptTooLongError  the summary request stayed too long after shrinking
    │   └── NothingToCompactError  `summarize_messages` was given nothing older than the turns to keep
    └── StoreError                  a store fault (`retryable` says if waiting may help)
        ├── NotFoundError           no such session / input / blob
        ├── CorruptStateError       durable state that cannot be read as it must be (the turn is blocked)
        ├── ConflictError           an id reused with different content, a stale write
        │   └── FileConflictError   files a rewind would restore were changed by something else
        ├── ClaimLostError          this driver no longer owns the session (fencing)
        ├── StoreBusyError          retryable: the database stayed locked past the busy/lock timeout
        ├── StoreUnavailableError   retryable: the database cannot be reached, or the connection was lost
        ├── StoreFullError          retryable: the disk holding the database is full
        ├── CommitUnknownError      the connection died during COMMIT and the outcome is unknown
        └── MigrationError          the database schema is newer or broken
"""

from __future__ import annotations

from collections.abc import Sequence


class WakefulError(Exception):
    """Base of every error wakeful raises on purpose."""


class UsageError(WakefulError):
    """A developer or user mistake: a bad argument, a bad configuration value."""


class InvalidMessageError(UsageError):
    """A message or wire payload that does not fit the model; `field` names the offender."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message if field is None else f"{field}: {message}")
        self.field = field


class LocationUnavailableError(UsageError):
    """The session lives at a location (`location`) that is not a directory on this host, or
    that this driver does not serve: it is not run here."""

    def __init__(self, message: str, *, location: str) -> None:
        super().__init__(message)
        self.location = location


class InstructionSourceError(UsageError):
    """An instruction source exists but cannot be read (a directory, a FIFO, a dangling link,
    no permission, not UTF-8) when a complete first instruction delta is needed."""


class FileRestoreError(UsageError):
    """Files a rewind (or unrevert) would restore cannot be written or read: a directory where
    the file was, a file where a directory should be, an immutable file, a full disk. `paths`
    lists them (relative to the session's location). No file was changed and no rewind was
    recorded; fix the cause and run it again."""

    def __init__(self, message: str, *, paths: Sequence[str]) -> None:
        super().__init__(message)
        self.paths = tuple(paths)


class SearchOffError(UsageError):
    """A search in a store whose full-text index is turned off (`wakeful store search on`
    turns it on: docs/search.md, "Without search")."""


class AmbiguousIdError(UsageError):
    """An id prefix that more than one session's id starts with; `candidates` lists some."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        more = ", ..." if len(candidates) > 5 else ""
        super().__init__(
            f"session id prefix {prefix!r} is ambiguous: {', '.join(candidates[:5])}{more}"
        )
        self.prefix = prefix
        self.candidates = candidates


class ProviderError(WakefulError):
    """A model request failed. Subclasses are the typed kinds; `retryable` drives retry.

    `status_code` is the HTTP status the failure carried, `code` the provider's own error code
    (or type), or the name of the first transport exception on its cause chain; None when the
    failure had none. A retry entry records both (`docs/runner.md`, "Retries")."""

    kind: str = "provider"
    retryable: bool = False
    status_code: int | None = None
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        retry_after_ms: int | None = None,
        status_code: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms
        self.status_code = status_code
        self.code = code


class RateLimitError(ProviderError):
    kind = "rate_limit"
    retryable = True


class OverloadedError(ProviderError):
    kind = "overloaded"
    retryable = True


class ServerError(OverloadedError):
    """The server failed on its side (an HTTP 5xx other than 503/529 that names no overload):
    retried like an overload, but labelled for what it is."""

    kind = "server_error"


class TransportError(ProviderError):
    """The request did not complete. `delivered` is False when it surely never left, else None."""

    kind = "transport"
    retryable = True

    def __init__(
        self,
        message: str,
        *,
        delivered: bool | None = None,
        retry_after_ms: int | None = None,
        status_code: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message, retry_after_ms=retry_after_ms, status_code=status_code, code=code)
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


class StepLimitError(WakefulError):
    """A turn used its agent's step allowance (`max_steps`) without a final reply: the turn
    ends `failed` (a run failure, not a configuration error: the same agent may finish a
    narrower request)."""


class CompactionError(WakefulError):
    """Compaction failed too many times in a row, or could not make room for the request."""


class CompactionPromptTooLongError(CompactionError):
    """The summary request was still too long for the model after its bounded shrinking."""


class NothingToCompactError(CompactionError):
    """`summarize_messages` was given nothing to summarize: no messages, or the turns to keep
    hold them all (the seed's `CompactInvalidInputError`). A compaction of a session reports
    the same case as a result instead (`reason: nothing-to-compact`), not an error."""


class StoreError(WakefulError):
    """A store fault. `retryable` is True for a transient one (busy, connection lost): nothing of
    the failed transaction was committed, and trying again later may succeed."""

    retryable: bool = False


class NotFoundError(StoreError):
    """No such session, input or blob."""


class CorruptStateError(StoreError):
    """Durable state that cannot be what it must be: a blob a message refers to is missing, an
    event that does not decode. Waiting does not help; a turn that meets it is `blocked`."""


class ConflictError(StoreError):
    """An id reused with different content, or a write that lost a race."""


class FileConflictError(ConflictError):
    """Files a rewind (or unrevert) would restore were changed since by something else;
    `paths` lists them (relative to the session's location). Nothing was written."""

    def __init__(self, message: str, *, paths: Sequence[str]) -> None:
        super().__init__(message)
        self.paths = tuple(paths)


class ClaimLostError(StoreError):
    """This driver no longer holds the session's claim; it must write nothing more."""


class StoreBusyError(StoreError):
    """The database stayed locked longer than the busy timeout (PostgreSQL: the lock or
    statement timeout)."""

    retryable = True


class StoreUnavailableError(StoreError):
    """The database cannot be reached, or the connection was lost (or ended by the server)
    before the transaction committed."""

    retryable = True


class CommitUnknownError(StoreError):
    """The connection to PostgreSQL was lost while the transaction was committing, and the
    server could not be asked afterwards whether it committed. Not retryable: the write may
    be durable, so whoever retries must first read what is stored."""


class StoreFullError(StoreError):
    """The disk holding the database is full; the transaction committed nothing, and it may
    succeed once space is freed."""

    retryable = True


class MigrationError(StoreError):
    """The database schema is newer than this wakeful, or a migration failed."""


__all__ = [
    "AuthenticationError",
    "ClaimLostError",
    "CompactionError",
    "CommitUnknownError",
    "CompactionPromptTooLongError",
    "ConflictError",
    "CorruptStateError",
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
    "SearchOffError",
    "StepLimitError",
    "StoreBusyError",
    "StoreError",
    "StoreFullError",
    "StoreUnavailableError",
    "TransportError",
    "UsageError",
    "WakefulError",
]
