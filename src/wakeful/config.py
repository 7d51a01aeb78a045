"""Configuration: `wakeful.toml` of the workspace (or a parent), then the user config directory.

Keys follow the Zuno spec (`[compaction]`, `[retry]`) plus `[execution]`, `[providers]`,
`[agents.NAME]`, `[permissions]` and `[instructions]`. Project values win over user values, key
by key; `$WAKEFUL_CONFIG` names one file that replaces both. Every problem is a `UsageError`
naming the file and the dotted key; unknown keys are errors too, so a typo never silently
falls back to a default.

This module imports nothing from wakeful but `errors`: every layer may read configuration.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import platformdirs
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PositiveInt,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from .errors import UsageError

Permission = Literal["allow", "ask", "deny"]
FILENAME = "wakeful.toml"
ENV_VAR = "WAKEFUL_CONFIG"


class _Section(BaseModel):
    # strict: TOML has real booleans and integers, so `auto = "yes"` is a mistake, not True
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


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

    @model_validator(mode="after")
    def _ceiling_above_start(self) -> RetryConfig:
        if self.max_delay_ms < self.initial_delay_ms:
            raise ValueError(
                f"max_delay_ms ({self.max_delay_ms}) must be at least "
                f"initial_delay_ms ({self.initial_delay_ms})"
            )
        return self


class ExecutionConfig(_Section):
    """Claims and drains: lease length, recovery bound, how often the store is polled."""

    lease_ms: int = Field(30_000, ge=100)
    max_recovery_attempts: int = Field(3, ge=0)
    poll_interval_ms: int = Field(250, gt=0)


class FamilyConfig(_Section):
    """Connection settings of one provider family."""

    base_url: str | None = None
    api_key_env: str | None = Field(None, min_length=1)


class ProvidersConfig(_Section):
    """The default model spec, per-family connection settings, context-window overrides.

    `context_windows` is keyed by a full model spec or by a bare model name.
    """

    model_config = ConfigDict(populate_by_name=True)

    model: str | None = None
    context_windows: dict[str, PositiveInt] = Field(default_factory=dict)
    anthropic: FamilyConfig = Field(default_factory=FamilyConfig)
    openai: FamilyConfig = Field(default_factory=FamilyConfig)
    openai_compatible: FamilyConfig = Field(default_factory=FamilyConfig, alias="openai-compatible")

    def options_for(self, spec: str) -> dict[str, Any]:
        """Options for `make_provider(spec, **options)`: context window, base URL, API key.

        Raises `UsageError` when `api_key_env` names an environment variable that is unset.
        """
        family, _, rest = spec.partition(":")
        options: dict[str, Any] = {}
        window = self.context_windows.get(spec, self.context_windows.get(rest.split("@")[0]))
        if window is not None:
            options["context_window"] = window
        settings = {"anthropic": self.anthropic, "openai": self.openai}.get(family)
        if family == "openai-compatible":
            settings = self.openai_compatible
        if settings is None:
            return options
        if settings.base_url and family != "openai-compatible":  # its URL is in the spec
            options["base_url"] = settings.base_url
        if settings.api_key_env:
            key = os.environ.get(settings.api_key_env)
            if not key:
                raise UsageError(
                    f"providers.{family}.api_key_env: environment variable "
                    f"{settings.api_key_env} is not set"
                )
            options["api_key"] = key
        return options


class AgentConfig(_Section):
    """A configured agent, or overrides of a built-in one."""

    description: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    tools: list[str] | None = None
    max_steps: int | None = Field(None, ge=1)


class Config(_Section):
    """The effective configuration; every section has defaults, so `Config()` is valid.

    `permissions` maps a tool name (or `"*"` for every other tool) to allow, ask or deny.
    """

    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    providers: ProvidersConfig = Field(default_factory=ProvidersConfig)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    permissions: dict[str, Permission] = Field(default_factory=dict)
    instructions: dict[str, str] = Field(default_factory=dict)
    default_agent: str = Field("build", min_length=1)

    def to_json(self) -> dict[str, JsonValue]:
        """The configuration as JSON (TOML key spelling), secrets masked.

        A value whose key names a key, token, secret or password is shown as `****`; the
        names of environment variables (`api_key_env`) are shown as they are.
        """
        masked = _mask(self.model_dump(mode="json", by_alias=True))
        assert isinstance(masked, dict)
        return masked


def _mask(value: JsonValue) -> JsonValue:
    if isinstance(value, dict):
        return {k: "****" if _secret(k) and v else _mask(v) for k, v in value.items()}
    return value


def _secret(key: str) -> bool:
    lowered = key.lower()
    return not lowered.endswith("_env") and any(
        s in lowered for s in ("key", "token", "secret", "password")
    )


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        both_tables = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merge(out[key], value) if both_tables else value
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{path}: not valid TOML: {err}") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read: {err.strerror or err}") from None


def _field_at(loc: tuple[int | str, ...]) -> tuple[type[BaseModel], FieldInfo | None]:
    """The model holding the last key of `loc`, and that key's field (None if unknown)."""
    tp: Any = Config
    model: type[BaseModel] = Config
    info: FieldInfo | None = None
    for part in loc:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            model = tp
            info = _field_named(tp, str(part))
            if info is None:
                return model, None
            tp = info.annotation
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
    return model, info


def _field_named(model: type[BaseModel], key: str) -> FieldInfo | None:
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return info
    return None


def _bounds(info: FieldInfo | None, ctx: dict[str, Any]) -> str:
    """The allowed range of a numeric value: `1..100` when the field has both bounds, else the
    one bound the error reports (`at least 0`, `more than 0`, `at most 100`)."""
    metadata = info.metadata if info else []
    lo = next((m.ge for m in metadata if hasattr(m, "ge")), None)  # annotated_types.Ge
    hi = next((m.le for m in metadata if hasattr(m, "le")), None)
    if lo is not None and hi is not None:
        return f"must be {lo}..{hi}"
    words = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}
    for key, word in words.items():
        if key in ctx:
            return f"must be {word} {ctx[key]}"
    return "out of range"


_TYPE_WORDS = {
    "int": "an integer", "bool": "true or false", "string": "a string", "float": "a number",
    "dict": "a table", "model": "a table", "list": "a list", "literal": "one of",
}  # fmt: skip


def _explain(item: ErrorDetails) -> str:
    """A short, user-facing reason for one validation error."""
    kind = item["type"]
    if kind == "extra_forbidden":
        model, _ = _field_at(tuple(item["loc"]))
        known = sorted(info.alias or name for name, info in model.model_fields.items())
        return f"unknown key (known keys: {', '.join(known)})"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return _bounds(_field_at(tuple(item["loc"]))[1], item.get("ctx", {}))
    if kind == "literal_error":
        return f"must be one of {item.get('ctx', {}).get('expected', '')}"
    if kind == "value_error":
        return str(item["msg"]).removeprefix("Value error, ")
    word = _TYPE_WORDS.get(kind.split("_")[0])
    return f"must be {word}" if word else item["msg"]


def _validate(data: dict[str, Any], origin: str) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
        prefix = f"{origin}: {where}: " if where else f"{origin}: "
        raise UsageError(prefix + _explain(first) + more) from None


def project_file(cwd: Path) -> Path | None:
    """The nearest `wakeful.toml` from `cwd` upwards, stopping at the directory holding `.git`
    (the project root) or at the filesystem root."""
    for folder in (cwd, *cwd.parents):
        candidate = folder / FILENAME
        if candidate.is_file():
            return candidate
        if (folder / ".git").exists():
            return None
    return None


def user_file(user_dir: Path | None = None) -> Path:
    """The user's `wakeful.toml` (in `platformdirs.user_config_dir("wakeful")` by default)."""
    return (user_dir or Path(platformdirs.user_config_dir("wakeful"))) / FILENAME


def config_files(cwd: Path | None = None, user_dir: Path | None = None) -> list[Path]:
    """The files `load_config` reads, lowest precedence first."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return [Path(explicit)]
    user = user_file(user_dir)
    project = project_file((cwd or Path.cwd()).resolve())
    return [p for p in (user, project) if p is not None and p.is_file()]


def load_config(cwd: Path | None = None, user_dir: Path | None = None) -> Config:
    """The effective configuration.

    With `$WAKEFUL_CONFIG` set, exactly that file (it must exist). Otherwise the user file, then
    the project file found from `cwd` upwards, merged table by table with project keys winning;
    defaults for everything unset. Raises `UsageError` naming the file and key of a mistake.
    """
    data: dict[str, Any] = {}
    origins: list[str] = []
    for path in config_files(cwd, user_dir):
        part = _read(path)
        _validate(part, str(path))  # blame the file that holds the mistake
        data = _merge(data, part)
        origins.append(str(path))
    return _validate(data, " + ".join(origins) or "defaults")
