"""The retry backoff (issue 37 item 15; before, verified only by hand): every delay is positive,
capped at `max_delay_ms`, spread by the jitter and within it, and grows until the cap; a peer's
`retry-after` raises a delay (clamped to the cap) and is never shortened by a smaller local one."""

from __future__ import annotations

import random

import pytest

from wakeful.config import RetryConfig
from wakeful.runner._retry import backoff_ms

CONFIG = RetryConfig(initial_delay_ms=100, max_delay_ms=1_000, jitter_percent=20)


def delays(retry: int, config: RetryConfig = CONFIG, after: int | None = None) -> list[int]:
    rng = random.Random(retry)
    return [backoff_ms(retry, config, after, rng) for _ in range(300)]


@pytest.mark.parametrize("retry", range(1, 12))
def test_delays_are_positive_capped_and_within_the_jitter(retry: int) -> None:
    base = min(1_000, 100 * 2 ** (retry - 1))
    got = delays(retry)
    assert all(d >= 1 for d in got)
    assert all(d <= 1_000 for d in got)
    assert all(base * 0.8 - 1 <= d <= base * 1.2 for d in got)


def test_delays_are_jittered_and_grow_until_the_cap() -> None:
    for retry in (1, 2, 3, 4):
        assert len(set(delays(retry))) > 20  # spread, not one fixed value
    means = [sum(delays(r)) / 300 for r in range(1, 6)]
    assert means[0] < means[1] < means[2] < means[3]  # 100, 200, 400, 800
    assert 900 <= means[4] <= 1_000  # 1600 capped at 1000 (the jitter only lowers it there)


def test_no_jitter_is_exact_doubling() -> None:
    exact = RetryConfig(initial_delay_ms=50, max_delay_ms=300, jitter_percent=0)
    assert [delays(r, exact)[0] for r in range(1, 6)] == [50, 100, 200, 300, 300]


def test_the_smallest_configuration_still_waits_a_positive_time() -> None:
    tiny = RetryConfig(initial_delay_ms=1, max_delay_ms=1, jitter_percent=100)
    assert set(delays(1, tiny)) == {1}


def test_retry_after_raises_a_delay_clamped_to_the_cap_and_never_shortens_it() -> None:
    assert all(d >= 700 for d in delays(1, after=700))  # longer than the local ~100
    assert all(d == 1_000 for d in delays(1, after=60_000))  # clamped to the ceiling
    local = delays(4)
    assert delays(4, after=5) == local  # an earlier peer time never shortens the local delay
    assert delays(4, after=0) == local and delays(4, after=-3) == local
