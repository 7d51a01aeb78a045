"""wakeful: a durable session runtime for LLM agents.

The names below are the public surface; anything else is internal and may change.
"""

from .clock import Clock, FakeClock, SystemClock
from .errors import (
    AuthenticationError,
    ClaimLostError,
    ConflictError,
    ContentFilterError,
    ContextOverflowError,
    IncompleteStreamError,
    InvalidMessageError,
    InvalidRequestError,
    MigrationError,
    NotFoundError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    StoreBusyError,
    StoreError,
    TransportError,
    UsageError,
    WakefulError,
)
from .messages import Message

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "ClaimLostError",
    "Clock",
    "ConflictError",
    "ContentFilterError",
    "ContextOverflowError",
    "FakeClock",
    "IncompleteStreamError",
    "InvalidMessageError",
    "InvalidRequestError",
    "Message",
    "MigrationError",
    "NotFoundError",
    "OverloadedError",
    "ProviderError",
    "RateLimitError",
    "StoreBusyError",
    "StoreError",
    "SystemClock",
    "TransportError",
    "UsageError",
    "WakefulError",
]
