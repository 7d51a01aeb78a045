"""Which shared bucket a model's requests draw from (`[rate_limits]`), and the turn's
`RateGate` over the store's buckets (`store/_rates.py`, `docs/spend.md`).

A `[rate_limits."KEY"]` entry applies to a model spec whose endpoint's base URL starts with
KEY (an `openai-compatible` spec's URL, else `[providers.FAMILY] base_url`, the family's
environment variable, or its public endpoint) or whose API key is read from the environment
variable KEY; the longest matching KEY wins, and names the bucket, so every process
configured alike shares it. A store fault on a take lets the request go (logged): a rate
limit is a courtesy to the provider, whose own 429 is still retried.
"""

from __future__ import annotations

import logging
import os

from ..config import Config, RateLimitConfig
from ..errors import StoreError, UsageError
from ..providers import parse_model_spec
from ..store import LocalStore, Rate
from ._off_loop import off_loop

log = logging.getLogger("wakeful.execution")

PUBLIC_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
KEY_ENV = {  # where each family's adapter reads its API key when none is configured
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openai-compatible": "OPENAI_COMPATIBLE_API_KEY",
}


def endpoint_of(spec: str, config: Config) -> tuple[str | None, str | None]:
    """The (base URL, API key variable) the requests of `spec` go to and are signed with, as
    far as the configuration and environment say (None: unknown, as for `scripted`)."""
    try:
        parsed = parse_model_spec(spec)
    except UsageError:
        return None, None
    family, providers = parsed.family, config.providers
    settings = {
        "openai": providers.openai,
        "anthropic": providers.anthropic,
        "openai-compatible": providers.openai_compatible,
    }.get(family)
    url = parsed.base_url
    if url is None and family in PUBLIC_URLS:
        configured = settings.base_url if settings is not None else None
        url = configured or os.environ.get(BASE_URL_ENV[family]) or PUBLIC_URLS[family]
    key_env = settings.api_key_env if settings is not None else None
    return url, key_env or KEY_ENV.get(family)


def bucket_of(spec: str, config: Config) -> tuple[str, RateLimitConfig] | None:
    """The `[rate_limits]` entry (key, limits) `spec`'s requests draw from; None: no limit."""
    if not config.rate_limits:
        return None
    url, key_env = endpoint_of(spec, config)
    found = [
        key
        for key in config.rate_limits
        if key == key_env or (url is not None and url.rstrip("/").startswith(key.rstrip("/")))
    ]
    if not found:
        return None
    key = max(found, key=len)
    return key, config.rate_limits[key]


class StoreRates:
    """The `RateGate` of one driver's configuration over `store`'s shared buckets."""

    def __init__(self, store: LocalStore, config: Config) -> None:
        self.store = store
        self.config = config
        self._buckets: dict[str, tuple[str, Rate] | None] = {}

    def _bucket(self, spec: str) -> tuple[str, Rate] | None:
        if spec not in self._buckets:
            entry = bucket_of(spec, self.config)
            self._buckets[spec] = (
                None
                if entry is None
                else (entry[0], Rate(entry[1].rpm, entry[1].tpm, entry[1].burst_s))
            )
        return self._buckets[spec]

    async def take(self, spec: str) -> tuple[str, int] | None:
        """One request from `spec`'s bucket: None when taken (or no bucket), else the bucket's
        key and how long until it allows one."""
        bucket = self._bucket(spec)
        if bucket is None:
            return None
        key, rate = bucket
        now = self.store.clock.now_ms()
        try:
            wait = await off_loop(self.store.rates.take, key, rate, now)
        except StoreError as err:
            log.warning("rate limit %s not read (the request goes): %s", key, err)
            return None
        return None if wait == 0 else (key, wait)

    async def charge(self, spec: str, tokens: int) -> None:
        """Charge a reply's tokens to `spec`'s bucket when it limits tokens."""
        bucket = self._bucket(spec)
        if bucket is None or bucket[1].tpm is None or tokens <= 0:
            return
        try:
            await off_loop(self.store.rates.charge, bucket[0], tokens)
        except StoreError as err:
            log.warning("rate limit %s not charged: %s", bucket[0], err)

    async def slow(self, spec: str, until_ms: int) -> None:
        """No request from `spec`'s bucket, by any process, before `until_ms`."""
        bucket = self._bucket(spec)
        if bucket is None:
            return
        try:
            now = self.store.clock.now_ms()
            await off_loop(self.store.rates.slow, bucket[0], until_ms, now)
        except StoreError as err:
            log.warning("rate limit %s not slowed: %s", bucket[0], err)
