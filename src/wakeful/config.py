"""Configuration: `wakeful.toml` of the workspace (or a parent), then the user config directory.

Keys follow the Zuno spec (`[compaction]`, `[retry]`) plus `[execution]`, `[store]`, `[providers]`,
`[agents.NAME]`, `[permissions]`, `[instructions]`, `[tools]` and `[mcp.servers.NAME]`. Project values win over user values, key
by key; `$WAKEFUL_CONFIG` names one file that replaces both. Every problem is a `UsageError`
naming the file and the dotted key; unknown keys are errors too, so a typo never silently
falls back to a default.

This module imports nothing from wakeful but `errors`: every layer may read configuration.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from ._config_files import ENV_VAR as ENV_VAR
from ._config_files import FILENAME as FILENAME
from ._config_files import config_files as config_files
from ._config_files import project_file as project_file
from ._config_files import user_file as user_file
from ._defaults import (
    LEASE_MS,
    MAX_RECOVERY_ATTEMPTS,
    PG_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    PG_LOCK_TIMEOUT_MS,
    PG_STATEMENT_TIMEOUT_MS,
    POLL_INTERVAL_MS,
    RETRY_POLL_INTERVAL_MS,
    SQLITE_BUSY_TIMEOUT_MS,
)
from .errors import UsageError

Permission = Literal["allow", "ask", "deny"]
# Built-in permissions below `[permissions]` (a tool's own rule and `"*"` both override them):
# commands and file writes are asked about (`docs/approvals.md`); everything else is allowed.
DEFAULT_PERMISSIONS: dict[str, Permission] = {
    "shell": "ask",
    "write_file": "ask",
    "edit_file": "ask",
}
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
MAX_TOKENS = 100_000_000  # upper bound of token counts: no model window is near it
MAX_COUNT = 100_000  # upper bound of counts (turns, steps, retries): beyond any real use


class _Section(BaseModel):
    # strict: TOML has real booleans and integers, so `auto = "yes"` is a mistake, not True
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


CompactionStrategy: TypeAlias = Literal["summary", "tail"]


class CompactionConfig(_Section):
    """When and how to compact (Zuno `compaction`)."""

    auto: bool = True
    threshold_percent: int = Field(80, ge=1, le=100)
    tail_turns: int = Field(2, ge=0, le=MAX_COUNT)
    reserved: int = Field(12_000, ge=0, le=MAX_TOKENS)
    model: str | None = None
    max_failures: int = Field(3, ge=1, le=MAX_COUNT)
    min_new_share_percent: int = Field(10, ge=1, le=100)
    # Ask a proactive summary with the step's own request (the provider's prompt cache) before
    # the separate, text-rendered summary request (docs/compaction.md).
    reuse_cache: bool = True
    # Files read by `read_file` in the summarized history, read again and attached after the
    # summary (at most this many; 0: off).
    restore_files: int = Field(5, ge=0, le=50)
    # `summary`: a model writes a summary of the older turns; `tail`: older tool results are
    # hidden on the wire, no summary, no model call (docs/compaction.md).
    strategy: CompactionStrategy = "summary"
    # Compact an idle long session shortly before its provider prompt cache is estimated to
    # expire, so the summary reads the conversation from the cache (docs/compaction.md).
    before_cache_expiry: bool = False
    cache_ttl_s: int = Field(300, ge=10, le=DAY_MS // 1000)  # the cache's estimated lifetime
    expiry_margin_s: int = Field(60, ge=1, le=DAY_MS // 1000)  # how long before it expires
    long_request_size: int = Field(100_000, ge=0, le=MAX_TOKENS)  # tokens: a long last request

    @model_validator(mode="after")
    def _margin_inside_ttl(self) -> CompactionConfig:
        if self.expiry_margin_s >= self.cache_ttl_s:
            raise ValueError(
                f"expiry_margin_s ({self.expiry_margin_s}) must be less than "
                f"cache_ttl_s ({self.cache_ttl_s})"
            )
        return self


class RetryConfig(_Section):
    """Durable retry of provider failures (Zuno `retry`)."""

    initial_delay_ms: int = Field(2_000, gt=0, le=DAY_MS)
    max_delay_ms: int = Field(300_000, gt=0, le=DAY_MS)
    jitter_percent: int = Field(20, ge=0, le=100)
    poll_interval_ms: int = Field(RETRY_POLL_INTERVAL_MS, gt=0, le=HOUR_MS)
    max_retries: int = Field(4, ge=0, le=MAX_COUNT)

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

    lease_ms: int = Field(LEASE_MS, ge=100, le=DAY_MS)
    max_recovery_attempts: int = Field(MAX_RECOVERY_ATTEMPTS, ge=0, le=MAX_COUNT)
    poll_interval_ms: int = Field(POLL_INTERVAL_MS, gt=0, le=HOUR_MS)


class LoopGuardConfig(_Section):
    """`[loop_guard]`: a turn that repeats a tool call (same input, same result) `repeats`
    times, or goes `no_progress_steps` steps in a row with no new tool result, pauses with
    reason `loop` (docs/spend.md). On by default, with generous thresholds."""

    enabled: bool = True
    repeats: int = Field(10, ge=2, le=MAX_COUNT)
    no_progress_steps: int = Field(20, ge=1, le=MAX_COUNT)


class ScopeBudget(_Section):
    """`[budgets.agents.NAME]` or `[budgets.users.NAME]`: a limit on what every session of an
    agent, or every session of a user, spends together, in `period` (`day`: the UTC day;
    `total`: ever). Unset: no limit (docs/spend.md)."""

    tokens: int | None = Field(None, ge=1, le=10**15)
    usd: float | None = Field(None, gt=0)
    period: Literal["day", "total"] = "total"


class BudgetConfig(_Section):
    """`[budgets]`: limits on what one root session (its children counted in) may spend in
    total, in tokens (input + output) and in USD of priced requests; a turn whose next request
    would start at or past one pauses with reason `budget` (docs/spend.md). Unset: no limit."""

    session_tokens: int | None = Field(None, ge=1, le=10**15)
    session_usd: float | None = Field(None, gt=0)
    # The share of a limit at which a notice is written (log and terminal); None: no notice.
    notice_percent: int | None = Field(80, ge=1, le=99)
    # Per agent and per user (the root session's metadata `user`); "*": each one apart.
    agents: dict[str, ScopeBudget] = Field(default_factory=dict)
    users: dict[str, ScopeBudget] = Field(default_factory=dict)


class RateLimitConfig(_Section):
    """One `[rate_limits."KEY"]` entry (docs/spend.md): requests and tokens per minute shared by
    every process using the store, for the provider endpoint whose base URL starts with KEY or
    whose API key is in the environment variable KEY. No rate set: only a 429's retry-after is
    shared. `burst_s`: the seconds of requests and tokens a quiet bucket saves up."""

    rpm: int | None = Field(None, ge=1, le=10**9)
    tpm: int | None = Field(None, ge=1, le=10**15)
    burst_s: float = Field(1.0, gt=0, le=60)


class StoreConfig(_Section):
    """How long a store transaction may wait for others (docs/store.md, "Faults").

    SQLite: `busy_timeout_ms`, how long a writer waits for another's lock. PostgreSQL: a lock
    wait ends after `lock_timeout_ms`, a statement after `statement_timeout_ms`, and a session
    idle inside a transaction (a paused process holding locks) is ended by the server after
    `idle_in_transaction_timeout_ms`. Past any of them the transaction fails as retryable.
    """

    busy_timeout_ms: int = Field(SQLITE_BUSY_TIMEOUT_MS, ge=1, le=HOUR_MS)
    lock_timeout_ms: int = Field(PG_LOCK_TIMEOUT_MS, ge=1, le=HOUR_MS)
    statement_timeout_ms: int = Field(PG_STATEMENT_TIMEOUT_MS, ge=1, le=HOUR_MS)
    idle_in_transaction_timeout_ms: int = Field(PG_IDLE_IN_TRANSACTION_TIMEOUT_MS, ge=1, le=HOUR_MS)


class EncryptionConfig(_Section):
    """Encryption at rest (docs/encryption.md): the file holding the master key (base64 or hex
    of 32 bytes; `$WAKEFUL_MASTER_KEY` wins over it) and the keyring's path (default: beside a
    SQLite file; `$WAKEFUL_KEYRING` wins over it)."""

    key_file: str | None = None
    keyring: str | None = None


class ModelSettings(_Section):
    """What one model, or every model of a family, is given and takes (docs/providers.md).

    `tool_choice` is sent with the tools; `accepts` lists the media kinds sent as they are (the
    others go out as text labels, on the wire only). Unset keys leave the provider's defaults.
    """

    context_window: Annotated[int, Field(ge=1, le=MAX_TOKENS)] | None = None
    max_output_tokens: Annotated[int, Field(gt=0, le=MAX_TOKENS)] | None = None
    tool_choice: Literal["auto", "required", "none"] | None = None
    accepts: list[Literal["image", "audio", "video", "document"]] | None = None


MODEL_KEYS = tuple(ModelSettings.model_fields)


class FamilyConfig(ModelSettings):
    """Connection settings of one provider family, and model settings for all its models."""

    base_url: str | None = None
    api_key_env: str | None = Field(None, min_length=1)


class ProvidersConfig(_Section):
    """The default model spec, per-family settings, per-model settings.

    `max_output_tokens` is the output limit of every model (a family or model table may set its
    own). `models` and `context_windows` are keyed by a full model spec or a bare model name.
    """

    model_config = ConfigDict(populate_by_name=True)

    model: str | None = None
    max_output_tokens: Annotated[int, Field(gt=0, le=MAX_TOKENS)] | None = None
    context_windows: dict[str, Annotated[int, Field(ge=1, le=MAX_TOKENS)]] = Field(
        default_factory=dict
    )
    models: dict[str, ModelSettings] = Field(default_factory=dict)
    anthropic: FamilyConfig = Field(default_factory=FamilyConfig)
    openai: FamilyConfig = Field(default_factory=FamilyConfig)
    openai_compatible: FamilyConfig = Field(default_factory=FamilyConfig, alias="openai-compatible")

    def _family(self, family: str) -> FamilyConfig | None:
        tables = {
            "anthropic": self.anthropic,
            "openai": self.openai,
            "openai-compatible": self.openai_compatible,
        }
        return tables.get(family)

    def with_output_limit(self, tokens: int) -> ProvidersConfig:
        """A copy whose output limit is `tokens` for every model (what `--max-output-tokens`
        does): the top-level key is set and every family's and model's own limit is cleared."""
        clear = {"max_output_tokens": None}
        return self.model_copy(
            update={
                "max_output_tokens": tokens,
                "models": {k: v.model_copy(update=clear) for k, v in self.models.items()},
                **{
                    name: getattr(self, name).model_copy(update=clear)
                    for name in ("anthropic", "openai", "openai_compatible")
                },
            }
        )

    def model_options(self, spec: str) -> dict[str, Any]:
        """The model settings of `spec` as `make_provider` options: context window, output
        limit, tool choice, accepted media (no connection settings, no environment reads).

        The most specific setting wins: `models[spec]`, then `models[bare model name]`, then
        the family's table, then the top-level `max_output_tokens` and `context_windows`.
        """
        family, _, rest = spec.partition(":")
        bare = rest.split("@")[0]
        options: dict[str, Any] = {}
        if self.max_output_tokens is not None:
            options["max_output_tokens"] = self.max_output_tokens
        window = self.context_windows.get(spec, self.context_windows.get(bare))
        if window is not None:
            options["context_window"] = window
        for layer in (self._family(family), self.models.get(bare), self.models.get(spec)):
            for name in MODEL_KEYS if layer is not None else ():
                if (value := getattr(layer, name)) is not None:
                    options[name] = value
        return options

    def options_for(self, spec: str) -> dict[str, Any]:
        """Options for `make_provider(spec, **options)`: `model_options(spec)` plus the
        family's base URL and API key.

        Raises `UsageError` when `api_key_env` names an environment variable that is unset.
        """
        family = spec.partition(":")[0]
        options = self.model_options(spec)
        settings = self._family(family)
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


class PriceConfig(_Section):
    """One `[prices."KEY"]` entry, USD per million tokens (docs/spend.md): KEY is a model spec,
    `@BASE_URL` (every model of that server) or a model-name prefix. An unset cache rate is
    the input rate; all zeros says the model is free (a local server), which is not unknown."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)


class AgentConfig(_Section):
    """A configured agent, or overrides of a built-in one."""

    description: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    tools: list[str] | None = None
    max_steps: int | None = Field(None, ge=1, le=MAX_COUNT)
    # Skills whose guidance the agent follows: `.wakeful/skills/NAME/SKILL.md` in the workspace,
    # each an instruction source of its own (`skill:NAME`, `docs/config.md`).
    skills: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]] = Field(default_factory=list)


MCP_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


class McpServerConfig(_Section):
    """One MCP server (`[mcp.servers.NAME]`): a stdio `command` (argv; run in the session's
    workspace, or `cwd` relative to it, with `env` over the process environment) or a
    streamable-HTTP `url`; `allowed_tools` (names or glob patterns) limits what is offered."""

    command: list[str] | None = Field(None, min_length=1)
    url: str | None = Field(None, pattern=r"^https?://")
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    allowed_tools: list[str] | None = None
    startup_timeout_s: int = Field(30, ge=1, le=3600)
    timeout_s: int = Field(300, ge=1, le=86_400)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        return self


class McpConfig(_Section):
    """`[mcp]`: the MCP servers whose tools agents are offered (`mcp__NAME__TOOL`)."""

    servers: dict[str, McpServerConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> McpConfig:
        for name in self.servers:
            if not name or not set(name) <= MCP_NAME_CHARS:
                raise ValueError(f"server name {name!r}: use letters, digits and '-'")
        return self


class Config(_Section):
    """The effective configuration; every section has defaults, so `Config()` is valid.

    `permissions` maps a tool name or glob pattern (`"*"`: every other tool) to allow, ask or
    deny. `tools` maps a tool name to the import path of a tool (`package.module:attribute`).
    """

    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    encryption: EncryptionConfig = Field(default_factory=EncryptionConfig)
    providers: ProvidersConfig = Field(default_factory=ProvidersConfig)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    permissions: dict[str, Permission] = Field(default_factory=dict)
    instructions: dict[str, str] = Field(default_factory=dict)
    tools: dict[str, str] = Field(default_factory=dict)
    mcp: McpConfig = Field(default_factory=McpConfig)
    prices: dict[str, PriceConfig] = Field(default_factory=dict)
    loop_guard: LoopGuardConfig = Field(default_factory=LoopGuardConfig)
    budgets: BudgetConfig = Field(default_factory=BudgetConfig)
    rate_limits: dict[str, RateLimitConfig] = Field(default_factory=dict)
    default_agent: str = Field("build", min_length=1)

    def with_output_limit(self, tokens: int) -> Config:
        """A copy whose output limit is `tokens` for every model (`--max-output-tokens`)."""
        return self.model_copy(update={"providers": self.providers.with_output_limit(tokens)})

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
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{path}: not valid TOML: not UTF-8 text (byte 0x{err.object[err.start]:02x} at "
            f"offset {err.start})"
        ) from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise UsageError(f"{path}: not valid TOML: arrays or tables nested too deeply") from None
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
    "int": "an integer",
    "bool": "true or false",
    "string": "a string",
    "float": "a number",
    "dict": "a table",
    "model": "a table",
    "list": "a list",
    "literal": "one of",
}


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


# Environment variables that set a key, over every file (flags > env > files > defaults).
ENV_KEYS: dict[str, tuple[str, ...]] = {
    "WAKEFUL_MODEL": ("providers", "model"),
    "WAKEFUL_AGENT": ("default_agent",),
}


def env_overrides() -> dict[str, Any]:
    """The keys the environment sets (`ENV_KEYS`; an empty variable sets nothing)."""
    out: dict[str, Any] = {}
    for var, path in ENV_KEYS.items():
        value = os.environ.get(var)
        if value:
            table = out
            for key in path[:-1]:
                table = table.setdefault(key, {})
            table[path[-1]] = value
    return out


def load_config(cwd: Path | None = None, user_dir: Path | None = None) -> Config:
    """The effective configuration.

    With `$WAKEFUL_CONFIG` set, exactly that file (it must exist). Otherwise the user file, then
    the project file found from `cwd` upwards, merged table by table with project keys winning;
    then the environment (`ENV_KEYS`: `$WAKEFUL_MODEL`, `$WAKEFUL_AGENT`) over every file;
    defaults for everything unset. Raises `UsageError` naming the file (or variable) and key
    of a mistake.
    """
    data: dict[str, Any] = {}
    origins: list[str] = []
    for path in config_files(cwd, user_dir):
        part = _read(path)
        _validate(part, str(path))  # blame the file that holds the mistake
        data = _merge(data, part)
        origins.append(str(path))
    env = env_overrides()
    if env:
        _validate(env, "the environment")
        data = _merge(data, env)
        origins.append("the environment")
    return _validate(data, " + ".join(origins) or "defaults")
