"""Compaction: keep a long session inside the model's window without losing anything.

Owns the decision, the summary call and the boundary it writes:

- **Decision** (before each step, when `auto`): the request estimate is the last
  provider-reported input tokens plus a local estimate of what came after (characters / 4);
  without a report yet, the whole active request is estimated locally. Compaction starts when
  the estimate reaches `threshold_percent` of the usable window (`context_window` minus the
  output allowance minus `reserved`) and, after an earlier compaction, once new content fills
  `min_new_share_percent` of it (so a compaction that could not shrink enough never loops).
  The window arithmetic is `_budget.py`.
- **Summary call** (`_summary_call.py`): the step's own request plus an instruction (the
  provider's prompt cache), or a structured prompt over a text rendering of the replaced
  history, each with its own prompt receipt.
- **Boundary**: one transaction appends the summary (a user message holding a
  `CompactSummaryBlock`), `compaction.ended` (with the new instruction epoch's values) and the
  summary call's usage. Active history becomes the summary plus the retained tail (`_active`).

Invariant: nothing is deleted or rewritten; the full transcript, inbox, event log and receipts
stay in the store. Failures are bounded: `max_failures` failed compactions in a row end the turn
with a `CompactionError`; a manual compaction reports its failure instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from ..config import CompactionConfig, CompactionStrategy
from ..errors import CompactionError, ContextOverflowError, ProviderError, UsageError
from ..events import (
    CompactionEnded,
    CompactionFailed,
    CompactionSkipped,
    CompactionTail,
    CompactionTrigger,
    MessageAdded,
    RetryCleared,
    SessionEvent,
)
from ..messages import CompactSummaryBlock, Message, TextBlock
from ..providers import CHARS_PER_TOKEN, Usage
from ..store import InboxItem, Store
from ._active import ActiveHistory, Split, message_tokens
from ._budget import Budget, sections_tokens, should_compact
from ._context import RunContext
from ._port import SessionPort
from ._pricing import usage_event
from ._prompt import ReceiptChain, Section
from ._restore import restore_candidates, restore_files
from ._retry import error_kind
from ._summary_call import Summarizer, Summary
from ._tail import MEDIA_MARK, TAIL_SECTION

log = logging.getLogger("wakeful.runner")

LOOKBACK_EVENTS = 64  # how far back a new runner looks for the last provider-reported usage
IDLE_REASON = "idle"  # the payload `reason` of the control item an idle compaction is admitted as
REPORTED: tuple[CompactionTrigger, ...] = (
    "manual",
    "idle",
)  # answer a control item, never fail a turn
RESULT_TYPES = ("compaction.ended", "compaction.tail", "compaction.skipped", "compaction.failed")


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What a compaction did (the zidane result): `compacted`, or why not in `reason`.

    `reason` is ``nothing-to-compact``, ``aborted`` or ``failed`` (with `error`). `replaced`
    counts the messages the summary stands in for; `dropped` those of them the summary request
    left out to fit; `effective_tokens` estimates the whole next request (its system prompt,
    tools and history); `restored_files`
    names the files attached after the summary (`_restore`).
    """

    compacted: bool
    trigger: CompactionTrigger
    reason: str | None = None
    error: str | None = None
    summary_id: str | None = None
    replaced: int = 0
    dropped: int = 0
    model: str | None = None
    usage: Usage | None = None
    effective_tokens: int = 0
    restored_files: tuple[str, ...] = ()
    strategy: CompactionStrategy = "summary"

    def to_json(self) -> dict[str, object]:
        """The result as JSON (the CLI contract)."""
        out: dict[str, object] = {"compacted": self.compacted, "trigger": self.trigger}
        if not self.compacted:
            return out | {"reason": self.reason} | ({"error": self.error} if self.error else {})
        usage = self.usage or Usage(0, 0)
        return out | {
            "strategy": self.strategy,
            "summary_id": self.summary_id,
            "replaced": self.replaced,
            "dropped": self.dropped,
            "model": self.model,
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
            "effective_tokens": self.effective_tokens,
            "restored_files": list(self.restored_files),
        }


def result_of(event: SessionEvent) -> CompactionResult | None:
    """The result a compaction event records (None for other events)."""
    if isinstance(event, CompactionEnded):
        return CompactionResult(
            True,
            event.reason,
            summary_id=event.summary_message_id,
            replaced=event.replaced,
            dropped=event.dropped,
            model=event.model,
            usage=Usage(event.input_tokens, event.output_tokens),
            effective_tokens=event.effective_tokens,
            restored_files=event.restored_files,
        )
    if isinstance(event, CompactionTail):
        return CompactionResult(
            True,
            event.reason,
            replaced=event.hidden,
            effective_tokens=event.effective_tokens,
            strategy="tail",
        )
    if isinstance(event, CompactionSkipped):
        return CompactionResult(False, event.reason, reason=event.why)
    if isinstance(event, CompactionFailed):
        return CompactionResult(False, event.reason, reason="failed", error=event.error)
    return None


def compaction_result(
    store: Store, session_id: str, input_id: str, after: int = 0
) -> CompactionResult | None:
    """The result of the manual compaction requested as `input_id`, once it has run."""
    for stored in store.events(session_id, after=after, types=RESULT_TYPES):
        if getattr(stored.event, "input_id", None) == input_id:
            return result_of(stored.event)
    return None


@dataclass(frozen=True, slots=True)
class _Anchor:
    """A provider-reported request size and which active history it measured."""

    tokens: int
    after_seq: int  # the request held every active message up to this seq
    sections: int | None  # its sections' estimate (None: unknown, taken as unchanged)
    boundary: tuple[int | None, int | None]  # the summary seq and tail seq it was measured under


class Compactor:
    """Compaction for one turn's runner: a collaborator it calls, writing through the turn's
    session port. It reads the runner's active-history view (and refreshes it after writing a
    boundary); its own state is the estimate's anchor and its counts."""

    def __init__(
        self,
        ctx: RunContext,
        port: SessionPort,
        history: ActiveHistory,
        receipts: ReceiptChain | None = None,
    ) -> None:
        self.ctx = ctx
        self.port = port
        self.history = history
        # the turn's chain: a summary request extends the last step's
        self.receipts = receipts if receipts is not None else ReceiptChain()
        self._summarizer = Summarizer(ctx, port, history, self.receipts)
        self.generation = 0  # compactions this compactor wrote (each starts an epoch)
        self.failures = 0  # failed compactions in a row (this runner)
        self._anchor: _Anchor | None = None
        self._anchor_loaded = False
        self._sections: int | None = None  # estimate of the last request's sections
        self._tail: tuple[int, str] | None = None  # the newest `compaction.tail`: seq, hide point
        self._tail_loaded = False

    def use(self, ctx: RunContext) -> None:
        """Work under `ctx` from now on (the session's agent or model was switched)."""
        self.ctx = ctx
        self._summarizer.ctx = ctx

    @property
    def config(self) -> CompactionConfig:
        """The compaction configuration in force."""
        return self.ctx.compaction

    @property
    def reuses_cache(self) -> bool:
        """Whether a summary asks with the step's request first (`reuse_cache`, the `summary`
        strategy, written by the session's own model): the caller then passes that request's
        sections to `control`."""
        config = self.config
        same_model = config.model is None or config.model == self.ctx.model_spec
        return config.reuse_cache and config.strategy == "summary" and same_model

    # -- the estimate -----------------------------------------------------------------------

    def observe(self, input_tokens: int, sections: Sequence[Section]) -> None:
        """Anchor later estimates on the input tokens the provider reported for the request
        just built from `sections` and the active history as last read (a provider that
        reported nothing leaves the estimate local)."""
        if input_tokens <= 0:
            return
        tokens = sections_tokens(sections, self.ctx.provider.name)
        self._anchor = _Anchor(input_tokens, self.history.last_seq, tokens, self._boundary())
        self._anchor_loaded = True

    def _boundary(self) -> tuple[int | None, int | None]:
        """What the active history's request shape depends on: the newest summary and the
        newest tail hide point (an anchor measured under others no longer applies)."""
        return self.history.summary_seq, None if self._tail is None else self._tail[0]

    async def tail_section(self) -> Section | None:
        """The request section of the `tail` strategy's hide point (`_tail.py`), if any; the
        first call reads it from the store and tells the active history."""
        if not self._tail_loaded:
            self._tail_loaded = True
            self._tail = await self.port.tail_boundary()
            point = None if self._tail is None else self._tail[1].removesuffix(MEDIA_MARK)
            self.history.hide_before(point)  # estimated: tool results (media as they are)
        return None if self._tail is None else Section(TAIL_SECTION, "compaction", self._tail[1])

    def measure(self, sections: Sequence[Section]) -> None:
        """Take the size of `sections`, the next request's system prompt and tools, for the
        `effective_tokens` of the compaction that follows (a manual compaction between turns
        has no step that estimated them)."""
        self._sections = sections_tokens(sections, self.ctx.provider.name)

    async def estimate(self, sections: Sequence[Section]) -> int:
        """The estimated input tokens of a request from `sections` and the active history."""
        now = sections_tokens(sections, self.ctx.provider.name)
        self._sections = now
        await self.tail_section()
        anchor = await self._current_anchor()
        if anchor is None:
            return now + self.history.total_tokens()
        drift = 0 if anchor.sections is None else now - anchor.sections
        return anchor.tokens + self.history.tokens_after(anchor.after_seq) + drift

    async def _current_anchor(self) -> _Anchor | None:
        if not self._anchor_loaded:
            self._anchor_loaded = True
            self._anchor = await self._stored_anchor()
        anchor = self._anchor
        if anchor is None or anchor.boundary != self._boundary():
            return None
        return anchor

    async def _stored_anchor(self) -> _Anchor | None:
        """The newest usage a step recorded (right after its assistant message), if recent."""
        boundary = self._boundary()
        floor = max(boundary[0] or 0, boundary[1] or 0)
        for seq, event in reversed(await self.port.recent_usage(LOOKBACK_EVENTS)):
            if seq < floor:
                return None
            message = self.history.message_at(seq - 1)
            if message is not None and message.role == "assistant":
                if event.input_tokens <= 0:
                    return None
                return _Anchor(event.input_tokens, seq - 2, None, boundary)
        return None

    def _new_tokens(self) -> tuple[bool, int]:
        """Whether the active history was compacted before, and the tokens added since."""
        summary = self.history.summary_seq
        if self._tail is not None and self._tail[0] > (summary or 0):
            return True, self.history.tokens_after(self._tail[0])
        return summary is not None, self.history.new_tokens()

    # -- entry points -----------------------------------------------------------------------

    async def before_request(self, turn_id: str, step: int, sections: Sequence[Section]) -> bool:
        """Proactive compaction before a step's request; True when the request must be rebuilt.

        The caller has just read the active history (`messages()`), so it is not read again."""
        if not await self.due(sections):
            return False
        # the summary may reuse the step's request
        result = await self.run(
            "auto", turn_id=turn_id, step=step, in_turn=True, step_sections=sections
        )
        return result.compacted

    async def due(self, sections: Sequence[Section], extra: Sequence[Message] = ()) -> bool:
        """Whether `before_request` would compact before a request from `sections` and the
        active history as last read, followed by `extra` (messages about to be written, after
        everything read: a step built ahead of its boundary's write, `RequestBuilder.build_ahead`)."""
        added = sum(message_tokens(m) for m in extra)
        estimate = await self.estimate(sections) + added
        if not self.config.auto:
            return False
        budget = Budget.of(self.ctx.provider, self.config)
        compacted_before, new_tokens = self._new_tokens()
        return should_compact(estimate, new_tokens + added, compacted_before, budget)

    async def recover_overflow(self, turn_id: str, step: int, err: ContextOverflowError) -> bool:
        """The one compaction a provider-confirmed overflow allows; False when interrupted.

        Raises the overflow again when nothing can be compacted, `CompactionError` when the
        compaction failed.
        """
        result = await self.run("overflow", turn_id=turn_id, step=step, in_turn=True)
        if result.compacted:
            return True
        if result.reason == "nothing-to-compact":
            raise ContextOverflowError(
                f"{err}; compaction cannot make room: nothing is older than the current turn"
            ) from err
        if result.reason == "failed":
            raise CompactionError(f"{err}; the overflow compaction failed: {result.error}") from err
        return False

    async def control(
        self, item: InboxItem, *, in_turn: bool, sections: Sequence[Section] | None = None
    ) -> CompactionResult:
        """Run the compaction an inbox control item asks for: manual (payload: `tail_turns`),
        or idle (payload `reason: idle`). `sections`: the request the next step would send; a
        summary asks with them first (the provider's prompt cache, `_cached_summary`)."""
        if item.payload.get("reason") == IDLE_REASON:
            return await self._idle(item, in_turn, sections)
        tail = item.payload.get("tail_turns")
        tail_turns = tail if isinstance(tail, int) and not isinstance(tail, bool) else None
        return await self.run(
            "manual",
            input_id=item.input_id,
            tail_turns=tail_turns,
            in_turn=in_turn,
            step_sections=sections,
        )

    async def run(
        self,
        trigger: CompactionTrigger,
        *,
        turn_id: str | None = None,
        step: int = 0,
        input_id: str | None = None,
        tail_turns: int | None = None,
        in_turn: bool = False,
        step_sections: Sequence[Section] | None = None,
    ) -> CompactionResult:
        """Compact now. Inside a turn its newest turn always stays word for word.
        `step_sections`: the request the step (or the next step) would send, which a summary
        on the session's model asks with first (`_summary_call.py`). An overflow, under either
        strategy, first stubs older tool output and media on the wire (the `tail` hide point,
        no model call; 001, issue 37 item 20); a summary only when that cannot make room."""
        await self.tail_section()
        await self.history.refresh()
        budget = Budget.of(self.ctx.provider, self.config)
        keep = max(0, self.config.tail_turns if tail_turns is None else tail_turns)
        if self.config.strategy == "tail" or trigger == "overflow":  # an overflow stubs first
            tail = await self._hide_older_results(trigger, keep, budget, input_id)
            if tail is not None:
                return tail
        split = self.history.split(keep, 1 if in_turn else 0, budget.trigger // 2)
        if split is None:
            if trigger in REPORTED:
                why = "nothing-to-compact"
                skipped = CompactionSkipped(reason=trigger, why=why, input_id=input_id)
                await self.port.commit([skipped])
            return CompactionResult(False, trigger, reason="nothing-to-compact")
        self._live(phase="start", trigger=trigger, replaced=len(split.replaced))
        try:
            summary = await self._summarizer.summarize(split, turn_id, step, step_sections)
        except (ProviderError, CompactionError, UsageError) as err:  # UsageError: a bad `model`
            return await self._failed(trigger, err, input_id)
        if summary is None:
            await self.port.commit(
                [
                    CompactionSkipped(reason=trigger, why="aborted", input_id=input_id),
                    *self._cleared(),
                ]
            )
            self._live(phase="aborted", trigger=trigger)
            return CompactionResult(False, trigger, reason="aborted")
        result = await self._write(split, summary, trigger, turn_id, input_id)
        self.failures = 0
        self._live(phase="end", trigger=trigger, summary_id=result.summary_id)
        return result

    async def _idle(
        self, item: InboxItem, in_turn: bool, sections: Sequence[Section] | None
    ) -> CompactionResult:
        """The compaction before the cache expires (`[compaction] before_cache_expiry`): only
        while the session is still idle since the item was admitted (no reply stored after it,
        not inside a turn) and long (its request estimate at least `long_request_size` and half the
        trigger); its summary asks with `sections`, the request the next step would send, so
        the provider reads the conversation from its cache. Otherwise `not-needed`."""
        await self.history.refresh()
        needed = not in_turn and sections is not None and not self.history.replied_after(item.seq)
        if needed and sections is not None:
            budget = Budget.of(self.ctx.provider, self.config)
            floor = max(self.config.long_request_size, budget.trigger // 2)
            needed = await self.estimate(sections) >= floor
        if not needed or sections is None:
            skipped = CompactionSkipped(reason="idle", why="not-needed", input_id=item.input_id)
            await self.port.commit([skipped])
            return CompactionResult(False, "idle", reason="not-needed")
        return await self.run("idle", input_id=item.input_id, step_sections=sections)

    # -- the `tail` strategy ---------------------------------------------------------------

    async def _hide_older_results(
        self, trigger: CompactionTrigger, keep: int, budget: Budget, input_id: str | None
    ) -> CompactionResult | None:
        """The `tail` strategy (`_tail.py`): move the hide point to the start of the retained
        tail (the newest turn always kept, idle or not), no summary, no model call. None (an
        automatic or overflow compaction only) when hiding cannot leave `min_growth` free below
        the trigger: the stubs themselves pile up, so then a summary is written instead."""
        split = self.history.split(keep, 1, budget.trigger // 2)
        first_kept = None if split is None else split.first_kept_id
        hidden = 0 if first_kept is None else self.history.hidden_before(first_kept)
        if split is None or first_kept is None or hidden == 0:
            if trigger not in REPORTED:
                return None
            why = "nothing-to-compact"
            skipped = CompactionSkipped(reason=trigger, why=why, input_id=input_id)
            await self.port.commit([skipped])
            return CompactionResult(False, trigger, reason="nothing-to-compact")
        before = self.history.hide_id
        self.history.hide_before(first_kept)
        effective = (self._sections or 0) + self.history.total_tokens()
        if trigger not in REPORTED and effective + budget.min_growth > budget.trigger:
            self.history.hide_before(before)
            return None
        self._live(phase="start", trigger=trigger, replaced=hidden)
        event = CompactionTail(
            reason=trigger,
            hide_before_id=first_kept,
            through_seq=split.through_seq,
            hidden=hidden,
            effective_tokens=effective,
            input_id=input_id,
            media=True,  # older media goes as labels too (`_tail.py`)
        )
        try:
            await self.port.commit([event])
        except BaseException:
            self.history.hide_before(before)
            raise
        self._tail = await self.port.tail_boundary()
        self.failures = 0
        self._live(phase="end", trigger=trigger, summary_id=None)
        return CompactionResult(
            True, trigger, replaced=hidden, effective_tokens=effective, strategy="tail"
        )

    # -- writing the outcome ----------------------------------------------------------------

    async def _write(
        self,
        split: Split,
        summary: Summary,
        trigger: CompactionTrigger,
        turn_id: str | None,
        input_id: str | None,
    ) -> CompactionResult:
        block = CompactSummaryBlock(summary=summary.text, through_seq=split.through_seq)
        restored, paths = await self._restore(split)
        meta: dict[str, JsonValue] = {"first_kept_id": split.first_kept_id, "reason": trigger}
        if paths:
            meta["restored_files"] = list(paths)
        message = Message(role="user", blocks=(block, *restored), metadata={"compaction": meta})
        kept = sum(r.tokens for r in split.kept)
        effective = message_tokens(message) + kept + (self._sections or 0)
        usage = summary.usage
        ended = CompactionEnded(
            summary_message_id=message.id,
            through_seq=split.through_seq,
            reason=trigger,
            first_kept_id=split.first_kept_id,
            replaced=len(split.replaced),
            dropped=summary.dropped,
            model=summary.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            effective_tokens=effective,
            receipt_id=summary.receipt_id,
            input_id=input_id,
            instructions=await self.port.instruction_snapshot(),
            restored_files=tuple(paths),
        )
        await self.port.commit(
            [
                MessageAdded(message=message, turn_id=turn_id),
                ended,
                usage_event(summary.model, usage, summary.receipt_id, self.ctx.prices),
                *self._cleared(),
            ]
        )
        self.generation += 1
        await self.history.refresh()
        return CompactionResult(
            True,
            trigger,
            summary_id=message.id,
            replaced=len(split.replaced),
            dropped=summary.dropped,
            model=summary.model,
            usage=usage,
            effective_tokens=effective,
            restored_files=tuple(paths),
        )

    async def _restore(self, split: Split) -> tuple[list[TextBlock], list[str]]:
        """The recently read files attached after the summary (`_restore`), bounded by
        `restore_files` and a fifth of the proactive trigger."""
        if self.config.restore_files <= 0:
            return [], []
        paths = restore_candidates(
            [r.message for r in split.replaced], [r.message for r in split.kept], split.previous
        )
        budget = Budget.of(self.ctx.provider, self.config)
        return await restore_files(
            paths,
            self.ctx.tool_context,
            limit=self.config.restore_files,
            budget_chars=budget.trigger // 5 * CHARS_PER_TOKEN,
        )

    async def _failed(
        self, trigger: CompactionTrigger, err: Exception, input_id: str | None
    ) -> CompactionResult:
        if trigger not in REPORTED:  # a manual or idle failure is reported, not counted
            self.failures += 1
        await self.port.commit(
            [
                CompactionFailed(
                    reason=trigger, error=str(err), error_kind=error_kind(err), input_id=input_id
                ),
                *self._cleared(),
            ]
        )
        self._live(phase="failed", trigger=trigger, error=str(err))
        limit = self.config.max_failures
        if trigger not in REPORTED and self.failures >= limit:
            raise CompactionError(
                f"compaction failed {self.failures} times in a row (max_failures = {limit}); "
                f"last error: {err}"
            ) from err
        return CompactionResult(False, trigger, reason="failed", error=str(err))

    def _cleared(self) -> list[SessionEvent]:
        """`retry.cleared` for the outcome's transaction when a summary request's rate wait is
        still pending (`_summary_call.py`): the compaction that waited clears its own wait,
        also outside a turn, where no step's reply follows."""
        if not self._summarizer.rate_waited:
            return []
        self._summarizer.rate_waited = False
        return [RetryCleared()]

    def _live(self, **data: str | int | None) -> None:
        self.port.publish("compaction", dict(data))
