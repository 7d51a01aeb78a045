"""Sums and text of costs that may be unknown (a model with no known price, `_pricing.py`).

Pure and import-free, so the plain reads (`session show`, `wakeful usage`) use it without the
event models. Invariant: an unknown cost is shown as unknown, never as zero.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CostSum:
    """A sum of request costs: the priced ones' total and how many had no known price."""

    usd: float = 0.0
    unpriced: int = 0

    def add(self, cost: float | None) -> CostSum:
        """This sum with one more request's cost (None: unpriced)."""
        if cost is None:
            return CostSum(self.usd, self.unpriced + 1)
        return CostSum(self.usd + cost, self.unpriced)

    @property
    def known(self) -> float | None:
        """The total when every request was priced, else None (unknown)."""
        return None if self.unpriced else self.usd


def format_cost(cost: float | None, digits: int = 4, unpriced: int = 0) -> str:
    """A cost as the terminal shows it: `$0.0123`, `unknown`, or with `unpriced` requests of
    unknown price beside a priced part, `$0.0123 + unknown (2 requests)`."""
    if cost is None:
        return "unknown"
    text = f"${cost:.{digits}f}"
    if unpriced:
        text += f" + unknown ({unpriced} request{'s' if unpriced != 1 else ''})"
    return text
