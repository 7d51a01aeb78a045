"""wakeful: a durable session runtime for LLM agents.

The names in `__all__` are the public surface; anything else is internal and may change.
Heavy parts (runtime, providers, store) load on first use, so `import wakeful` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names
from .clock import Clock, FakeClock, SystemClock
from .errors import (
    AuthenticationError,
    ClaimLostError,
    ConflictError,
    ContentFilterError,
    ContextOverflowError,
    CorruptStateError,
    FileConflictError,
    FileRestoreError,
    IncompleteStreamError,
    InvalidMessageError,
    InvalidRequestError,
    MigrationError,
    NotFoundError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
    StepLimitError,
    StoreBusyError,
    StoreError,
    StoreUnavailableError,
    TransportError,
    UsageError,
    WakefulError,
)

if TYPE_CHECKING:
    from .config import Config, load_config
    from .execution import RewindResult, Runtime, SendResult, run_sync
    from .messages import Message, to_wire
    from .providers import Provider, make_provider
    from .runner import Agent, LiveEvent, TurnResult
    from .store import Artifact, Schedule, ScheduleFire, SqlStore, open_store

__version__ = "0.1.0"

_LAZY = {
    "Agent": "wakeful.runner",
    "Artifact": "wakeful.store",
    "Config": "wakeful.config",
    "LiveEvent": "wakeful.runner",
    "Message": "wakeful.messages",
    "Provider": "wakeful.providers",
    "RewindResult": "wakeful.execution",
    "Runtime": "wakeful.execution",
    "Schedule": "wakeful.store",
    "ScheduleFire": "wakeful.store",
    "SendResult": "wakeful.execution",
    "SqlStore": "wakeful.store",
    "TurnResult": "wakeful.runner",
    "load_config": "wakeful.config",
    "make_provider": "wakeful.providers",
    "open_store": "wakeful.store",
    "run_sync": "wakeful.execution",
    "to_wire": "wakeful.messages",
}


__getattr__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "Agent",
    "Artifact",
    "AuthenticationError",
    "ClaimLostError",
    "Clock",
    "Config",
    "ConflictError",
    "ContentFilterError",
    "ContextOverflowError",
    "CorruptStateError",
    "FakeClock",
    "FileConflictError",
    "FileRestoreError",
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
    "ServerError",
    "RewindResult",
    "Runtime",
    "Schedule",
    "ScheduleFire",
    "SendResult",
    "SqlStore",
    "StepLimitError",
    "StoreBusyError",
    "StoreError",
    "StoreUnavailableError",
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
