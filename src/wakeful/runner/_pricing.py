"""Cost of usage from a price table (USD per million tokens): the shipped list prices in
`prices.toml` (data, not code) under the `[prices]` overrides of `wakeful.toml`.

A request's input is priced in three parts, each at its own rate: tokens read from the
provider's prompt cache, tokens written to it, and the rest (`Usage.input_tokens` counts all
three). Invariant: a model no entry prices has an unknown cost, `None`, recorded as unknown
(`usage.recorded` without `cost_usd`) and shown as unknown: never as zero. A sum over requests
is the sum of the priced ones plus how many were unpriced (`_costs.CostSum`).

Which entry prices a model (`PriceTable.price`): a configured entry whose key is the model's
whole spec, then one whose key is `@BASE_URL` of the spec's server (every model of a compatible
server), then the longest configured, then the longest shipped, prefix of the bare model name.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from ..events import UsageRecorded
from ..providers import Usage

if TYPE_CHECKING:
    from ..config import PriceConfig


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens: uncached input, output, cache read, cache write."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    @classmethod
    def of(cls, entry: PriceConfig) -> Price:
        """A configured price; an unset cache rate is the input rate."""
        inp = entry.input
        read = inp if entry.cache_read is None else entry.cache_read
        write = inp if entry.cache_write is None else entry.cache_write
        return cls(inp, entry.output, read, write)


def _bare(model: str) -> str:
    return model.split(":", 1)[-1].split("@", 1)[0]


def _longest(name: str, entries: Mapping[str, Price]) -> Price | None:
    best = max((k for k in entries if name.startswith(k)), key=len, default=None)
    return None if best is None else entries[best]


@dataclass(frozen=True, slots=True)
class PriceTable:
    """The shipped prices under configured overrides (`PriceTable.of(config.prices)`)."""

    shipped: Mapping[str, Price]
    configured: Mapping[str, Price]
    # `price`'s answers by model: a turn prices the same model step after step (both tables
    # are read-only; a changed `[prices]` makes a new table).
    _found: dict[str, Price | None] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, prices: Mapping[str, PriceConfig] | None = None) -> PriceTable:
        """The shipped table with `prices` (the `[prices]` table of `wakeful.toml`) over it."""
        configured = {k: Price.of(v) for k, v in (prices or {}).items()}
        return cls(shipped_prices(), configured)

    def price(self, model: str) -> Price | None:
        """The price of `model` (a bare name or a model spec); None when nothing prices it."""
        try:
            return self._found[model]
        except KeyError:
            if len(self._found) >= 1024:  # model specs name paths and servers: bounded
                self._found.clear()
            found = self._found[model] = self._lookup(model)
            return found

    def _lookup(self, model: str) -> Price | None:
        if model in self.configured:
            return self.configured[model]
        _, at, server = model.partition("@")
        if at and f"@{server}" in self.configured:
            return self.configured[f"@{server}"]
        name = _bare(model)
        return _longest(name, self.configured) or _longest(name, self.shipped)

    def cost(self, model: str, usage: Usage) -> float | None:
        """The cost of `usage` at `model`'s price, each kind of input token at its own rate;
        None when `model` has no known price. Cached tokens beyond the input count (a provider
        that reports them apart) are not charged twice: uncached input never goes below zero."""
        p = self.price(model)
        if p is None:
            return None
        uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
        return (
            uncached * p.input
            + usage.cache_read_tokens * p.cache_read
            + usage.cache_write_tokens * p.cache_write
            + usage.output_tokens * p.output
        ) / 1_000_000


@cache
def shipped_prices() -> Mapping[str, Price]:
    """The list prices shipped in `prices.toml`, by model-name prefix (read once)."""
    text = resources.files(__package__).joinpath("prices.toml").read_text(encoding="utf-8")
    table = tomllib.loads(text)["models"]
    return {name: Price(**{k: float(v) for k, v in rates.items()}) for name, rates in table.items()}


@cache
def default_table() -> PriceTable:
    """The shipped prices with no overrides."""
    return PriceTable.of()


def price(model: str) -> Price | None:
    """The shipped price of `model` (a bare name or a model spec), None when unknown."""
    return default_table().price(model)


def known_price(model: str) -> bool:
    """Whether the shipped table prices `model` (a bare name or a model spec)."""
    return price(model) is not None


def cost_usd(model: str, usage: Usage, prices: PriceTable | None = None) -> float | None:
    """The cost of `usage` in USD at `model`'s price in `prices` (default: the shipped table);
    None when the model has no known price."""
    return (prices or default_table()).cost(model, usage)


def hit_ratio(usage: Usage) -> float | None:
    """The share of input tokens read from the prompt cache (None: no input tokens)."""
    if usage.input_tokens <= 0:
        return None
    return usage.cache_read_tokens / usage.input_tokens


def add_usage(a: Usage, b: Usage) -> Usage:
    """The sum of two usages, field by field."""
    return Usage(
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        a.cache_read_tokens + b.cache_read_tokens,
        a.cache_write_tokens + b.cache_write_tokens,
    )


def usage_event(
    model: str, usage: Usage, receipt_id: str | None = None, prices: PriceTable | None = None
) -> UsageRecorded:
    """The `usage.recorded` event of one request: its tokens by kind and their cost at
    `prices` (default: the shipped table); no `cost_usd` when the model has no known price."""
    return UsageRecorded(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cost_usd=cost_usd(model, usage, prices),
        receipt_id=receipt_id,
    )
