"""Provider protocol and adapters: anthropic, openai, openai-compatible, local, scripted.

Imports only `wakeful.messages`, `wakeful.errors` and `wakeful.clock` (an import-linter contract).
`make_provider("anthropic:MODEL")` builds a provider from a model spec; every provider streams
`StreamEvent`s ending in one `Finish`, and fails only with the typed errors of `wakeful.errors`.
"""

from ._base import (
    CHARS_PER_TOKEN,
    Finish,
    FinishReason,
    ModelRequest,
    Provider,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolChoice,
    ToolSpec,
    Usage,
    UsageReport,
    estimate_message_tokens,
    estimate_request_tokens,
    estimate_text_tokens,
)
from ._families import ModelSpec, ProviderFamily
from ._scripted import (
    Script,
    ScriptedProvider,
    load_script,
    parse_script,
    scripted_call_id,
)
from ._spec import check_model, default_limits, make_provider, parse_model_spec

_LAZY = {
    "AnthropicProvider": "._anthropic",
    "LocalProvider": "._local",
    "OpenAIProvider": "._openai",
    "retry_after_ms": "._errors",
}


def __getattr__(name: str) -> object:
    """Load the SDK adapters on first use (importing the SDKs is slow)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "AnthropicProvider",
    "Finish",
    "FinishReason",
    "LocalProvider",
    "ModelRequest",
    "ModelSpec",
    "OpenAIProvider",
    "Provider",
    "ProviderFamily",
    "ReasoningDelta",
    "Script",
    "ScriptedProvider",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "ToolChoice",
    "ToolSpec",
    "Usage",
    "UsageReport",
    "check_model",
    "default_limits",
    "CHARS_PER_TOKEN",
    "estimate_message_tokens",
    "estimate_request_tokens",
    "estimate_text_tokens",
    "load_script",
    "make_provider",
    "parse_model_spec",
    "parse_script",
    "retry_after_ms",
    "scripted_call_id",
]
