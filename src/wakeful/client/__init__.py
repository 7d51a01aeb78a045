"""The client of a `wakeful serve` server: `Client`, `AsyncClient` (httpx) and `RemoteStore`.

    from wakeful.client import Client
    with Client("http://127.0.0.1:8765", token) as c:
        sid = c.create_session(prompt="hello")["session"]["id"]
        for event in c.log(sid, idle_timeout=5):
            print(event.event, event.data)

Errors are `ApiError`s that are also the matching wakeful error (`NotFoundError`,
`ConflictError`, `UsageError`, `StoreBusyError`); a server that cannot be reached raises
`ServerUnreachableError`, a `StoreUnavailableError`. This module does not import the server.
"""

from ._async import AsyncClient
from ._remote import RemoteStore, session_row, stored_event
from ._sync import Client
from ._wire import (
    ApiError,
    RemoteBusyError,
    RemoteConflictError,
    RemoteNotFoundError,
    RemoteUsageError,
    ServerEvent,
    ServerUnreachableError,
    UnauthorizedError,
    parse_sse,
)

__all__ = [
    "ApiError",
    "AsyncClient",
    "Client",
    "RemoteBusyError",
    "RemoteConflictError",
    "RemoteNotFoundError",
    "RemoteStore",
    "RemoteUsageError",
    "ServerEvent",
    "ServerUnreachableError",
    "UnauthorizedError",
    "parse_sse",
    "session_row",
    "stored_event",
]
