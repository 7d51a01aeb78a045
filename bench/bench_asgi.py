"""The CPU of the server's ASGI path alone: `POST /sessions/{id}/prompt` called on the app in
process, with the admission itself stubbed out, so neither the disk nor uvicorn nor the thread
hop counts; what is left is Starlette, our middlewares and routing, parsing and answering.

    python bench/bench_asgi.py [--requests N] [--rounds R]

The stub replaces `Runtime.send` (which the route calls in a worker thread) with a canned
result, and the route's `db` with a direct call: this measures the request's path, not the
store. Prints the median CPU per request over the rounds. Compare trees by running it with
each tree's `PYTHONPATH`; `bench/bench_server.py` measures the whole server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wakeful.server._routes_inputs as inputs_routes
from wakeful.execution import Runtime, SendResult
from wakeful.server import Tokens, create_app
from wakeful.store import new_session_id

TOKEN = "bench-token-0123456789"


async def _inline(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    return fn(*args, **kw)


async def measure(workdir: Path, requests: int, rounds: int) -> list[float]:
    """CPU seconds per request of each round."""
    runtime = Runtime(str(workdir / "bench.db"), model="local")
    app = create_app(runtime, tokens=Tokens([TOKEN]))
    sid = runtime.create_session(session_id=new_session_id()).id
    canned = SendResult(sid, "inp_0123456789abcdef", True, False, "pending")
    runtime.send = lambda *a, **kw: canned  # type: ignore[method-assign]
    inputs_routes.db = _inline  # type: ignore[assignment]
    body = json.dumps({"text": "benchmark input", "resume": False}).encode()
    path = f"/sessions/{sid}/prompt"
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"authorization", f"Bearer {TOKEN}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    def scope() -> dict[str, Any]:
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 50000),
            "scheme": "http",
            "method": "POST",
            "root_path": "",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": headers,
            "state": {},
        }

    for _ in range(500):  # warm up
        await app(scope(), receive, send)
    if sent[0]["status"] != 202:
        raise SystemExit(f"the prompt route answered {sent[0]['status']}: {sent[1]['body']!r}")
    per: list[float] = []
    for _ in range(rounds):
        sent.clear()
        start = time.process_time()
        for _ in range(requests):
            await app(scope(), receive, send)
        per.append((time.process_time() - start) / requests)
    runtime.close()
    return per


def main() -> None:
    """Parse the options, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        per = asyncio.run(measure(Path(tmp), args.requests, args.rounds))
    rounds = " ".join(f"{p * 1e6:.0f}" for p in per)
    print(
        f"ASGI path CPU per prompt request, store stubbed: median {statistics.median(per) * 1e6:.1f} us (rounds: {rounds} us)"
    )


if __name__ == "__main__":
    main()
