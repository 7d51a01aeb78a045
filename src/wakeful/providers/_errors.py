"""Mapping HTTP failures to the typed `ProviderError` kinds, shared by the SDK adapters.

Invariant: classification reads the status code, the structured error `type`/`code` and the
transport exception type. Free text is read in exactly two places, each for servers that give
no structured code: `overflow_in_message` (a context overflow in a 400) and `invalid_in_message`
(a malformed request answered with a 5xx, as llama.cpp's Python server does); see
docs/providers.md.
"""

from __future__ import annotations

import email.utils
import errno
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import httpx2

from ..clock import Clock, SystemClock
from ..errors import (
    AuthenticationError,
    ContentFilterError,
    ContextOverflowError,
    IncompleteStreamError,
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
    TransportError,
)

# Structured codes and types that mean "the prompt does not fit the context window".
OVERFLOW_CODES = frozenset(
    {
        "context_length_exceeded",  # OpenAI error.code
        "prompt_too_long",  # Anthropic, should it ever send a structured code
        "exceed_context_size_error",  # llama.cpp server error.type
        "model_context_window_exceeded",
    }
)
CONTENT_FILTER_CODES = frozenset({"content_filter", "content_policy_violation"})
# OpenAI's 429 for an exhausted balance: waiting will not help, the user must act.
NEEDS_USER_CODES = frozenset({"insufficient_quota", "billing_error", "billing_hard_limit_reached"})
RATE_LIMIT_TYPES = frozenset({"rate_limit_error", "rate_limit_exceeded", "requests", "tokens"})
# Structured types that say the request itself is wrong, whatever the status.
INVALID_TYPES = frozenset({"invalid_request_error", "BadRequestError"})
OVERLOADED_TYPES = frozenset({"overloaded_error", "api_error", "server_error"})
# Statuses and types that say the server is busy, not broken: an `OverloadedError`. Any other
# 5xx is a `ServerError` (retried the same, labelled for what it is).
BUSY_STATUSES = frozenset({503, 529})
BUSY_TYPES = frozenset({"overloaded_error"})
AUTH_TYPES = frozenset({"authentication_error", "permission_error", "billing_error"})

_OVERFLOW_TEXT = re.compile(
    r"prompt is too long|context length|context window|maximum context|"
    r"too many tokens|exceeds? the (?:available )?context",
    re.IGNORECASE,
)


# What a Chat Completions server says in a 5xx when the request, not the server, is at fault:
# request validation (llama-cpp-python answers pydantic's "N validation errors" with a 500), a
# chat template that cannot render the messages, content parts a server does not support.
_INVALID_TEXT = re.compile(
    r"validation errors?\b|invalid request|bad request|not supported|unsupported|"
    r"can only concatenate str|chat template|TemplateError|roles must alternate",
    re.IGNORECASE,
)


def invalid_in_message(message: str | None) -> bool:
    """Whether a 5xx's free text says the request itself is malformed (retrying cannot help).

    Used only for `openai-compatible` servers, whose errors seldom carry a structured code.
    """
    return bool(message) and _INVALID_TEXT.search(message or "") is not None


def overflow_in_message(message: str | None) -> bool:
    """Whether an error's free text says the prompt overflowed the context window.

    Used only for 400s that carry no structured code: Anthropic's `invalid_request_error`
    ("prompt is too long: N tokens > M maximum") and Chat Completions servers such as vLLM.
    """
    return bool(message) and _OVERFLOW_TEXT.search(message or "") is not None


def retry_after_ms(headers: Mapping[str, str], clock: Clock | None = None) -> int | None:
    """Read `retry-after-ms` (milliseconds) or `retry-after` (seconds or an HTTP date).

    Returns whole milliseconds, never negative, or None when no usable header is present.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return math.ceil(value)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        now_ms = (clock or SystemClock()).now_ms()
        return max(0, int(when.timestamp() * 1000) - now_ms)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return math.ceil(seconds * 1000)


@dataclass(frozen=True)
class HttpFailure:
    """What an adapter knows about one failed response, in provider-neutral terms."""

    status: int | None
    error_type: str | None
    error_code: str | None
    message: str
    headers: Mapping[str, str]
    text_overflow: bool = False  # the provider has no structured overflow code: read the text
    text_invalid: bool = False  # the provider may answer a malformed request with a 5xx


def classify_http(failure: HttpFailure, clock: Clock | None = None) -> ProviderError:
    """Map a failed response (an error status, or an error event inside a stream) to its kind,
    carrying the response's status and the provider's error code (or type) along."""
    err = _kind_of(failure, clock)
    err.status_code = failure.status
    err.code = failure.error_code or failure.error_type
    return err


def _kind_of(failure: HttpFailure, clock: Clock | None) -> ProviderError:
    tags = {failure.error_type, failure.error_code} - {None}
    status = failure.status or 0
    retry = retry_after_ms(failure.headers, clock)
    message = failure.message
    if tags & NEEDS_USER_CODES:
        return AuthenticationError(message)
    if status == 429 or tags & RATE_LIMIT_TYPES:
        return RateLimitError(message, retry_after_ms=retry)
    if status >= 500 and (
        tags & INVALID_TYPES or (failure.text_invalid and invalid_in_message(message))
    ):
        return InvalidRequestError(f"the server rejected the request (HTTP {status}): {message}")
    client_error = 400 <= status < 500  # the request's fault: never "overloaded"
    if status >= 500 and status not in BUSY_STATUSES and not tags & BUSY_TYPES:
        return ServerError(f"server error (HTTP {status}): {message}", retry_after_ms=retry)
    if status >= 500 or (tags & OVERLOADED_TYPES and not client_error):
        return OverloadedError(message, retry_after_ms=retry)
    if status in (401, 402, 403) or tags & AUTH_TYPES:
        return AuthenticationError(message)
    if status == 408:
        return TransportError(message, delivered=None, retry_after_ms=retry)
    if tags & OVERFLOW_CODES or status == 413:
        return ContextOverflowError(message)
    if tags & CONTENT_FILTER_CODES:
        return ContentFilterError(message)
    if status == 400 and failure.text_overflow and overflow_in_message(message):
        return ContextOverflowError(message)
    if status == 200 and not tags:
        # An error event in an accepted stream that names no kind: the output is cut short.
        return IncompleteStreamError(message)
    return InvalidRequestError(message)


def _causes(err: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def classify_connection(err: BaseException) -> TransportError:
    """Map a failure to reach the server before any response to `TransportError`.

    `delivered` is False when the connection was never made (refused, DNS, connect timeout,
    no free pooled connection), else None: the request may have reached the server.
    """
    unsent = (
        httpx2.ConnectError,
        httpx2.ConnectTimeout,
        httpx2.PoolTimeout,
        httpx2.UnsupportedProtocol,
    )
    never_sent = any(isinstance(cause, unsent) for cause in _causes(err))
    details = dict.fromkeys(f"{type(c).__name__}: {c}" for c in _causes(err)[1:])
    detail = "; ".join(details) or str(err)
    return TransportError(
        f"transport failure ({'unsent' if never_sent else 'delivery unknown'}): {detail}",
        delivered=False if never_sent else None,
        code=transport_code(err),
    )


def transport_code(err: BaseException) -> str:
    """The errno-style code of a transport failure: the first `errno` name on its cause chain
    (`ECONNRESET`), else the name of the innermost exception type (`ConnectError`)."""
    chain = _causes(err)
    for cause in chain:
        number = getattr(cause, "errno", None)
        if isinstance(number, int) and number in errno.errorcode:
            return errno.errorcode[number]
    return type(chain[-1]).__name__


def incomplete(reason: str, err: BaseException | None = None) -> IncompleteStreamError:
    """An `IncompleteStreamError` saying why the stream stopped before its terminal event."""
    if err is None:
        return IncompleteStreamError(f"stream ended before its terminal event: {reason}")
    return IncompleteStreamError(f"stream cut before its terminal event ({reason}): {err!r}")
