"""A real uvicorn server on a free loopback port, in a background thread, per test."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tests.allow import ALLOW_WRITES
from wakeful.config import Config, RetryConfig
from wakeful.execution import Runtime
from wakeful.server import Settings, Tokens, create_app

TOKEN = "test-token-standard-0123456789"
SENSITIVE = "test-token-sensitive-0123456789"


def script(tmp_path: Path, rules: list[dict[str, Any]], **top: object) -> str:
    """A scripted model spec over a JSON file of `rules`."""
    path = tmp_path / f"script-{len(list(tmp_path.glob('script-*.json')))}.json"
    path.write_text(json.dumps({"rules": rules, **top}))
    return f"scripted:{path}"


ECHO = [{"match": ".", "replies": [{"text": "hello from the scripted model"}]}]


class ServerThread:
    """uvicorn serving `app` on a socket bound to 127.0.0.1:0, in a daemon thread."""

    def __init__(self, app: Any) -> None:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()
        assert not self.thread.is_alive(), "the test server did not stop"


@dataclass
class Served:
    """A running server and what the tests need to talk to it."""

    url: str
    runtime: Runtime
    tmp_path: Path
    clients: list[httpx.Client] = field(default_factory=list)

    @property
    def store(self) -> Any:
        return self.runtime.store

    def client(self, token: str | None = TOKEN, **kw: Any) -> httpx.Client:
        headers = ({"Authorization": f"Bearer {token}"} if token else {}) | kw.pop("headers", {})
        client = httpx.Client(
            base_url=self.url, headers=headers, timeout=kw.pop("timeout", 30), **kw
        )
        self.clients.append(client)
        return client


MakeServer = Callable[..., Served]


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[MakeServer]:
    """Start servers (closed at teardown): `make_server(model=..., settings=...)`."""
    threads: list[ServerThread] = []
    served: list[Served] = []

    def make(
        model: str | None = None,
        settings: Settings | None = None,
        db: str | None = None,
        permissions: dict[str, Any] | None = None,
        **kw: Any,
    ) -> Served:
        work = tmp_path / f"work{len(served)}"
        work.mkdir()
        (work / ".git").mkdir()
        config = Config(
            retry=RetryConfig(initial_delay_ms=5, max_delay_ms=200, poll_interval_ms=5),
            permissions=ALLOW_WRITES if permissions is None else permissions,
        )
        rt = Runtime(
            db or str(tmp_path / f"s{len(served)}.db"),
            model=model or script(tmp_path, ECHO),
            workspace=work,
            config=config,
            **kw,
        )
        app = create_app(
            rt,
            tokens=Tokens([TOKEN], [SENSITIVE]),
            settings=settings or Settings(keepalive_s=1.0, poll_ms=10),
            own_runtime=True,
        )
        thread = ServerThread(app)
        thread.start()
        threads.append(thread)
        s = Served(f"http://127.0.0.1:{thread.port}", rt, tmp_path)
        served.append(s)
        return s

    yield make
    for s in served:
        for c in s.clients:
            c.close()
    for t in threads:
        t.stop()


@pytest.fixture
def server(make_server: MakeServer) -> Served:
    """One server over the echo script."""
    return make_server()


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy (observable state, not a sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
