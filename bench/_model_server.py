"""A local model server speaking the Anthropic Messages and OpenAI Chat Completions protocols.

Its replies are a function of the request (like the scripted provider), so a whole tool-using
session runs against it through the official SDKs: step k of a turn (k = assistant messages
after the newest user input, plus one) calls `todo_write` every `todo_every` steps, `read_file`
on the other steps, and answers with text at step `steps`. Every request body is recorded.

Usage is reported as a caching provider would: input tokens are the request's characters / 4,
of which the part byte-identical to the previous request's prefix (in the provider's cache
order, `cache_prefix`) is reported as read from the cache and, on Anthropic, the rest as
written to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"


def _strip_marks(value: Any) -> Any:
    """`value` without Anthropic `cache_control` markers (not part of what a cache matches)."""
    if isinstance(value, dict):
        return {k: _strip_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_marks(v) for v in value]
    return value


def cache_prefix(body: dict[str, Any]) -> str:
    """The request as the provider caches it, in order: tools, system, then each message;
    canonical JSON, breakpoint markers left out."""
    parts = [body.get("tools", []), body.get("system", []), *body.get("messages", [])]
    return "".join(
        json.dumps(_strip_marks(p), sort_keys=True, separators=(",", ":")) for p in parts
    )


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b`."""
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on slices: fast for long strings
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class ModelServer:
    """`async with ModelServer(steps=50) as server:`; `server.bodies` holds each request body."""

    steps: int = 50
    todo_every: int = 4
    bodies: list[dict[str, Any]] = field(default_factory=list)
    _server: asyncio.Server | None = None
    _last: str = ""

    async def __aenter__(self) -> ModelServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            length = 0
            for line in lines[1:]:
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = json.loads(await reader.readexactly(length))
            self.bodies.append(body)
            frames = self._anthropic(body) if path == ANTHROPIC_PATH else self._openai(body)
            out = [
                "HTTP/1.1 200 OK",
                "connection: close",
                "content-type: text/event-stream",
                "transfer-encoding: chunked",
            ]
            writer.write(("\r\n".join(out) + "\r\n\r\n").encode())
            for frame in frames:
                writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    # -- what the model does -----------------------------------------------------------------

    def _step(self, messages: list[dict[str, Any]]) -> int:
        """Assistant messages after the newest user message holding a prompt (not tool results
        or notes), plus one."""
        k = 1
        for message in reversed(messages):
            if message["role"] == "assistant":
                k += 1
            elif message["role"] == "user" and _is_prompt(message):
                break
        return k

    def _action(self, step: int) -> tuple[str, dict[str, Any]] | None:
        """The tool call of `step` (None: the final answer)."""
        if step >= self.steps:
            return None
        if step % self.todo_every == 1:
            todos = [
                {"content": f"item {i}", "status": "completed" if i < step else "pending"}
                for i in range(0, self.steps, self.todo_every)
            ]
            return "todo_write", {"todos": todos}
        return "read_file", {"path": f"notes/file{step % 5}.txt"}

    def _usage(self, body: dict[str, Any]) -> tuple[int, int]:
        """(input tokens, of which read from the cache) for `body`."""
        now = cache_prefix(body)
        cached = common_prefix(self._last, now)
        self._last = now
        return max(1, len(now) // 4), cached // 4

    def _anthropic(self, body: dict[str, Any]) -> list[bytes]:
        total, read = self._usage(body)
        step = self._step(body["messages"])
        usage = {
            "input_tokens": 0,
            "output_tokens": 1,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": total - read,
        }
        start = {
            "type": "message_start",
            "message": {
                "id": f"msg_{step}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        }
        action = self._action(step)
        if action is None:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": "done"}
            stop = "end_turn"
        else:
            block = {
                "type": "tool_use",
                "id": f"toolu_{len(self.bodies)}",
                "name": action[0],
                "input": {},
            }
            delta = {"type": "input_json_delta", "partial_json": json.dumps(action[1])}
            stop = "tool_use"
        events = [
            start,
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
            {"type": "message_stop"},
        ]
        return [_sse(e, e["type"]) for e in events]

    def _openai(self, body: dict[str, Any]) -> list[bytes]:
        total, read = self._usage(body)
        action = self._action(self._step(body["messages"]))
        if action is None:
            delta: dict[str, Any] = {"role": "assistant", "content": "done"}
            finish = "stop"
        else:
            call = {
                "index": 0,
                "id": f"call_{len(self.bodies)}",
                "type": "function",
                "function": {"name": action[0], "arguments": json.dumps(action[1])},
            }
            delta = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        usage = {
            "prompt_tokens": total,
            "completion_tokens": 20,
            "total_tokens": total + 20,
            "prompt_tokens_details": {"cached_tokens": read},
        }
        chunks = [
            _chunk([{"index": 0, "delta": delta, "finish_reason": None}]),
            _chunk([{"index": 0, "delta": {}, "finish_reason": finish}]),
            _chunk([], usage),
        ]
        return [*(_sse(c) for c in chunks), b"data: [DONE]\n\n"]


def _is_prompt(message: dict[str, Any]) -> bool:
    content = message["content"]
    if isinstance(content, str):
        return not content.startswith("[")
    return any(
        b.get("type") == "text" and not b["text"].startswith("[") for b in content
    ) and not any(b.get("type") == "tool_result" for b in content)


def _chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "bench",
        "choices": choices,
        "usage": usage,
    }


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()
