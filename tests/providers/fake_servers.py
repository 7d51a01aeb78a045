"""Local HTTP servers that speak the Anthropic Messages and OpenAI Chat Completions protocols.

A raw asyncio HTTP/1.1 server on 127.0.0.1, port 0, in the test's own event loop: each request
gets the next queued `Reply` (a JSON body, a server-sent-event stream sent with chunked transfer
encoding, a stream cut mid-body, or a hang-up), and every request is recorded, body included.
Every connection is `Connection: close`, so no keep-alive state leaks between requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    """What the server answers to one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    json_body: Any = None
    events: list[bytes] = field(default_factory=list)  # SSE frames, one chunk each
    cut: bool = False  # close after `events` without ending the chunked body
    hang_up: bool = False  # read the request, then close without answering
    stream: bool = False  # an event stream even when `events` is empty (an empty 200 stream)


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    500: "Internal Server Error",
}


class FakeServer:
    """A scripted HTTP server; `async with FakeServer() as server:` starts and stops it."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        # Answers each request from its content instead of the queue (None: hang up); it
        # records what it counts itself.
        self.respond: Callable[[Recorded], Awaitable[Reply | None]] | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> FakeServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def enqueue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await _read_request(reader)
            if request is None:
                return
            if self.respond is not None:
                answer = await self.respond(request)
                if answer is None:
                    return
                reply = answer
            else:
                self.requests.append(request)
                reply = self.replies.popleft() if self.replies else Reply(status=500, json_body={})
            if not reply.hang_up:
                await _write_reply(writer, reply)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> Recorded | None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return Recorded(method=method, path=path, headers=headers, body=body)


async def _write_reply(writer: asyncio.StreamWriter, reply: Reply) -> None:
    reason = _REASONS.get(reply.status, "Status")
    head = [f"HTTP/1.1 {reply.status} {reason}", "connection: close"]
    head += [f"{name}: {value}" for name, value in reply.headers.items()]
    if reply.events or reply.cut or reply.stream:
        head += ["content-type: text/event-stream", "transfer-encoding: chunked"]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        for frame in reply.events:
            writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            await writer.drain()
        if not reply.cut:
            writer.write(b"0\r\n\r\n")
    else:
        body = json.dumps(reply.json_body).encode()
        head += ["content-type: application/json", f"content-length: {len(body)}"]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    await writer.drain()


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event frame."""
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {text}\n\n".encode()


# --- Anthropic Messages ------------------------------------------------------------------------


def anthropic_events(*events: dict[str, Any]) -> list[bytes]:
    """SSE frames for Messages stream events (the `event:` name is the event's `type`)."""
    return [sse(e, e["type"]) for e in events]


def a_message_start(input_tokens: int = 10, cache_read: int = 0, cache_write: int = 0) -> dict:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": "claude-fake",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": 1,
                "cache_read_input_tokens": cache_read,
                "cache_creation_input_tokens": cache_write,
            },
        },
    }


def a_block_start(index: int, block: dict) -> dict:
    return {"type": "content_block_start", "index": index, "content_block": block}


def a_delta(index: int, delta: dict) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def a_block_stop(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


def a_message_delta(stop_reason: str, output_tokens: int) -> dict:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


A_MESSAGE_STOP = {"type": "message_stop"}


def anthropic_error(error_type: str, message: str) -> dict:
    return {"type": "error", "error": {"type": error_type, "message": message}}


# --- OpenAI Chat Completions -------------------------------------------------------------------


def o_chunk(
    delta: dict | None = None, finish_reason: str | None = None, usage: dict | None = None
) -> dict:
    """One `chat.completion.chunk`; with only `usage`, the final usage chunk (no choices)."""
    choices = (
        []
        if delta is None and finish_reason is None
        else [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason, "logprobs": None}]
    )
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-fake",
        "choices": choices,
        "usage": usage,
    }


def openai_events(*chunks: dict[str, Any], done: bool = True) -> list[bytes]:
    """SSE frames for chunks, then `data: [DONE]` unless `done` is False."""
    frames = [sse(c) for c in chunks]
    return [*frames, sse("[DONE]")] if done else frames


def openai_error(message: str, error_type: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


# What llama-cpp-python's server (0.3.x) answers, with a 500, to an assistant message whose
# `content` is null: its request validation failed, not the server.
LLAMA_CPP_VALIDATION_MESSAGE = (
    "7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, "
    "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid "
    "string', 'input': None}"
)
LLAMA_CPP_VALIDATION_500 = openai_error(LLAMA_CPP_VALIDATION_MESSAGE, "internal_server_error")
