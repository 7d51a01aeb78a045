"""Model spec strings and the provider factory, over the family table (`_families.py`).

A spec is `anthropic:MODEL`, `openai:MODEL`, `openai-compatible:MODEL@BASE_URL`, `local`,
`scripted:PATH`, or `FAMILY:MODEL` of a family a package registered (`wakeful.providers` entry
points). Invariant: `parse_model_spec(str(spec)) == spec`, and every malformed string is a
`UsageError` with a one-line reason, raised before any client is built.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from ..errors import UsageError
from ._base import Provider
from ._families import ModelSpec, ProviderFamily, family_names, find_family, register_builtin
from ._scripted import ScriptedProvider

# The families wakeful ships; a package adds others (`ProviderFamily`, entry points).
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

_COMPATIBLE = re.compile(r"^(?P<model>[^\s@]+)@(?P<url>https?://\S+)$")


def _bad(spec: str, reason: str) -> UsageError:
    return UsageError(f"bad model spec {spec!r}: {reason}")


def parse_model_spec(spec: str) -> ModelSpec:
    """Parse a model spec string; raise `UsageError` with a one-line reason when it is malformed."""
    if not isinstance(spec, str) or not spec.strip():
        raise _bad(str(spec), "it is empty")
    name, sep, rest = spec.partition(":")
    if not sep:
        bare = find_family(spec)
        if bare is not None and bare.bare_model is not None:
            return ModelSpec(family=spec, model=bare.bare_model)
        families = ", ".join(family_names())
        raise _bad(spec, f"expected FAMILY:MODEL or 'local'; families: {families}")
    family = find_family(name)
    if family is None:
        raise _bad(spec, f"unknown provider {name!r}; expected one of {', '.join(family_names())}")
    if family.bare_model is not None:
        raise _bad(spec, f"{name!r} takes no model name (it always runs {family.bare_model})")
    try:
        model, base_url = family.model(name, rest)
    except ValueError as err:
        raise _bad(spec, str(err)) from None
    return ModelSpec(family=name, model=model, base_url=base_url)


def _family_of(spec: ModelSpec) -> ProviderFamily:
    family = find_family(spec.family)
    if family is None:  # a ModelSpec built by hand with an unknown family
        raise UsageError(
            f"unknown provider {spec.family!r}; expected one of {', '.join(family_names())}"
        )
    return family


def _prefixed(table: tuple[tuple[str, int, int], ...]) -> Callable[[str], tuple[int, int]]:
    def limits(model: str) -> tuple[int, int]:
        return next((w, o) for prefix, w, o in table if model.startswith(prefix))

    return limits


def default_limits(spec: ModelSpec) -> tuple[int, int]:
    """Return the default (context window, output allowance) in tokens for `spec`'s model."""
    family = find_family(spec.family)
    if family is None or family.limits is None:
        return COMPATIBLE_LIMITS
    return family.limits(spec.model)


_COMMON = frozenset({"context_window", "max_output_tokens"})


def check_model(spec: str, **options: Any) -> None:
    """Check, without a network request, that `make_provider(spec, **options)` can build a
    provider that can be used: the spec parses, the options are known, the family's own check
    passes (a scripted file exists and is a valid script, the local weights are present), and a
    family with a key variable has an API key (an `api_key` option or that variable). Raises
    `UsageError` with a one-line reason."""
    parsed = parse_model_spec(spec)
    family = _family_of(parsed)
    _check_options(family, options)
    if family.check is not None:
        family.check(parsed, options)
    env = family.key_env
    if env is not None and not options.get("api_key") and not os.environ.get(env):
        raise UsageError(
            f"{spec}: no API key: set {env} (or [providers.{parsed.family}] api_key_env)"
        )


def _check_options(family: ProviderFamily, options: dict[str, Any]) -> None:
    unknown = set(options) - family.options - _COMMON
    if unknown:
        allowed = ", ".join(sorted(family.options | _COMMON))
        raise UsageError(
            f"{family.name} provider: unknown option(s) {', '.join(sorted(unknown))}; "
            f"allowed: {allowed}"
        )


def make_provider(spec: str, **options: Any) -> Provider:
    """Build the provider a spec names, with its family's factory (`_families.py`).

    `context_window` and `max_output_tokens` override the family defaults (for `scripted`, the
    script's own values). Other options go to the adapter (`api_key`, `base_url`, `thinking`,
    `timeout`, and for the SDK families `tool_choice` and `accepts`); an option the family does
    not take, a bad value of those two, or a bad spec raises `UsageError`.
    """
    parsed = parse_model_spec(spec)
    family = _family_of(parsed)
    _check_options(family, options)
    if family.limits is not None:
        window, output = family.limits(parsed.model)
        options.setdefault("context_window", window)
        options.setdefault("max_output_tokens", output)
    return family.factory(parsed, options)


def _scripted(parsed: ModelSpec, options: dict[str, Any]) -> ScriptedProvider:
    provider = ScriptedProvider.from_file(
        parsed.model, **{k: v for k, v in options.items() if k == "sleep"}
    )
    if "context_window" in options:
        provider.context_window = int(options["context_window"])
    if "max_output_tokens" in options:
        provider.max_output_tokens = int(options["max_output_tokens"])
    return provider


def _check_scripted(parsed: ModelSpec, options: dict[str, Any]) -> None:
    _scripted(parsed, options)


def _check_local(_parsed: ModelSpec, options: dict[str, Any]) -> None:
    if options.get("model_path"):
        return
    from ._local import OTHER_MODELS, locate_weights

    try:
        locate_weights()  # the `local` extra: cheap, imports neither package
    except UsageError as err:
        raise UsageError(f"{err}; {OTHER_MODELS}") from None


# The SDK adapters load on first use: importing both SDKs costs about a second of start-up.
def _anthropic(parsed: ModelSpec, options: dict[str, Any]) -> Provider:
    from ._anthropic import AnthropicProvider

    return AnthropicProvider(parsed.model, **options)


def _openai(parsed: ModelSpec, options: dict[str, Any]) -> Provider:
    from ._openai import OpenAIProvider

    if parsed.base_url is not None:  # openai-compatible: its URL is in the spec
        options["base_url"] = parsed.base_url
    return OpenAIProvider(parsed.model, flavor=parsed.family, **options)  # type: ignore[arg-type]


def _local(_parsed: ModelSpec, options: dict[str, Any]) -> Provider:
    from ._local import LocalProvider

    return LocalProvider(**options)


def _compatible_model(family: str, rest: str) -> tuple[str, str | None]:
    match = _COMPATIBLE.match(rest)
    if match is None:
        raise ValueError(f"expected {family}:MODEL@http(s)://HOST[:PORT]/PATH")
    return match["model"], match["url"]


def _script_path(family: str, rest: str) -> tuple[str, str | None]:
    if not rest.strip():
        raise ValueError(f"expected {family}:PATH to a JSON script")
    return rest, None


_WIRE = frozenset({"tool_choice", "accepts"})  # what a server takes: docs/providers.md
_CONNECT = frozenset({"api_key", "timeout", "clock"})
# The built-in families, in the order they are listed: (name, factory, options, key variable,
# limits, model part, check, bare model).
for _family in (
    ProviderFamily(
        "anthropic",
        _anthropic,
        _CONNECT | {"base_url", "thinking", "prompt_cache"} | _WIRE,
        "ANTHROPIC_API_KEY",
        _prefixed(ANTHROPIC_LIMITS),
    ),
    ProviderFamily(
        "openai",
        _openai,
        _CONNECT | {"base_url"} | _WIRE,
        "OPENAI_API_KEY",
        _prefixed(OPENAI_LIMITS),
    ),
    ProviderFamily(
        "openai-compatible",
        _openai,
        _CONNECT | _WIRE,
        limits=lambda _model: COMPATIBLE_LIMITS,
        model=_compatible_model,
    ),
    ProviderFamily(
        "local",
        _local,
        frozenset({"model_path", "seed", "n_threads"}),
        limits=lambda _model: LOCAL_LIMITS,
        check=_check_local,
        bare_model="SmolLM2-135M-Instruct",
    ),
    ProviderFamily(
        "scripted",
        lambda parsed, options: _scripted(parsed, options),
        frozenset({"sleep"}),
        model=_script_path,
        check=_check_scripted,
    ),
):
    register_builtin(_family)
