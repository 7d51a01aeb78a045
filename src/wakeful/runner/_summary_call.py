"""The summary call of a compaction: ask a model for the summary that stands in for history.

Two ways, tried in order (`Summarizer.summarize`):

- **Cached**: a proactive compaction on the session's own model, with `reuse_cache` on, first
  asks with the step's own request plus the instruction (`_cached_summary.py`), so the
  provider reads the conversation from its prompt cache; its receipt extends the step's. When
  that cannot give a summary (media in the history, no room for the output, a refusal, a reply
  with no text) the separate request follows.
- **Separate**: a structured prompt over a text rendering of the replaced history (media as
  labels, `_summary.py`), with its own receipt; when it is too long it is shrunk (oldest entries
  first) a bounded number of times, then fails with `CompactionPromptTooLongError`.

Each request takes from the summary model's shared rate limit first, as a step's does
(`_spend_gate.py`): a wait is a durable `retry.scheduled` (`rate_limited`) in the turn's step,
which the compaction's outcome clears (`rate_waited`); the reply's tokens are charged to it.

Invariant: every request is preceded by its durable receipt (invariant 7), as a step's is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .._ids import new_receipt_id
from ..errors import (
    CompactionError,
    CompactionPromptTooLongError,
    ContextOverflowError,
    ProviderError,
)
from ..messages import CompactSummaryBlock, Message
from ..providers import (
    ModelRequest,
    Provider,
    StreamEvent,
    TextDelta,
    Usage,
    estimate_request_tokens,
)
from ._active import ActiveHistory, Split
from ._cached_summary import cached_summary_sections, carries_media
from ._context import RunContext
from ._crashpoints import crash_point
from ._port import SessionPort
from ._pricing import usage_event
from ._prompt import (
    ReceiptChain,
    Section,
    build_request,
    make_receipt,
    request_digest,
    section_blobs,
)
from ._spend_gate import charge_rate, share_retry_after, take_rate
from ._stream import stream_to_finish
from ._summary import render_messages, summary_sections
from ._work_state import render_work_state

log = logging.getLogger("wakeful.runner")

MAX_SHRINK_RETRIES = 3  # summary requests resent smaller after a provider overflow
SUMMARY_MAX_OUTPUT = 8_000


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary a model wrote: its text, usage, how many entries its request left out to fit,
    the receipt of that request and the model spec."""

    text: str
    usage: Usage
    dropped: int
    receipt_id: str
    model: str


class _Fallback:
    """The cached summary request gave no summary: ask the separate one."""


FALLBACK = _Fallback()


class Summarizer:
    """The summary calls of one runner's compactions, through the turn's session port; it
    reads the runner's active-history view and extends its receipt chain (see the module
    docstring)."""

    def __init__(
        self, ctx: RunContext, port: SessionPort, history: ActiveHistory, receipts: ReceiptChain
    ) -> None:
        self.ctx = ctx
        self.port = port
        self.history = history
        self.receipts = receipts
        self.rate_waited = False  # a summary request waited for its rate limit, not cleared yet

    async def summarize(
        self,
        split: Split,
        turn_id: str | None,
        step: int,
        step_sections: Sequence[Section] | None,
    ) -> Summary | None:
        """The summary of `split`, on the `[compaction] model` when one is set (built by the
        turn's provider factory, with the same `[providers]` options), else the session's
        model; None when interrupted. With `step_sections` (the request the step would send)
        on the session's own model and `reuse_cache` on, the cached request is asked first."""
        config = self.ctx.compaction
        spec = config.model or self.ctx.model_spec
        provider = self.ctx.providers(spec)
        reuse = config.reuse_cache and step_sections is not None
        if reuse and step_sections is not None and spec == self.ctx.model_spec:
            cached = await self._cached(provider, spec, turn_id, step, step_sections)
            if not isinstance(cached, _Fallback):
                return cached
        return await self._separate(provider, spec, split, turn_id, step)

    async def _cached(
        self,
        provider: Provider,
        spec: str,
        turn_id: str | None,
        step: int,
        step_sections: Sequence[Section],
    ) -> Summary | None | _Fallback:
        """The summary asked with the step's own request plus the instruction
        (`_cached_summary.py`); `FALLBACK` when that cannot give one, None when interrupted."""
        history = self.history.messages()
        if carries_media(history):
            return FALLBACK
        max_out = min(provider.max_output_tokens, SUMMARY_MAX_OUTPUT)
        sections = cached_summary_sections(
            list(step_sections),
            model=provider.model,
            max_output_tokens=max_out,
            cache_key=self.port.session_id,
        )
        req = build_request(sections, history, provider.name)
        if estimate_request_tokens(req) > provider.context_window - max_out:
            return FALLBACK  # it would not fit with the summary's output: not sent, not recorded
        rid = new_receipt_id()
        receipt = make_receipt(
            sections,
            history,
            request_digest(provider, req),
            receipt_id=rid,
            turn_id=turn_id,
            step=step,
            attempt=1,
            model=spec,
            purpose="compaction",
            base=self.receipts.last,
        )
        await self._take_rate(spec, (turn_id, step, 1))
        await self.port.commit([receipt], section_blobs(sections))
        self.receipts.committed(receipt, history)
        crash_point("compaction.summarizing")
        self._live(phase="progress", stage="summarizing", attempt=1, chars=0)
        try:
            finish = await stream_to_finish(provider, req, self.ctx.interrupt)
        except ProviderError as err:  # refused (overflow, a provider that will not): fall back
            await share_retry_after(self.ctx, err, spec)
            sid = self.port.session_id
            log.info("cached summary request of %s refused (%s); a separate one", sid, err)
            return FALLBACK
        if finish is None:
            return None
        await charge_rate(self.ctx, spec, finish.usage)
        text = finish.message.text().strip()
        if not text or finish.message.tool_calls():  # no summary: its tokens were still spent
            await self.port.commit([usage_event(spec, finish.usage, rid, self.ctx.prices)])
            return FALLBACK
        return Summary(text, finish.usage, 0, rid, spec)

    async def _separate(
        self, provider: Provider, spec: str, split: Split, turn_id: str | None, step: int
    ) -> Summary | None:
        """The summary asked with a prompt of its own, shrunk (oldest entries left out) until
        it fits, and again after each provider overflow, a bounded number of times."""
        entries = render_messages([r.message for r in split.replaced])
        previous = summary_text(split.previous)
        work = render_work_state(await self.port.work_state())
        max_out = min(provider.max_output_tokens, SUMMARY_MAX_OUTPUT)
        request = summary_request(provider, previous, entries, work, max_out)
        drop = _fitting_drop(request, len(entries), provider.context_window, max_out)
        for attempt in range(1, MAX_SHRINK_RETRIES + 2):
            sections, req = request(drop, attempt)
            rid = new_receipt_id()
            receipt = make_receipt(
                sections,
                [],
                request_digest(provider, req),
                receipt_id=rid,
                turn_id=turn_id,
                step=step,
                attempt=attempt,
                model=spec,
                purpose="compaction",
            )
            await self._take_rate(spec, (turn_id, step, attempt))
            await self.port.commit([receipt], section_blobs(sections))
            crash_point("compaction.summarizing")
            self._live(phase="progress", stage="summarizing", attempt=attempt, chars=0)
            try:
                finish = await stream_to_finish(
                    provider, req, self.ctx.interrupt, self._progress(attempt)
                )
            except ContextOverflowError as err:
                drop = shrunk_drop(err, attempt, len(entries), drop)
                continue
            except ProviderError as err:  # a 429's retry-after slows every process
                await share_retry_after(self.ctx, err, spec)
                raise
            if finish is None:
                return None
            await charge_rate(self.ctx, spec, finish.usage)
            text = finish.message.text().strip()
            if not text:
                raise CompactionError("the summary reply held no text")
            return Summary(text, finish.usage, drop, rid, spec)
        raise AssertionError("unreachable: the loop returns or raises")

    async def _take_rate(self, spec: str, where: tuple[str | None, int, int]) -> None:
        """Wait, durably, until the shared rate limit of `spec` allows the request at `where`
        (turn id, step, summary attempt); `rate_waited` notes a wait for the outcome to clear."""
        live = self.port.publish
        if await take_rate(
            self.ctx, self.port, self.port.commit, lambda k, **d: live(k, d), spec, where
        ):
            self.rate_waited = True

    def _progress(self, attempt: int) -> Callable[[StreamEvent], None]:
        """The summary stream's progress, published per text delta (characters so far)."""
        chars = 0

        def on_delta(event: StreamEvent) -> None:
            nonlocal chars
            if isinstance(event, TextDelta):
                chars += len(event.text)
                self._live(phase="progress", stage="streaming", attempt=attempt, chars=chars)

        return on_delta

    def _live(self, **data: str | int | None) -> None:
        self.port.publish("compaction", dict(data))


SummaryRequest = Callable[[int, int], tuple[list[Section], ModelRequest]]
"""A summary request leaving out the `drop` oldest entries, at attempt `attempt`."""


def summary_request(
    provider: Provider, previous: str | None, entries: Sequence[str], work: str, max_out: int
) -> SummaryRequest:
    """The separate summary prompt of `entries` (folding `previous` in, with the work state
    `work`) as a request to `provider`, shrunk by the oldest entries it is told to drop."""

    def request(drop: int, attempt: int) -> tuple[list[Section], ModelRequest]:
        prompt = summary_sections(
            previous,
            entries,
            work,
            drop=drop,
            model=provider.model,
            max_output_tokens=max_out,
            attempt=attempt,
        )
        return prompt.sections, build_request(prompt.sections, [], provider.name)

    return request


def _fitting_drop(
    request: SummaryRequest,
    entries: int,
    context_window: int,
    max_out: int,
) -> int:
    """How many of the oldest entries the summary request leaves out to fit the window with
    its output (an eighth of what is left at a time); `CompactionPromptTooLongError` when even
    the newest entry alone does not fit."""
    drop = 0
    while estimate_request_tokens(request(drop, 1)[1]) > context_window - max_out:
        if drop >= entries - 1:
            raise CompactionPromptTooLongError(
                f"the summary request does not fit the {context_window}-token "
                "window even with all but the newest message left out"
            )
        drop += max(1, (entries - drop) // 8)
    return drop


def shrunk_drop(err: ContextOverflowError, attempt: int, entries: int, drop: int) -> int:
    """After the provider refused attempt `attempt` as too long: how many of the oldest entries
    the next attempt leaves out (a quarter of what is left more), or
    `CompactionPromptTooLongError` once the retries are spent or one entry is left."""
    left = entries - drop
    if attempt > MAX_SHRINK_RETRIES or left <= 1:
        raise CompactionPromptTooLongError(
            f"the summary request was still too long after {attempt - 1} shrinking retries: {err}"
        ) from err
    return drop + max(1, left // 4)


def summary_text(message: Message | None) -> str | None:
    """The summary text a compaction's summary message holds (None: no message, or none)."""
    if message is None:
        return None
    texts = [b.summary for b in message.blocks if isinstance(b, CompactSummaryBlock)]
    return "\n".join(texts) or None
