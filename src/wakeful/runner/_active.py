"""Active history: what a request carries once compaction has drawn a boundary.

The transcript in the store only grows. A compaction appends a summary message (a user message
holding a `CompactSummaryBlock`, metadata ``compaction.first_kept_id``) that stands in for
everything before the retained tail. The active history is then::

    [summary] + tail (from first_kept_id up to the summary) + everything after the summary

Invariant: the tail always starts at a user-input boundary, so no tool call is separated from
its result, and older summaries never reappear (the newest summary rolls them up). The view is
read incrementally: each refresh fetches only the messages appended since the last one, and
rows before the tail are let go, so memory and per-step cost follow the active history, not the
whole transcript. Each message's token estimate is computed once, when it is read.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..messages import CompactSummaryBlock, Message, TextBlock, ToolResultBlock, shared_prefix
from ..providers import estimate_message_tokens
from ._tail import hidden_results, hide_results


class HistorySource(Protocol):
    """The reads the view needs (a `SessionPort` provides them)."""

    async def compaction_boundary(self) -> int:
        """The `through_seq` of the newest compaction (0: none)."""
        ...

    async def messages_after(self, seq: int) -> list[tuple[int, Message]]:
        """The messages stored after `seq`, with their seqs."""
        ...


def message_tokens(message: Message) -> int:
    """The local token estimate of one message (the providers' characters / 4 rule)."""
    return estimate_message_tokens(message)


def is_summary(message: Message) -> bool:
    """Whether `message` is a compaction summary written by the runtime."""
    meta = message.metadata or {}
    return (
        message.role == "user"
        and isinstance(meta.get("compaction"), dict)
        and "input_id" not in meta
        and any(isinstance(b, CompactSummaryBlock) for b in message.blocks)
    )


def is_user_input(message: Message) -> bool:
    """Whether `message` starts a turn: a delivered input, or text the user wrote.

    Tool results, summaries and runtime notes (text with an `event` or `signal` origin, such as
    the continuation after a cut stream) are not boundaries.
    """
    if message.role != "user" or is_summary(message):
        return False
    if any(isinstance(b, ToolResultBlock) for b in message.blocks):
        return False
    if "input_id" in (message.metadata or {}):
        return True
    return any(
        isinstance(b, TextBlock) and (b.origin is None or b.origin.kind == "user")
        for b in message.blocks
    )


@dataclass(frozen=True, slots=True)
class Row:
    """One loaded transcript message with its `seq` and token estimate."""

    seq: int
    message: Message
    tokens: int


@dataclass(frozen=True, slots=True)
class Split:
    """Where a compaction cuts: what the summary replaces and what stays word for word."""

    previous: Message | None  # the summary being rolled up, if any
    replaced: list[Row]
    kept: list[Row]

    @property
    def first_kept_id(self) -> str | None:
        """The id of the first retained message (None: nothing is retained)."""
        return self.kept[0].message.id if self.kept else None

    @property
    def through_seq(self) -> int:
        """The `seq` of the last replaced message."""
        return self.replaced[-1].seq


class ActiveHistory:
    """The incremental active-history view of one session (see the module docstring), read
    through the turn's session port."""

    def __init__(self, port: HistorySource) -> None:
        self.port = port
        self._rows: list[Row] = []
        self._order: list[Message] = []  # the rows' messages in request order (`messages`)
        self._seqs: list[int] = []
        self._summary: int | None = None  # index in _rows of the newest summary
        self._total = 0  # sum of the rows' token estimates
        self._last_seq = 0
        self._loaded = False
        self._version = 0  # bumped when a summary rebuilds the rows
        self._hide_id: str | None = None  # the `tail` strategy's hide point (`_tail.py`)
        self._saving: tuple[tuple[str, int], int, list[int]] | None = None
        self._expected: dict[str, Message] = {}  # messages the next refresh reads (`expect`)

    # -- loading ----------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Read the messages appended since the last refresh (the first one starts at the
        newest compaction boundary of this session, or at the beginning)."""
        if not self._loaded:
            self._loaded = True
            self._last_seq = await self.port.compaction_boundary()
        expected, self._expected = self._expected, {}
        for seq, message in await self.port.messages_after(self._last_seq):
            mine = expected.get(message.id)
            if mine is not None and mine == message:
                message = mine
            self._add(seq, message)
            self._last_seq = seq

    def expect(self, messages: Sequence[Message]) -> None:
        """The next `refresh` reads `messages` (just written through the port): each message it
        reads that equals one of them is kept as that very object, so that what was built from
        them ahead of the write (a step's request, the wire builder's settled prefix, which go
        by identity) still holds."""
        self._expected = {m.id: m for m in messages}

    def _add(self, seq: int, message: Message) -> None:
        row = Row(seq, message, message_tokens(message))
        if not is_summary(message):
            self._rows.append(row)
            self._seqs.append(seq)
            self._order.append(message)
            self._total += row.tokens
            return
        meta = (message.metadata or {}).get("compaction")
        first_kept_id = meta.get("first_kept_id") if isinstance(meta, dict) else None
        start = len(self._rows)
        if first_kept_id is not None:
            for i in range(len(self._rows) - 1, -1, -1):
                if self._rows[i].message.id == first_kept_id:
                    start = i
                    break
        kept = [r for r in self._rows[start:] if not is_summary(r.message)]
        self._rows = [*kept, row]
        self._order = [message, *(r.message for r in kept)]
        self._seqs = [r.seq for r in self._rows]
        self._summary = len(self._rows) - 1
        self._total = sum(r.tokens for r in self._rows)
        self._version += 1

    # -- the `tail` strategy's hide point ---------------------------------------------------

    def hide_before(self, message_id: str | None) -> None:
        """From now on estimate the tool results of every message before `message_id` as the
        `tail` strategy sends them (hidden); None: nothing hidden."""
        self._hide_id = message_id
        self._saving = None

    @property
    def hide_id(self) -> str | None:
        """The hide point in force (None: none)."""
        return self._hide_id

    def _savings(self) -> tuple[int, list[int]]:
        """The index of the hide point's row and the prefix sums of the tokens hiding saves in
        the rows before it ((0, [0]) while it is not loaded); computed once per hide point."""
        if self._hide_id is None:
            return 0, [0]
        key = (self._hide_id, self._version)
        if self._saving is not None and self._saving[0] == key:
            return self._saving[1], self._saving[2]
        index = next((i for i, r in enumerate(self._rows) if r.message.id == self._hide_id), None)
        if index is None:
            return 0, [0]
        prefix = [0]
        for row in self._rows[:index]:
            saved = 0
            if hidden_results(row.message):
                saved = max(0, row.tokens - message_tokens(hide_results(row.message)))
            prefix.append(prefix[-1] + saved)
        self._saving = (key, index, prefix)
        return index, prefix

    def _saved(self, lo: int, hi: int) -> int:
        """The tokens hiding saves among `rows[lo:hi]`."""
        index, prefix = self._savings()
        hi = min(hi, index)
        return prefix[hi] - prefix[lo] if hi > lo else 0

    def hidden_before(self, message_id: str) -> int:
        """How many tool results in the rows before `message_id` are not hidden yet."""
        index, _ = self._savings()
        count = 0
        for i, row in enumerate(self._rows):
            if row.message.id == message_id:
                break
            if i >= index:
                count += hidden_results(row.message)
        return count

    # -- reading ----------------------------------------------------------------------------

    def messages(self) -> list[Message]:
        """The active history in request order (the summary first): a copy of the list kept
        as rows are read, so a step costs what it read, not a pass over the history."""
        return self._order.copy()

    def reads(self, messages: Sequence[Message]) -> bool:
        """Whether the active history is, message for message, the very objects of `messages`
        (compared in C, without the copy `messages()` makes)."""
        order = self._order
        return len(order) == len(messages) == shared_prefix(order, messages)

    @property
    def last_seq(self) -> int:
        """The `seq` of the newest message read so far (0: none)."""
        return self._last_seq

    @property
    def summary_seq(self) -> int | None:
        """The `seq` of the newest summary in the active history, if any."""
        return None if self._summary is None else self._rows[self._summary].seq

    def total_tokens(self) -> int:
        """The estimated tokens of the whole active history (hidden tool results as sent)."""
        return self._total - self._saved(0, len(self._rows))

    def tokens_after(self, seq: int) -> int:
        """The estimated tokens of the active messages with a `seq` above `seq`."""
        start = bisect.bisect_right(self._seqs, seq)
        return sum(r.tokens for r in self._rows[start:]) - self._saved(start, len(self._rows))

    def new_tokens(self) -> int:
        """The estimated tokens added since the newest summary (everything, without one)."""
        if self._summary is None:
            return self.total_tokens()
        start = self._summary + 1
        return sum(r.tokens for r in self._rows[start:]) - self._saved(start, len(self._rows))

    def replied_after(self, seq: int) -> bool:
        """Whether a model reply (an assistant message) was stored after `seq`."""
        start = bisect.bisect_right(self._seqs, seq)
        return any(r.message.role == "assistant" for r in self._rows[start:])

    def message_at(self, seq: int) -> Message | None:
        """The active message stored at `seq`, if it is loaded."""
        i = bisect.bisect_left(self._seqs, seq)
        if i < len(self._seqs) and self._seqs[i] == seq:
            return self._rows[i].message
        return None

    # -- where to cut -----------------------------------------------------------------------

    def split(self, keep_turns: int, min_keep: int, max_tail_tokens: int) -> Split | None:
        """Plan a compaction: keep the last `keep_turns` turns (fewer, down to `min_keep`, when
        they would take more than `max_tail_tokens`); None when nothing is left to replace."""
        previous = None if self._summary is None else self._rows[self._summary].message
        body = [r for i, r in enumerate(self._rows) if i != self._summary]
        starts = [i for i, r in enumerate(body) if is_user_input(r.message)]
        cut = _cut(body, starts, keep_turns, min_keep, max_tail_tokens)
        if cut == 0:
            return None
        return Split(previous, body[:cut], body[cut:])


def _cut(
    body: Sequence[Row], starts: Sequence[int], keep: int, min_keep: int, max_tail: int
) -> int:
    """The index the retained tail starts at (len(body): keep nothing)."""
    if len(starts) < min_keep:
        return 0  # the turns that must stay are not all there: nothing can be replaced
    keep = max(min(keep, len(starts)), min_keep)
    tail_tokens = [0] * (len(body) + 1)
    for i in range(len(body) - 1, -1, -1):
        tail_tokens[i] = tail_tokens[i + 1] + body[i].tokens
    for k in range(keep, min_keep - 1, -1):
        cut = starts[-k] if k > 0 else len(body)
        if tail_tokens[cut] <= max_tail or k == min_keep:
            return cut
    return len(body)
