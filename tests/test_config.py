"""Configuration: files, precedence, errors that name the file and the key, JSON view."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import wakeful._config_files
import wakeful._defaults
import wakeful.config
from wakeful._config_files import config_file_stats
from wakeful.config import (
    CompactionConfig,
    Config,
    ProvidersConfig,
    RetryConfig,
    config_files,
    load_config,
)
from wakeful.errors import UsageError


@pytest.fixture(autouse=True)
def no_env_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAKEFUL_CONFIG", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root (it holds `.git`, so the search stops there) with a nested directory."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / "src" / "pkg").mkdir(parents=True)
    return root


@pytest.fixture
def user(tmp_path: Path) -> Path:
    folder = tmp_path / "user-config"
    folder.mkdir()
    return folder


def write(folder: Path, text: str) -> Path:
    path = folder / "wakeful.toml"
    path.write_text(text)
    return path


def test_defaults_follow_the_spec(project: Path, user: Path):
    config = load_config(project, user)
    assert config == Config()
    assert config.compaction == CompactionConfig(
        auto=True, threshold_percent=80, tail_turns=2, reserved=12_000
    )
    retry = config.retry
    assert (retry.initial_delay_ms, retry.max_delay_ms, retry.jitter_percent) == (2000, 300_000, 20)
    assert (retry.poll_interval_ms, retry.max_retries) == (250, 4)
    assert config.default_agent == "build" and config.permissions == {}
    assert config_files(project, user) == []


def test_the_project_file_is_found_from_a_subdirectory(project: Path, user: Path):
    write(project, "[compaction]\nthreshold_percent = 60\n")
    assert load_config(project / "src" / "pkg", user).compaction.threshold_percent == 60


def test_the_search_stops_at_the_project_root(project: Path, user: Path):
    write(project.parent, "[compaction]\nthreshold_percent = 10\n")  # above the .git root
    assert load_config(project / "src", user).compaction.threshold_percent == 80


def test_project_keys_win_over_user_keys_key_by_key(project: Path, user: Path):
    write(
        user,
        """
default_agent = "plan"
[compaction]
threshold_percent = 50
tail_turns = 5
[permissions]
shell = "deny"
write_file = "ask"
[agents.build]
model = "scripted:user.json"
max_steps = 9
""",
    )
    write(
        project,
        """
[compaction]
threshold_percent = 70
[permissions]
shell = "ask"
[agents.build]
max_steps = 20
""",
    )
    config = load_config(project, user)
    assert (config.compaction.threshold_percent, config.compaction.tail_turns) == (70, 5)
    assert config.permissions == {"shell": "ask", "write_file": "ask"}
    build = config.agents["build"]
    assert (build.model, build.max_steps) == ("scripted:user.json", 20)
    assert config.default_agent == "plan"
    assert config_files(project, user) == [user / "wakeful.toml", project / "wakeful.toml"]


def test_wakeful_config_names_the_only_file(
    project: Path, user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    write(user, "[retry]\nmax_retries = 1\n")
    write(project, "[compaction]\nauto = false\n")
    explicit = tmp_path / "ci.toml"
    explicit.write_text("[retry]\nmax_retries = 9\n")
    monkeypatch.setenv("WAKEFUL_CONFIG", str(explicit))
    config = load_config(project, user)
    assert config.retry.max_retries == 9 and config.compaction.auto is True
    monkeypatch.setenv("WAKEFUL_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(UsageError, match=r"missing\.toml: cannot read"):
        load_config(project, user)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[compaction]\nthreshold_percent = 0", "compaction.threshold_percent: must be 1..100"),
        ("[compaction]\nthreshold_percent = 101", "compaction.threshold_percent: must be 1..100"),
        (
            "[compaction]\nthreshold_percent = 80.5",
            "compaction.threshold_percent: must be an integer",
        ),
        ('[compaction]\nauto = "yes"', "compaction.auto: must be true or false"),
        ("[compaction]\nreserved = -1", "compaction.reserved: must be 0..100000000"),
        ("[retry]\ninitial_delay_ms = 0", "retry.initial_delay_ms: must be more than 0"),
        (
            "[retry]\ninitial_delay_ms = 10\nmax_delay_ms = 5",
            "retry: max_delay_ms (5) must be at least initial_delay_ms (10)",
        ),
        ("[compaction]\nthreshold = 80", "compaction.threshold: unknown key (known keys: auto,"),
        (
            "[compation]\nauto = true",
            "compation: unknown key (known keys: agents, budgets, compaction,",
        ),
        (
            '[permissions]\nshell = "sometimes"',
            "permissions.shell: must be one of 'allow', 'ask' or 'deny'",
        ),
        ("[agents.review]\nmax_steps = 0", "agents.review.max_steps: must be 1..100000"),
        ('[agents.review]\nprompt = "x"', "agents.review.prompt: unknown key"),
        (
            "[providers.context_windows]\nsmall = 0",
            "providers.context_windows.small: must be at least 1",
        ),
        (
            '[providers.openai-compatible]\nurl = "x"',
            "providers.openai-compatible.url: unknown key",
        ),
        (
            '[providers.openai-compatible]\ntool_choice = "always"',
            "providers.openai-compatible.tool_choice: must be one of 'auto', 'required' or 'none'",
        ),
        (
            '[providers.models.smol]\naccepts = ["pdf"]',
            "providers.models.smol.accepts.0: must be one of 'image', 'audio', 'video' or 'document'",
        ),
        (
            "[providers.models.smol]\nmax_output_tokens = 0",
            "providers.models.smol.max_output_tokens: must be more than 0",
        ),
        ("[providers]\nmax_output_tokens = 0", "providers.max_output_tokens: must be more than 0"),
        ("[providers.models.smol]\nbase_url = 'x'", "providers.models.smol.base_url: unknown key"),
        ("default_agent = 3", "default_agent: must be a string"),
        ("compaction = 3", "compaction: must be a table"),
    ],
)
def test_invalid_values_name_the_file_and_the_key(
    project: Path, user: Path, text: str, message: str
):
    path = write(project, text + "\n")
    with pytest.raises(UsageError) as err:
        load_config(project, user)
    assert str(err.value).startswith(f"{path}: {message}")


def test_a_mistake_in_the_user_file_names_the_user_file(project: Path, user: Path):
    path = write(user, "[retry]\nmax_retries = -1\n")
    write(project, "[retry]\nmax_retries = 2\n")  # a valid project value does not hide it
    with pytest.raises(UsageError, match=f"^{path}: retry.max_retries: must be 0..100000"):
        load_config(project, user)


def test_a_syntax_error_names_the_file_and_the_line(project: Path, user: Path):
    path = write(project, "[compaction]\nthreshold_percent = \n")
    with pytest.raises(UsageError) as err:
        load_config(project, user)
    assert str(err.value).startswith(f"{path}: not valid TOML") and "line 2" in str(err.value)


def test_several_mistakes_are_counted(project: Path, user: Path):
    write(project, "[compaction]\nthreshold_percent = 0\ntail_turns = -1\n")
    with pytest.raises(UsageError, match=r"\(and 1 more\)$"):
        load_config(project, user)


def test_to_json_round_trips_and_masks_secrets(project: Path, user: Path):
    write(
        project,
        """
[providers]
model = "anthropic:claude-sonnet-4-5"
[providers.anthropic]
api_key_env = "MY_ANTHROPIC_KEY"
[providers.openai-compatible]
api_key_env = "LOCAL_KEY"
[instructions]
style = "Be brief."
api_token = "tok-123"
""",
    )
    config = load_config(project, user)
    data = config.to_json()
    json.dumps(data)
    assert data["providers"]["anthropic"]["api_key_env"] == "MY_ANTHROPIC_KEY"  # type: ignore[index,call-overload]
    assert data["providers"]["openai-compatible"]["api_key_env"] == "LOCAL_KEY"  # type: ignore[index,call-overload]
    assert data["instructions"] == {"style": "Be brief.", "api_token": "****"}
    assert set(data) == set(Config.model_fields)
    plain = Config(compaction=CompactionConfig(threshold_percent=55))
    assert Config.model_validate(plain.to_json()) == plain


def test_provider_options_for_a_model_spec(monkeypatch: pytest.MonkeyPatch):
    providers = ProvidersConfig.model_validate(
        {
            "context_windows": {"qwen2.5": 32_768, "openai:gpt-4o": 100_000},
            "openai": {"base_url": "https://proxy.example/v1", "api_key_env": "PROXY_KEY"},
            "openai-compatible": {"base_url": "ignored", "api_key_env": "LOCAL_KEY"},
        }
    )
    monkeypatch.setenv("PROXY_KEY", "sk-proxy")
    monkeypatch.delenv("LOCAL_KEY", raising=False)
    assert providers.options_for("openai:gpt-4o") == {
        "context_window": 100_000,
        "base_url": "https://proxy.example/v1",
        "api_key": "sk-proxy",
    }
    assert providers.options_for("local") == {}
    assert providers.options_for("anthropic:claude-x") == {}
    with pytest.raises(UsageError, match="openai-compatible.api_key_env.*LOCAL_KEY is not set"):
        providers.options_for("openai-compatible:qwen2.5@http://127.0.0.1:8080/v1")
    monkeypatch.setenv("LOCAL_KEY", "k")
    assert providers.options_for("openai-compatible:qwen2.5@http://127.0.0.1:8080/v1") == {
        "context_window": 32_768,
        "api_key": "k",
    }


def test_config_is_frozen_and_python_construction_validates():
    with pytest.raises(ValueError, match="frozen"):
        Config().default_agent = "plan"  # type: ignore[misc]
    with pytest.raises(ValueError, match="max_delay_ms"):
        RetryConfig(initial_delay_ms=500, max_delay_ms=100)


def test_config_imports_nothing_from_wakeful_but_errors():
    tree = ast.parse(Path(wakeful.config.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    ours = {name for name in imported if name.startswith((".", "wakeful"))}
    # `_defaults` holds the `[store]` defaults the store reads without the models, and
    # `_config_files` finds the files (a driver stamps them every step); neither imports any
    # of wakeful.
    assert ours == {".errors", "._defaults", "._config_files"}
    leaf = ast.parse(Path(wakeful._defaults.__file__).read_text())
    assert not [n for n in ast.walk(leaf) if isinstance(n, ast.Import | ast.ImportFrom)]
    files = ast.parse(Path(wakeful._config_files.__file__).read_text())
    froms = [n for n in ast.walk(files) if isinstance(n, ast.ImportFrom)]
    assert not [n for n in froms if n.level or (n.module or "").startswith("wakeful")]


def test_model_settings_most_specific_first(project: Path, user: Path):
    write(
        user,
        """
[providers]
max_output_tokens = 2048
[providers.openai-compatible]
tool_choice = "auto"
accepts = ["image"]
[providers.models.smol]
max_output_tokens = 64
accepts = []
""",
    )
    write(
        project,
        """
[providers.models."openai-compatible:smol@http://127.0.0.1:8080/v1"]
tool_choice = "required"
context_window = 1024
""",
    )
    providers = load_config(project, user).providers
    spec = "openai-compatible:smol@http://127.0.0.1:8080/v1"
    assert providers.options_for(spec) == {
        "max_output_tokens": 64,
        "tool_choice": "required",
        "accepts": [],
        "context_window": 1024,
    }
    assert providers.options_for("openai-compatible:other@http://h/v1") == {
        "max_output_tokens": 2048,
        "tool_choice": "auto",
        "accepts": ["image"],
    }
    assert providers.options_for("anthropic:claude-x") == {"max_output_tokens": 2048}


def test_the_output_limit_flag_wins_over_every_configured_limit():
    config = Config.model_validate(
        {
            "providers": {
                "max_output_tokens": 2048,
                "anthropic": {"max_output_tokens": 900},
                "models": {"smol": {"max_output_tokens": 64, "tool_choice": "none"}},
            }
        }
    )
    limited = config.with_output_limit(16)
    assert limited.providers.options_for("openai-compatible:smol@http://h/v1") == {
        "max_output_tokens": 16,
        "tool_choice": "none",
    }
    assert limited.providers.options_for("anthropic:claude-x") == {"max_output_tokens": 16}
    assert config.providers.options_for("anthropic:claude-x") == {"max_output_tokens": 900}


def test_model_settings_allow_exactly_what_providers_take():
    # config imports nothing from the providers, so the two spellings are held together here
    from typing import get_args

    from wakeful.config import ModelSettings
    from wakeful.messages import MEDIA_TYPES
    from wakeful.providers._base import TOOL_CHOICES

    def literals(field: str) -> set[str]:
        annotation = ModelSettings.model_fields[field].annotation
        found: set[str] = set()
        stack = [annotation]
        while stack:
            for arg in get_args(stack.pop()):
                (found.add if isinstance(arg, str) else stack.append)(arg)
        return found

    assert literals("tool_choice") == set(TOOL_CHOICES)
    assert literals("accepts") == set(MEDIA_TYPES)


def test_the_files_come_with_the_stat_that_found_them(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """What a driver stamps before every step (`execution/_place.config_stamp`): each file
    with its `stat`, the user's directory followed as `XDG_CONFIG_HOME` changes, a directory
    named `wakeful.toml` not a file, `$WAKEFUL_CONFIG` naming a missing file listed without one."""
    for name in ("one", "two"):
        (tmp_path / name / "wakeful").mkdir(parents=True)
        write(tmp_path / name / "wakeful", "")
    (project / "src" / "wakeful.toml").mkdir()
    here = write(project, "")
    for name in ("one", "two"):
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / name))
        found = config_file_stats(project / "src")
        user_toml = str(tmp_path / name / "wakeful" / "wakeful.toml")
        assert [p for p, _ in found] == [user_toml, str(here)]
        assert [st.st_size for _, st in found if st is not None] == [0, 0]
    monkeypatch.setenv("WAKEFUL_CONFIG", str(tmp_path / "gone.toml"))
    assert config_file_stats(project) == [(str(tmp_path / "gone.toml"), None)]
    assert config_files(project) == [tmp_path / "gone.toml"]
