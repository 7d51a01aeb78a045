from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest

from tests.providers.fake_servers import FakeServer


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer() as s:
        yield s


@pytest.fixture
def refused_url() -> str:
    """A loopback URL on which nothing listens (the port was just freed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
