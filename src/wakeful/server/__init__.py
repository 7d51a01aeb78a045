"""The HTTP server: the session API under /sessions, its SSE log streams and the web inspector.

Build an app over a `Runtime` with `create_app(runtime, tokens=Tokens([...]))` and serve it with
any ASGI server (`wakeful serve` runs uvicorn). The client lives in `wakeful.client`.
"""

from ._app import create_app
from ._auth import Tokens, load_or_create_token, new_token
from ._state import DEFAULT_MAX_BODY, Settings

__all__ = [
    "DEFAULT_MAX_BODY",
    "Settings",
    "Tokens",
    "create_app",
    "load_or_create_token",
    "new_token",
]
