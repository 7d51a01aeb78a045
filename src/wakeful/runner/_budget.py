"""The window arithmetic of compaction: how much of a model's window a request may use, when
proactive compaction starts, and the estimate of a request's fixed part (its sections).

Pure: no I/O. `Budget.usable` never lets the output allowance or the reserve take more than
half of what is left, so a small model under the default reserve still has a usable window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from ..config import CompactionConfig
from ..providers import Provider, estimate_request_tokens
from ._prompt import Section, build_request


@dataclass(frozen=True, slots=True)
class Budget:
    """The window arithmetic of one model under one compaction configuration."""

    context_window: int
    max_output_tokens: int
    reserved: int
    threshold_percent: int
    min_new_share_percent: int

    @classmethod
    def of(cls, provider: Provider, config: CompactionConfig) -> Budget:
        """The budget of `provider`'s model under `config`."""
        return cls(
            provider.context_window,
            provider.max_output_tokens,
            config.reserved,
            config.threshold_percent,
            config.min_new_share_percent,
        )

    @property
    def usable(self) -> int:
        """Window minus output allowance minus reserve; neither takes more than half of what
        is left, so a small model under the default reserve still has a usable window."""
        after_output = self.context_window - min(self.max_output_tokens, self.context_window // 2)
        return after_output - min(self.reserved, after_output // 2)

    @property
    def trigger(self) -> int:
        """The estimate at which proactive compaction starts."""
        return self.usable * self.threshold_percent // 100

    @property
    def min_growth(self) -> int:
        """The new content needed before another proactive compaction."""
        return self.usable * self.min_new_share_percent // 100


def should_compact(estimate: int, new_tokens: int, compacted_before: bool, budget: Budget) -> bool:
    """The proactive decision: over the threshold, and enough new content since the last one."""
    if estimate < budget.trigger:
        return False
    return not compacted_before or new_tokens >= budget.min_growth


def sections_tokens(sections: Sequence[Section], provider_name: str) -> int:
    """The estimated tokens of a request's system prompt and tools (no messages); memoized by
    the sections' ids and digests (a turn sends the same sections step after step)."""
    key = (provider_name, tuple(map(_ID_DIGEST, sections)))  # in C
    tokens = _SECTION_TOKENS.get(key)
    if tokens is None:
        tokens = estimate_request_tokens(build_request(sections, [], provider_name))
        if len(_SECTION_TOKENS) >= 256:
            _SECTION_TOKENS.clear()
        _SECTION_TOKENS[key] = tokens
    return tokens


_SECTION_TOKENS: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
_ID_DIGEST = attrgetter("id", "digest")
