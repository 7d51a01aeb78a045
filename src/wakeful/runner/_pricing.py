"""Cost of usage from a price table of known models (USD per million tokens).

A request's input is priced in three parts, each at its own rate: tokens read from the
provider's prompt cache, tokens written to it, and the rest (`Usage.input_tokens` counts all
three). Unknown models cost 0 and say so (`known_price` is False); prices are list prices and
may drift.

Cache rates, as the providers publish them: Anthropic reads at 0.1x the input rate and writes
(5-minute cache) at 1.25x; OpenAI reads at its listed "cached input" rate and charges nothing
extra to write (a written token costs the input rate).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..events import UsageRecorded
from ..providers import Usage

# Anthropic's multipliers of the input rate for cache reads and 5-minute cache writes.
ANTHROPIC_CACHE_READ = 0.1
ANTHROPIC_CACHE_WRITE = 1.25


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens: uncached input, output, cache read, cache write."""

    input: float
    output: float
    cache_read: float
    cache_write: float


def _anthropic(inp: float, out: float) -> Price:
    return Price(inp, out, inp * ANTHROPIC_CACHE_READ, inp * ANTHROPIC_CACHE_WRITE)


def _openai(inp: float, out: float, cached: float) -> Price:
    return Price(inp, out, cached, inp)


# (model-name prefix, price); the longest matching prefix wins.
PRICES: tuple[tuple[str, Price], ...] = (
    ("claude-opus-4", _anthropic(15.0, 75.0)),
    ("claude-sonnet-4", _anthropic(3.0, 15.0)),
    ("claude-3-7-sonnet", _anthropic(3.0, 15.0)),
    ("claude-3-5-sonnet", _anthropic(3.0, 15.0)),
    ("claude-haiku-4", _anthropic(1.0, 5.0)),
    ("claude-3-5-haiku", _anthropic(0.8, 4.0)),
    ("gpt-4o-mini", _openai(0.15, 0.6, 0.075)),
    ("gpt-4o", _openai(2.5, 10.0, 1.25)),
    ("gpt-4.1-mini", _openai(0.4, 1.6, 0.1)),
    ("gpt-4.1-nano", _openai(0.1, 0.4, 0.025)),
    ("gpt-4.1", _openai(2.0, 8.0, 0.5)),
    ("gpt-5-mini", _openai(0.25, 2.0, 0.025)),
    ("gpt-5-nano", _openai(0.05, 0.4, 0.005)),
    ("gpt-5", _openai(1.25, 10.0, 0.125)),
    ("o4-mini", _openai(1.1, 4.4, 0.275)),
    ("o3", _openai(2.0, 8.0, 0.5)),
)


def price(model: str) -> Price | None:
    """The price of `model` (a bare name or a model spec), None when the table does not know it."""
    name = model.split(":", 1)[-1].split("@", 1)[0]
    best: tuple[str, Price] | None = None
    for prefix, entry in PRICES:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, entry)
    return None if best is None else best[1]


def known_price(model: str) -> bool:
    """Whether the price table knows `model` (a bare name or a model spec)."""
    return price(model) is not None


def cost_usd(model: str, usage: Usage) -> float:
    """The list-price cost of `usage` in USD, each kind of input token at its own rate; 0.0 for
    models the table does not know. Cached tokens beyond the input count (a provider that
    reports them apart) are not charged twice: uncached input never goes below zero."""
    p = price(model)
    if p is None:
        return 0.0
    uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    return (
        uncached * p.input
        + usage.cache_read_tokens * p.cache_read
        + usage.cache_write_tokens * p.cache_write
        + usage.output_tokens * p.output
    ) / 1_000_000


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


def usage_event(model: str, usage: Usage, receipt_id: str | None = None) -> UsageRecorded:
    """The `usage.recorded` event of one request: its tokens by kind and their priced cost."""
    return UsageRecorded(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cost_usd=cost_usd(model, usage),
        receipt_id=receipt_id,
    )
