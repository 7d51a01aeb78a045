"""An example wakeful plugin: a provider family, a tool and a store backend, each registered
through an entry point in this package's pyproject.toml; nothing in wakeful is edited."""

from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from wakeful.clock import Clock
from wakeful.messages import Message, assistant
from wakeful.providers import (
    Finish,
    ModelRequest,
    ModelSpec,
    Provider,
    ProviderFamily,
    TextDelta,
    Usage,
)
from wakeful.store import SqlStore, file_map_store
from wakeful.tools import tool


class EchoProvider:
    """Answers each request with the text of its last user message (`echo:loud`: upper-case)."""

    name = "echo"

    def __init__(self, model: str, *, context_window: int, max_output_tokens: int) -> None:
        self.model = model
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens

    def wire_request(self, request: ModelRequest) -> dict[str, Any]:
        """The request as this provider would send it: here, only the last user text."""
        return {"model": self.model, "echo": self._answer(request)}

    def _answer(self, request: ModelRequest) -> str:
        said = next((m.text() for m in reversed(request.messages) if m.role == "user"), "")
        return said.upper() if self.model == "loud" else said

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        """One text delta, then the whole message."""
        text = self._answer(request)
        yield TextDelta(text)
        usage = Usage(input_tokens=len(text) // 4 + 1, output_tokens=len(text) // 4 + 1)
        message: Message = assistant(text)
        yield Finish("stop", message, usage)

    async def aclose(self) -> None:
        """Nothing to release."""


def _echo(spec: ModelSpec, options: dict[str, Any]) -> Provider:
    return EchoProvider(spec.model, **options)


# The family's row: factory, the options it takes (none beyond the limits), no key variable,
# its default limits.
ECHO = ProviderFamily("echo", _echo, limits=lambda _model: (8_192, 1_024))


class ShoutInput(BaseModel):
    text: str


@tool(read_only=True)
def shout(args: ShoutInput) -> str:
    """Return the text in capitals."""
    return args.text.upper()


def open_filemap(url: str, *, clock: Clock | None = None) -> SqlStore:
    """`filemap://DIR`: a whole store kept as files in DIR."""
    return file_map_store(url.removeprefix("filemap://"), clock=clock)
