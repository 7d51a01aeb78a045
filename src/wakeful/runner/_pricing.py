"""Cost of usage from a price table of known models (USD per million tokens).

Unknown models cost 0 and say so (`known_price` is False); prices are list prices and may drift.
"""

from __future__ import annotations

# (model-name prefix, input $/Mtok, output $/Mtok); the longest matching prefix wins.
PRICES: tuple[tuple[str, float, float], ...] = (
    ("claude-opus-4", 15.0, 75.0),
    ("claude-sonnet-4", 3.0, 15.0),
    ("claude-3-7-sonnet", 3.0, 15.0),
    ("claude-3-5-sonnet", 3.0, 15.0),
    ("claude-haiku-4", 1.0, 5.0),
    ("claude-3-5-haiku", 0.8, 4.0),
    ("gpt-4o-mini", 0.15, 0.6),
    ("gpt-4o", 2.5, 10.0),
    ("gpt-4.1-mini", 0.4, 1.6),
    ("gpt-4.1-nano", 0.1, 0.4),
    ("gpt-4.1", 2.0, 8.0),
    ("gpt-5-mini", 0.25, 2.0),
    ("gpt-5-nano", 0.05, 0.4),
    ("gpt-5", 1.25, 10.0),
    ("o4-mini", 1.1, 4.4),
    ("o3", 2.0, 8.0),
)


def _price(model: str) -> tuple[float, float] | None:
    name = model.split(":", 1)[-1].split("@", 1)[0]
    best: tuple[str, float, float] | None = None
    for prefix, inp, out in PRICES:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, inp, out)
    return None if best is None else (best[1], best[2])


def known_price(model: str) -> bool:
    """Whether the price table knows `model` (a bare name or a model spec)."""
    return _price(model) is not None


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float:
    """The list-price cost of the tokens in USD; 0.0 for models the table does not know."""
    price = _price(model)
    if price is None:
        return 0.0
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
