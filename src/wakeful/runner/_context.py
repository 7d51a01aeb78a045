"""What a turn depends on, and what it returns: `RunContext` and `TurnResult`.

`RunContext` holds immutable dependencies only (model, agent, tools, policies, clock and the
signals that stop a turn). Durable state is not among them: a turn reads and writes it through
its `SessionPort` (`_port.py`), which the driver opens with its claim. Every provider a turn
uses comes from one injected factory, so the session's model and a `[compaction] model` are
built with the same `[providers]` options.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol, TypeAlias

from pydantic import JsonValue

from ..clock import Clock, SystemClock
from ..config import BudgetConfig, CompactionConfig, LoopGuardConfig, RetryConfig
from ..events import Decision, Outcome
from ..instructions import Source
from ..providers import Provider, Usage, make_provider
from ._agents import Agent
from ._budget_gate import Scopes, Spend
from ._interrupt import Interrupt
from ._pricing import PriceTable, default_table
from .tools import PermissionPolicy, Tool, ToolContext

# The interactive approval callback: (tool name, input) -> True/"allow" (once), "always" (this
# tool for the rest of the session), False/"deny", None (the person left the question: the call
# stays waiting for a decision, the turn pauses).
AskResult: TypeAlias = bool | Decision | None
Ask: TypeAlias = Callable[[str, dict[str, object]], Awaitable[AskResult]]

TraceIds: TypeAlias = Callable[[str], "tuple[str, str] | None"]
"""Session id -> the (trace id, span id) of its current step span, hex, when tracing is on."""

ProviderFactory: TypeAlias = Callable[[str], Provider]
"""Model spec -> a provider the factory owns (and closes): the caller never closes it."""


class RateGate(Protocol):
    """Shared rate limits (`_rate_gate.py`): the buckets of a driver's model specs, kept
    where every process draws from them."""

    async def take(self, spec: str) -> tuple[str, int] | None:
        """Take one request for `spec`: None when taken (or `spec` has no bucket), else the
        bucket's key and the milliseconds until it allows one."""
        ...

    async def charge(self, spec: str, tokens: int) -> None:
        """Charge a reply's tokens to `spec`'s bucket."""
        ...

    async def slow(self, spec: str, until_ms: int) -> None:
        """No request of `spec`'s bucket, from any process, before `until_ms`."""
        ...


class Interrupted(Exception):
    """Raised inside a turn when its interrupt event is set."""


class SharedProviders:
    """A `ProviderFactory` over `make_provider` with no options, one provider per spec, closed
    together (`aclose`): for scripts and tests that have no `Runtime`."""

    def __init__(self, build: ProviderFactory = make_provider) -> None:
        self._build = build
        self._made: dict[str, Provider] = {}

    def __call__(self, spec: str) -> Provider:
        """The provider of `spec`, built on first use."""
        if spec not in self._made:
            self._made[spec] = self._build(spec)
        return self._made[spec]

    async def aclose(self) -> None:
        """Close every provider built here."""
        made, self._made = list(self._made.values()), {}
        for provider in made:
            await provider.aclose()


class Refresh(Protocol):
    """`RunContext.refresh`: a new context when the session's agent, model or configuration
    changed, None when they stand; `files=False` compares the facts only (see there)."""

    def __call__(self, *, files: bool = True) -> Awaitable[RunContext | None]: ...


@dataclass(frozen=True)
class RunContext:
    """Everything a turn needs besides its session port: model, agent, tools, policies.

    Immutable: a driver that moves a session builds a new one. `interrupt` and `shutdown` are
    signals set from outside, not state of the turn.
    """

    providers: ProviderFactory
    model_spec: str
    agent: Agent
    tools: Mapping[str, Tool]
    tool_context: ToolContext
    policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    retry: RetryConfig = field(default_factory=RetryConfig)
    clock: Clock = field(default_factory=SystemClock)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    interrupt: asyncio.Event = field(default_factory=Interrupt)
    # Someone present to answer `ask` permissions (a terminal); None: such calls pause the turn
    # durably until a decision is admitted (`docs/approvals.md`).
    ask: Ask | None = None
    instruction_sources: Sequence[Source] = ()
    rng: random.Random = field(default_factory=random.Random)
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    # Set when an interrupt means "this process is shutting down": the turn then stays open
    # (no `turn.ended`) and `Interrupted` propagates, so the next driver resumes it.
    shutdown: asyncio.Event | None = None
    # The current step's trace ids, recorded in its receipt (`runner/_tracing.py`).
    trace_ids: TraceIds | None = None
    # The prices usage is costed at: the shipped table under `[prices]` (`_pricing.py`).
    prices: PriceTable = field(default_factory=default_table)
    # Resolves the session's agent, model and tools again, before each step and turn: a new
    # context when another process switched them (`Runtime.switch`) or its configuration files
    # were edited, None when they stand. `files=False`: the files were looked at a moment ago
    # (before the step boundary's write, whose unit read the session's facts): facts only.
    refresh: Refresh | None = None
    # When a turn that repeats itself pauses with reason `loop` (`_loop_guard.py`).
    loop_guard: LoopGuardConfig = field(default_factory=LoopGuardConfig)
    # The limits a step's request checks first, and what the session's root spent (`Spend`,
    # `_budget_gate.py`; None: nothing is counted, as for a turn without a store).
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    spend: Spend | None = None
    # The agent's and user's limits that apply, with what they spent (None: none configured).
    scopes: Scopes | None = None
    # The shared rate limits each request takes from first (`_rate_gate.py`); None: none.
    rates: RateGate | None = None

    @cached_property
    def provider(self) -> Provider:
        """The provider of the session's model (`model_spec`), from the factory: its one
        provider of the spec, asked once per context (a step reads it a dozen times)."""
        return self.providers(self.model_spec)

    @property
    def recorded_model(self) -> str:
        """The model as receipts, usage and kept output record it: the spec, else the name the
        provider gives its model."""
        return self.model_spec or self.provider.model

    def run_options(self) -> dict[str, JsonValue]:
        """The options a request runs under besides its model (the spec's `StoredRunOptions`):
        the agent's step allowance, the output limit, the retry budget and the session budget's
        caps (None: no cap). A step's receipt records them for its run record."""
        return {
            "max_steps": self.agent.max_steps,
            "max_output_tokens": self.provider.max_output_tokens,
            "max_retries": self.retry.max_retries,
            "budget_tokens": self.budget.session_tokens,
            "budget_usd": self.budget.session_usd,
        }

    def shutting_down(self) -> bool:
        """Whether the process is shutting down (an interrupt then leaves the turn open)."""
        return self.shutdown is not None and self.shutdown.is_set()


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended, with its steps and token usage."""

    turn_id: str
    outcome: Outcome
    steps: int
    usage: Usage
    error: str | None = None
    error_kind: str | None = None
    final_text: str = ""
    truncated: bool = False  # the last reply stopped at the output limit (`finish: length`)
