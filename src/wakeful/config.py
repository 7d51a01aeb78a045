"""Configuration: `wakeful.toml` of the workspace (or a parent), then the user config directory.

Keys follow the Zuno spec (`[compaction]`, `[retry]`) plus `[providers]`, `[agents.NAME]`,
`[permissions]` and `[instructions]`. Project values win over user values, key by key. Every
problem is a `UsageError` naming the file and the key; unknown keys are errors too.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import UsageError

Permission = Literal["allow", "ask", "deny"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CompactionConfig(_Section):
    """When and how to compact (Zuno `compaction`)."""

    auto: bool = True
    threshold_percent: int = Field(80, ge=1, le=100)
    tail_turns: int = Field(2, ge=0)
    reserved: int = Field(12_000, ge=0)
    model: str | None = None
    max_failures: int = Field(3, ge=1)
    min_new_share_percent: int = Field(10, ge=1, le=100)


class RetryConfig(_Section):
    """Durable retry of provider failures (Zuno `retry`)."""

    initial_delay_ms: int = Field(2_000, gt=0)
    max_delay_ms: int = Field(300_000, gt=0)
    jitter_percent: int = Field(20, ge=0, le=100)
    poll_interval_ms: int = Field(250, gt=0)
    max_retries: int = Field(4, ge=0)


class ExecutionConfig(_Section):
    """Claims and drains: lease length, recovery bound, how often the store is polled."""

    lease_ms: int = Field(30_000, ge=100)
    max_recovery_attempts: int = Field(3, ge=0)
    poll_interval_ms: int = Field(250, gt=0)


class ProvidersConfig(_Section):
    """The default model spec and per-model context-window overrides."""

    model: str | None = None
    context_windows: dict[str, int] = Field(default_factory=dict)


class AgentConfig(_Section):
    """A configured agent, or overrides of a built-in one."""

    description: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    tools: list[str] | None = None
    max_steps: int | None = Field(None, ge=1)


class Config(_Section):
    """The effective configuration."""

    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    providers: ProvidersConfig = Field(default_factory=ProvidersConfig)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    permissions: dict[str, Permission] = Field(default_factory=dict)
    instructions: dict[str, str] = Field(default_factory=dict)
    default_agent: str = "build"

    def to_json(self) -> dict[str, Any]:
        """The configuration as JSON, secrets masked (keys naming a key, token or secret)."""
        return _mask(self.model_dump(mode="json"))


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: "****"
            if any(s in k.lower() for s in ("key", "token", "secret", "password")) and v
            else _mask(v)
            for k, v in value.items()
        }
    return value


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            _merge(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{path}: not valid TOML: {err}") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror}") from None


def _validate(data: dict[str, Any], origin: str) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"{origin}: {where}: {first['msg']}") from None


def project_file(cwd: Path) -> Path | None:
    """The nearest `wakeful.toml` from `cwd` upwards (stopping at a `.git` directory)."""
    for folder in (cwd, *cwd.parents):
        candidate = folder / "wakeful.toml"
        if candidate.is_file():
            return candidate
        if (folder / ".git").exists():
            return None
    return None


def load_config(cwd: Path | None = None, user_dir: Path | None = None) -> Config:
    """Load the effective configuration (`$WAKEFUL_CONFIG`, else project then user file)."""
    explicit = os.environ.get("WAKEFUL_CONFIG")
    if explicit:
        path = Path(explicit)
        return _validate(_read(path), str(path))
    user = (user_dir or Path(platformdirs.user_config_dir("wakeful"))) / "wakeful.toml"
    project = project_file((cwd or Path.cwd()).resolve())
    data: dict[str, Any] = {}
    origins: list[str] = []
    for path in (user, project):
        if path is not None and path.is_file():
            part = _read(path)
            _validate(part, str(path))  # name the file that holds the mistake
            data = _merge(data, part)
            origins.append(str(path))
    return _validate(data, " + ".join(origins) or "defaults")
