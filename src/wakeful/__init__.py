"""wakeful: a durable session runtime for LLM agents.

The names in `__all__` are the public surface; anything else is internal and may change.
Heavy parts (runtime, providers, store) load on first use, so `import wakeful` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from .config import Config, load_config
    from .execution import Runtime, SendResult, run_sync
    from .messages import Message, to_wire
    from .providers import Provider, make_provider
    from .runner import Agent, LiveEvent, TurnResult
    from .store import SqlStore, open_store

__version__ = "0.1.0"

_LAZY = {
    "Agent": "wakeful.runner",
    "Config": "wakeful.config",
    "LiveEvent": "wakeful.runner",
    "Message": "wakeful.messages",
    "Provider": "wakeful.providers",
    "Runtime": "wakeful.execution",
    "SendResult": "wakeful.execution",
    "SqlStore": "wakeful.store",
    "TurnResult": "wakeful.runner",
    "load_config": "wakeful.config",
    "make_provider": "wakeful.providers",
    "open_store": "wakeful.store",
    "run_sync": "wakeful.execution",
    "to_wire": "wakeful.messages",
}


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'wakeful' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Agent",
    "AuthenticationError",
    "ClaimLostError",
    "Clock",
    "Config",
    "ConflictError",
    "ContentFilterError",
    "ContextOverflowError",
    "FakeClock",
    "IncompleteStreamError",
    "InvalidMessageError",
    "InvalidRequestError",
    "LiveEvent",
    "Message",
    "MigrationError",
    "NotFoundError",
    "OverloadedError",
    "Provider",
    "ProviderError",
    "RateLimitError",
    "Runtime",
    "SendResult",
    "SqlStore",
    "StoreBusyError",
    "StoreError",
    "SystemClock",
    "TransportError",
    "TurnResult",
    "UsageError",
    "WakefulError",
    "load_config",
    "make_provider",
    "open_store",
    "run_sync",
    "to_wire",
]
