"""Model spec strings and `make_provider`."""

from __future__ import annotations

import importlib.util
import json

import pytest

from wakeful.errors import UsageError
from wakeful.providers import (
    AnthropicProvider,
    ModelSpec,
    OpenAIProvider,
    Provider,
    ScriptedProvider,
    _local,
    default_limits,
    make_provider,
    parse_model_spec,
)

LOCAL_INSTALLED = importlib.util.find_spec("llama_cpp") is not None


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("anthropic:claude-sonnet-4-5", ModelSpec("anthropic", "claude-sonnet-4-5")),
        ("openai:gpt-4o-mini", ModelSpec("openai", "gpt-4o-mini")),
        (
            "openai-compatible:qwen3:8b@http://127.0.0.1:11434/v1",
            ModelSpec("openai-compatible", "qwen3:8b", "http://127.0.0.1:11434/v1"),
        ),
        (
            "openai-compatible:org/model@https://user:pw@host.example/v1",
            ModelSpec("openai-compatible", "org/model", "https://user:pw@host.example/v1"),
        ),
        ("local", ModelSpec("local", "SmolLM2-135M-Instruct")),
        ("scripted:tests/fixtures/chat.json", ModelSpec("scripted", "tests/fixtures/chat.json")),
        ("scripted:/tmp/with:colon.json", ModelSpec("scripted", "/tmp/with:colon.json")),
    ],
)
def test_valid_specs_parse_and_round_trip(spec, expected):
    parsed = parse_model_spec(spec)
    assert parsed == expected
    assert str(parsed) == spec
    assert parse_model_spec(str(parsed)) == parsed


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("", "it is empty"),
        ("claude-3", "expected FAMILY:MODEL"),
        ("gemini:pro", "unknown provider 'gemini'"),
        ("anthropic:", "with a model name"),
        ("openai:gpt 4", "no spaces"),
        ("openai-compatible:llama", "MODEL@http(s)://"),
        ("openai-compatible:llama@localhost:8080", "MODEL@http(s)://"),
        ("openai-compatible:@http://x/v1", "MODEL@http(s)://"),
        ("local:other-model", "takes no model name"),
        ("scripted:", "scripted:PATH"),
    ],
)
def test_bad_specs_raise_a_one_line_usage_error(spec, reason):
    with pytest.raises(UsageError) as info:
        parse_model_spec(spec)
    message = str(info.value)
    assert reason in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("spec", "limits"),
    [
        ("anthropic:claude-opus-4-1", (200_000, 32_000)),
        ("anthropic:claude-sonnet-4-5", (200_000, 64_000)),
        ("anthropic:claude-future", (200_000, 8_192)),
        ("openai:gpt-4o-mini", (128_000, 16_384)),
        ("openai:gpt-4.1-mini", (1_047_576, 32_768)),
        ("openai:o3-mini", (200_000, 100_000)),
        ("openai:something-new", (128_000, 16_384)),
        ("openai-compatible:m@http://h/v1", (32_768, 4_096)),
        ("local", (8_192, 512)),
    ],
)
def test_default_limits_per_family(spec, limits):
    assert default_limits(parse_model_spec(spec)) == limits


async def test_make_provider_builds_each_sdk_family_with_overridable_limits():
    built = [
        make_provider("anthropic:claude-sonnet-4-5", api_key="k"),
        make_provider("openai:gpt-4o", api_key="k", context_window=64_000),
        make_provider("openai-compatible:m@http://127.0.0.1:1/v1", max_output_tokens=99),
    ]
    try:
        assert isinstance(built[0], AnthropicProvider)
        assert (built[0].name, built[0].model, built[0].context_window) == (
            "anthropic",
            "claude-sonnet-4-5",
            200_000,
        )
        assert isinstance(built[1], OpenAIProvider)
        assert (built[1].name, built[1].context_window, built[1].max_output_tokens) == (
            "openai",
            64_000,
            16_384,
        )
        assert (built[2].name, built[2].max_output_tokens) == ("openai-compatible", 99)
        assert all(isinstance(p, Provider) for p in built)
    finally:
        for provider in built:
            await provider.aclose()


def test_make_provider_reads_a_script_and_lets_options_override_its_limits(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"context_window": 500, "rules": [{"match": "", "replies": [{}]}]}))
    plain = make_provider(f"scripted:{path}")
    assert isinstance(plain, ScriptedProvider)
    assert (plain.context_window, plain.max_output_tokens, plain.model) == (500, 8_000, str(path))
    tuned = make_provider(f"scripted:{path}", context_window=50, max_output_tokens=10)
    assert (tuned.context_window, tuned.max_output_tokens) == (50, 10)


def test_make_provider_rejects_options_the_family_does_not_take(tmp_path):
    with pytest.raises(UsageError, match="unknown option\\(s\\) thinking"):
        make_provider("openai:gpt-4o", thinking={"type": "enabled"})
    with pytest.raises(UsageError, match="no script file"):
        make_provider(f"scripted:{tmp_path / 'missing.json'}")


def test_local_without_the_extra_says_how_to_install_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        _local.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp" else real(name, *a),
    )
    with pytest.raises(UsageError, match=r"pip install 'wakeful\[local\]'"):
        make_provider("local")


@pytest.mark.skipif(
    not LOCAL_INSTALLED, reason="the `local` extra (llama-cpp-python) is not installed"
)
def test_local_with_the_extra_builds_without_loading_the_model():
    provider = make_provider("local", context_window=2048)
    assert (provider.name, provider.model, provider.context_window) == (
        "local",
        "SmolLM2-135M-Instruct",
        2048,
    )
    assert provider.model_path.name.endswith(".gguf")
