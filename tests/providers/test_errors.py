"""Classification of HTTP failures into the typed `ProviderError` kinds, and `retry-after`."""

from __future__ import annotations

import email.utils

import httpx2
import pytest

from tests.providers.fake_servers import LLAMA_CPP_VALIDATION_MESSAGE
from wakeful.clock import FakeClock
from wakeful.errors import (
    AuthenticationError,
    ContextOverflowError,
    IncompleteStreamError,
    InvalidRequestError,
    OverloadedError,
    RateLimitError,
    ServerError,
    TransportError,
)
from wakeful.providers import retry_after_ms
from wakeful.providers._errors import HttpFailure, classify_connection, classify_http


def failure(
    status,
    error_type=None,
    code=None,
    message="m",
    headers=None,
    text_overflow=False,
    text_invalid=False,
):
    return HttpFailure(
        status, error_type, code, message, headers or {}, text_overflow, text_invalid
    )


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "3"}, 3000),
        ({"retry-after": "0.25"}, 250),
        ({"retry-after-ms": "120.5"}, 121),
        ({"retry-after-ms": "40", "retry-after": "9"}, 40),
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2000),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "tomorrow"}, None),
        ({"retry-after": "nan"}, None),
    ],
)
def test_retry_after_headers(headers, expected):
    assert retry_after_ms(headers) == expected


def test_retry_after_as_an_http_date_is_measured_on_the_clock():
    clock = FakeClock(start_ms=1_700_000_000_000)
    date = email.utils.formatdate(1_700_000_000 + 30, usegmt=True)
    assert retry_after_ms({"retry-after": date}, clock) == 30_000
    clock.advance(45_000)
    assert retry_after_ms({"retry-after": date}, clock) == 0


@pytest.mark.parametrize(
    ("fail", "expected"),
    [
        (failure(429), RateLimitError),
        (failure(200, "rate_limit_error"), RateLimitError),
        (failure(529, "overloaded_error"), OverloadedError),
        (failure(200, "overloaded_error"), OverloadedError),
        (failure(502), ServerError),
        (failure(401), AuthenticationError),
        (failure(402, "billing_error"), AuthenticationError),
        (failure(429, "insufficient_quota", "insufficient_quota"), AuthenticationError),
        (failure(408), TransportError),
        (failure(400, code="context_length_exceeded"), ContextOverflowError),
        (
            failure(400, message="prompt is too long: 9 > 8", text_overflow=True),
            ContextOverflowError,
        ),
        (
            failure(400, message="prompt is too long: 9 > 8", text_overflow=False),
            InvalidRequestError,
        ),
        (failure(400, message="messages: required", text_overflow=True), InvalidRequestError),
        (failure(200), IncompleteStreamError),
        (failure(409), InvalidRequestError),
        # the request's fault, whatever the status: never "overloaded", never retried
        (
            failure(
                500,
                "internal_server_error",
                message=LLAMA_CPP_VALIDATION_MESSAGE,
                text_invalid=True,
            ),
            InvalidRequestError,
        ),
        (
            failure(500, message='can only concatenate str (not "list") to str', text_invalid=True),
            InvalidRequestError,
        ),
        (failure(500, "invalid_request_error"), InvalidRequestError),
        (failure(400, "server_error"), InvalidRequestError),
        (failure(422, "api_error"), InvalidRequestError),
        # a 5xx whose text says nothing about the request is the server's fault
        (
            failure(500, "internal_server_error", message="CUDA error", text_invalid=True),
            ServerError,
        ),
        # text is read only where the provider is known to need it
        (failure(500, "api_error", message=LLAMA_CPP_VALIDATION_MESSAGE), ServerError),
    ],
)
def test_classification_reads_status_and_structured_codes(fail, expected):
    assert type(classify_http(fail)) is expected


def test_a_timeout_status_has_unknown_delivery():
    err = classify_http(failure(408))
    assert isinstance(err, TransportError)
    assert err.delivered is None


@pytest.mark.parametrize(
    ("cause", "delivered"),
    [
        (httpx2.ConnectError("refused"), False),
        (httpx2.ConnectTimeout("slow connect"), False),
        (httpx2.PoolTimeout("no connection"), False),
        (httpx2.ReadTimeout("slow read"), None),
        (httpx2.RemoteProtocolError("hung up"), None),
    ],
)
def test_connection_failures_say_whether_the_request_left(cause, delivered):
    try:
        try:
            raise cause
        except httpx2.TransportError as inner:
            raise RuntimeError("SDK wrapper") from inner
    except RuntimeError as outer:
        err = classify_connection(outer)
    assert isinstance(err, TransportError)
    assert err.delivered is delivered
    assert err.retryable
