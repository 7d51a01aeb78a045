"""Model spec strings and the provider factory.

A spec is `anthropic:MODEL`, `openai:MODEL`, `openai-compatible:MODEL@BASE_URL`, `local` or
`scripted:PATH`. Invariant: `parse_model_spec(str(spec)) == spec`, and every malformed string is a
`UsageError` with a one-line reason, raised before any client is built.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..errors import UsageError
from ._base import Provider
from ._scripted import ScriptedProvider

Family: TypeAlias = Literal["anthropic", "openai", "openai-compatible", "local", "scripted"]
FAMILIES: tuple[Family, ...] = ("anthropic", "openai", "openai-compatible", "local", "scripted")

# (model-name prefix, context window, output allowance); the first matching prefix wins.
ANTHROPIC_LIMITS: tuple[tuple[str, int, int], ...] = (
    ("claude-opus-4", 200_000, 32_000),
    ("claude-sonnet-4", 200_000, 64_000),
    ("claude-haiku-4", 200_000, 64_000),
    ("claude-3-7-sonnet", 200_000, 64_000),
    ("claude-3-5-haiku", 200_000, 8_192),
    ("claude-3-5-sonnet", 200_000, 8_192),
    ("", 200_000, 8_192),
)
OPENAI_LIMITS: tuple[tuple[str, int, int], ...] = (
    ("gpt-5", 400_000, 128_000),
    ("gpt-4.1", 1_047_576, 32_768),
    ("gpt-4o", 128_000, 16_384),
    ("gpt-4-turbo", 128_000, 4_096),
    ("gpt-3.5-turbo", 16_385, 4_096),
    ("o1", 200_000, 100_000),
    ("o3", 200_000, 100_000),
    ("o4", 200_000, 100_000),
    ("", 128_000, 16_384),
)
# A Chat Completions server of unknown size: a common llama.cpp / vLLM / Ollama configuration.
COMPATIBLE_LIMITS = (32_768, 4_096)
LOCAL_LIMITS = (8_192, 512)

_MODEL = re.compile(r"^[^\s@]+$")
_COMPATIBLE = re.compile(r"^(?P<model>[^\s@]+)@(?P<url>https?://\S+)$")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec: the provider family, the model (or script path) and a base URL."""

    family: Family
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        if self.family == "local":
            return "local"
        if self.family == "openai-compatible":
            return f"openai-compatible:{self.model}@{self.base_url}"
        return f"{self.family}:{self.model}"


def _bad(spec: str, reason: str) -> UsageError:
    return UsageError(f"bad model spec {spec!r}: {reason}")


def parse_model_spec(spec: str) -> ModelSpec:
    """Parse a model spec string; raise `UsageError` with a one-line reason when it is malformed."""
    if not isinstance(spec, str) or not spec.strip():
        raise _bad(str(spec), "it is empty")
    if spec == "local":
        return ModelSpec(family="local", model="SmolLM2-135M-Instruct")
    family, sep, rest = spec.partition(":")
    if not sep:
        raise _bad(spec, f"expected FAMILY:MODEL or 'local'; families: {', '.join(FAMILIES)}")
    if family not in FAMILIES:
        raise _bad(spec, f"unknown provider {family!r}; expected one of {', '.join(FAMILIES)}")
    if family == "local":
        raise _bad(spec, "'local' takes no model name (it always runs SmolLM2-135M-Instruct)")
    if family == "scripted":
        if not rest.strip():
            raise _bad(spec, "expected scripted:PATH to a JSON script")
        return ModelSpec(family="scripted", model=rest)
    if family == "openai-compatible":
        match = _COMPATIBLE.match(rest)
        if match is None:
            raise _bad(spec, "expected openai-compatible:MODEL@http(s)://HOST[:PORT]/PATH")
        return ModelSpec(family, match["model"], base_url=match["url"])
    if not _MODEL.match(rest):
        raise _bad(spec, f"expected {family}:MODEL with a model name and no spaces or '@'")
    return ModelSpec(family=family, model=rest)


def default_limits(spec: ModelSpec) -> tuple[int, int]:
    """Return the default (context window, output allowance) in tokens for `spec`'s model."""
    if spec.family in ("anthropic", "openai"):
        table = ANTHROPIC_LIMITS if spec.family == "anthropic" else OPENAI_LIMITS
        for prefix, window, output in table:
            if spec.model.startswith(prefix):
                return window, output
    if spec.family == "local":
        return LOCAL_LIMITS
    return COMPATIBLE_LIMITS


_WIRE = frozenset({"tool_choice", "accepts"})  # what a server takes: docs/providers.md
_OPTIONS: dict[Family, frozenset[str]] = {
    "anthropic": frozenset({"api_key", "base_url", "thinking", "prompt_cache", "timeout", "clock"})
    | _WIRE,
    "openai": frozenset({"api_key", "base_url", "timeout", "clock"}) | _WIRE,
    "openai-compatible": frozenset({"api_key", "timeout", "clock"}) | _WIRE,
    "local": frozenset({"model_path", "seed", "n_threads"}),
    "scripted": frozenset({"sleep"}),
}
_COMMON = frozenset({"context_window", "max_output_tokens"})


# The environment variable each SDK family reads its key from when no `api_key` option is given.
KEY_ENV: dict[Family, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def check_model(spec: str, **options: Any) -> None:
    """Check, without a network request, that `make_provider(spec, **options)` can build a
    provider that can be used: the spec parses, the options are known, a scripted file exists
    and is a valid script, and an `anthropic`/`openai` model has an API key (an `api_key`
    option or its environment variable). Raises `UsageError` with a one-line reason."""
    parsed = parse_model_spec(spec)
    _check_options(parsed, options)
    if parsed.family == "scripted":
        _scripted(parsed, options)
    if parsed.family == "local" and not options.get("model_path"):
        from ._local import OTHER_MODELS, locate_weights

        try:
            locate_weights()  # the `local` extra: cheap, imports neither package
        except UsageError as err:
            raise UsageError(f"{err}; {OTHER_MODELS}") from None
    env = KEY_ENV.get(parsed.family)
    if env is not None and not options.get("api_key") and not os.environ.get(env):
        raise UsageError(
            f"{spec}: no API key: set {env} (or [providers.{parsed.family}] api_key_env)"
        )


def _check_options(parsed: ModelSpec, options: dict[str, Any]) -> None:
    unknown = set(options) - _OPTIONS[parsed.family] - _COMMON
    if unknown:
        allowed = ", ".join(sorted(_OPTIONS[parsed.family] | _COMMON))
        raise UsageError(
            f"{parsed.family} provider: unknown option(s) {', '.join(sorted(unknown))}; "
            f"allowed: {allowed}"
        )


def make_provider(spec: str, **options: Any) -> Provider:
    """Build the provider a spec names.

    `context_window` and `max_output_tokens` override the family defaults (for `scripted`, the
    script's own values). Other options go to the adapter (`api_key`, `base_url`, `thinking`,
    `timeout`, and for the SDK families `tool_choice` and `accepts`); an option the family does
    not take, a bad value of those two, or a bad spec raises `UsageError`.
    """
    parsed = parse_model_spec(spec)
    _check_options(parsed, options)
    if parsed.family == "scripted":
        return _scripted(parsed, options)
    window, output = default_limits(parsed)
    options.setdefault("context_window", window)
    options.setdefault("max_output_tokens", output)
    # The SDK adapters load on first use: importing both SDKs costs about a second of start-up.
    if parsed.family == "anthropic":
        from ._anthropic import AnthropicProvider

        return AnthropicProvider(parsed.model, **options)
    if parsed.family == "local":
        from ._local import LocalProvider

        return LocalProvider(**options)
    if parsed.family == "openai-compatible":
        options["base_url"] = parsed.base_url
    from ._openai import OpenAIProvider

    return OpenAIProvider(parsed.model, flavor=parsed.family, **options)


def _scripted(parsed: ModelSpec, options: dict[str, Any]) -> ScriptedProvider:
    provider = ScriptedProvider.from_file(
        parsed.model, **{k: v for k, v in options.items() if k == "sleep"}
    )
    if "context_window" in options:
        provider.context_window = int(options["context_window"])
    if "max_output_tokens" in options:
        provider.max_output_tokens = int(options["max_output_tokens"])
    return provider
