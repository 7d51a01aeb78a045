"""Wire-time pairing repair: the copy of a conversation that one provider request may carry.

`to_wire` owns the guarantee that every request is pairing-valid (`is_wire_valid`): each tool call
answered exactly once, in the message directly after its assistant message, no result without its
call, no call id twice. Invariant: it is wire-only. It may fabricate (a placeholder result, a
user-tail directive), so its output must never be written back to the store; persisted history is
healed only by the drop-only `drop_invalid_pairings`.

It works in two linear passes: the first decides which blocks survive and which result answers
each call (the first one found after it); the second emits messages, putting each call's result in
the message right after its assistant message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ._blocks import REASONING_TYPES, Block, Message, TextBlock, ToolCallBlock, ToolResultBlock
from ._memo import shared_prefix

RepairKind: TypeAlias = Literal[
    "synthetic-tool-result",
    "moved-tool-result",
    "orphan-tool-result",
    "duplicate-tool-result",
    "duplicate-tool-call",
    "misplaced-tool-call",
    "empty-message",
    "user-tail",
]

SYNTHETIC_TOOL_RESULT = (
    "[No result: this tool call was interrupted before it returned, or its result was lost.]"
)
DEFAULT_USER_TAIL_DIRECTIVE = "Continue."


@dataclass(frozen=True)
class Repair:
    """One change `to_wire` made; `index` is the position in its *input* of the message concerned.

    For `synthetic-tool-result` that is the assistant message holding the call; for
    `moved-tool-result` the message the result was taken from; for `user-tail` the last message.
    """

    kind: RepairKind
    call_id: str | None
    index: int


@dataclass
class _Plan:
    """What the first pass decided. Positions are (live position, block index)."""

    live: list[tuple[int, Message]]
    dropped: set[tuple[int, int]] = field(default_factory=set)
    answer: dict[str, tuple[int, int, ToolResultBlock]] = field(default_factory=dict)
    repairs: list[Repair] = field(default_factory=list)
    callers: set[str] = field(default_factory=set)  # the call ids found (not `settled`'s)


def _plan(messages: Sequence[Message], settled: Set[str] = frozenset()) -> _Plan:
    """Decide drops and answers; `settled` holds the call ids of a settled prefix, each
    answered in place (so `messages` continue it; read, never copied or changed)."""
    plan = _Plan(live=[(i, m) for i, m in enumerate(messages) if not m.aborted])
    callers = plan.callers
    for pos, (index, message) in enumerate(plan.live):
        for j, block in enumerate(message.blocks):
            kind: RepairKind | None = None
            call_id: str | None = None
            if isinstance(block, ToolCallBlock):
                if message.role != "assistant":
                    kind = "misplaced-tool-call"
                elif block.id in callers or block.id in settled:
                    kind = "duplicate-tool-call"
                else:
                    callers.add(block.id)
                call_id = block.id
            elif isinstance(block, ToolResultBlock):
                call_id = block.call_id
                if call_id not in callers and call_id not in settled:
                    kind = "orphan-tool-result"
                elif call_id in plan.answer or call_id in settled:
                    kind = "duplicate-tool-result"
                else:
                    plan.answer[call_id] = (pos, j, block)
            if kind is not None:
                plan.dropped.add((pos, j))
                plan.repairs.append(Repair(kind, call_id, index))
    return plan


def _answers(
    plan: _Plan, calls: list[ToolCallBlock], pos: int, where: int
) -> list[ToolResultBlock]:
    """Results for `calls` that are not already in the message at `pos`: moved or synthetic."""
    out: list[ToolResultBlock] = []
    for call in calls:
        found = plan.answer.get(call.id)
        if found is not None and found[0] == pos:
            continue
        if found is not None:
            plan.repairs.append(Repair("moved-tool-result", call.id, plan.live[found[0]][0]))
            out.append(found[2])
        else:
            plan.repairs.append(Repair("synthetic-tool-result", call.id, where))
            out.append(
                ToolResultBlock(call_id=call.id, output=SYNTHETIC_TOOL_RESULT, is_error=True)
            )
    return out


def _kept(plan: _Plan, pos: int, message: Message, pending: set[str]) -> list[Block]:
    kept: list[Block] = []
    for j, block in enumerate(message.blocks):
        if (pos, j) in plan.dropped:
            continue
        if isinstance(block, ToolResultBlock):
            # Only the chosen answer to a call of the directly preceding message stays in place.
            answer = plan.answer.get(block.call_id)
            if block.call_id not in pending or answer is None or answer[:2] != (pos, j):
                continue
        kept.append(block)
    return kept


def _insert_results(blocks: list[Block], results: list[ToolResultBlock]) -> list[Block]:
    """Insert results after the leading run of tool results (or first)."""
    at = next((k for k, b in enumerate(blocks) if not isinstance(b, ToolResultBlock)), len(blocks))
    return [*blocks[:at], *results, *blocks[at:]]


@dataclass
class _Pending:
    """The calls of the last emitted assistant message, waiting for the message after it."""

    message: Message
    index: int
    calls: list[ToolCallBlock]


def _results_message(plan: _Plan, pending: _Pending) -> Message:
    results = _answers(plan, pending.calls, -1, pending.index)
    return Message(
        id=f"{pending.message.id}~tool-results",
        role="user",
        blocks=tuple(results),
        lane=pending.message.lane,
    )


def _emit(plan: _Plan) -> tuple[list[Message], list[int], bool]:
    """Emit the repaired messages and their input positions; the flag says whether the last
    assistant message's calls were still waiting for the message after it."""
    out: list[Message] = []
    origins: list[int] = []
    pending: _Pending | None = None
    for pos, (index, message) in enumerate(plan.live):
        if pending is not None and message.role != "user":
            out.append(_results_message(plan, pending))
            origins.append(pending.index)
            pending = None
        calls = {c.id for c in pending.calls} if pending is not None else set()
        blocks = _kept(plan, pos, message, calls)
        if pending is not None:
            blocks = _insert_results(blocks, _answers(plan, pending.calls, pos, pending.index))
            pending = None
        changed = len(blocks) != len(message.blocks) or any(
            a is not b for a, b in zip(blocks, message.blocks, strict=False)
        )
        if not blocks or (changed and all(b.type in REASONING_TYPES for b in blocks)):
            plan.repairs.append(Repair("empty-message", None, index))
            continue
        out.append(message.model_copy(update={"blocks": tuple(blocks)}) if changed else message)
        origins.append(index)
        new_calls = [b for b in blocks if isinstance(b, ToolCallBlock)]
        if message.role == "assistant" and new_calls:
            pending = _Pending(message=out[-1], index=index, calls=new_calls)
    open_calls = pending is not None
    if pending is not None:
        out.append(_results_message(plan, pending))
        origins.append(pending.index)
    return out, origins, open_calls


def _finish(
    out: list[Message],
    origins: list[int],
    repairs: list[Repair],
    provider: str | None,
    on_repair: Callable[[Repair], None] | None,
    user_tail_directive: str,
) -> list[Message]:
    if provider is not None and out and out[-1].role == "assistant":
        last = out[-1]
        tail = TextBlock(text=user_tail_directive)
        out = [
            *out,
            Message(id=f"{last.id}~user-tail", role="user", blocks=(tail,), lane=last.lane),
        ]
        repairs = [*repairs, Repair("user-tail", None, origins[-1])]
    if on_repair is not None:
        for repair in repairs:
            on_repair(repair)
    return out


def to_wire(
    messages: Sequence[Message],
    provider: str | None = None,
    *,
    on_repair: Callable[[Repair], None] | None = None,
    user_tail_directive: str = DEFAULT_USER_TAIL_DIRECTIVE,
) -> list[Message]:
    """Return a copy of `messages` that one provider request may carry; never persist it.

    Promises: `is_wire_valid` holds for the result; pure and deterministic; idempotent (a second
    run returns an equal list and reports nothing); the input is not mutated; linear time.
    Aborted messages are left out; system messages stay. Repairs: a duplicate call id (anywhere
    in the input, which is one request whatever the lanes) or a tool call outside an assistant
    message is removed; a result with no earlier call, or a second result for a call, is removed;
    the first result found after its call is moved to the message right after the call's
    assistant message; a call with no result gets a placeholder (`SYNTHETIC_TOOL_RESULT`,
    `is_error=True`), in the user message right after, or in a new one; a message left empty (or
    reasoning-only) by repairs is removed. With `provider` given, an assistant tail gets a user
    message holding `user_tail_directive`. Unchanged messages are returned as the same objects;
    new messages get ids derived from their neighbour's. `on_repair` is called once per repair.
    """
    plan = _plan(messages)
    out, origins, _open = _emit(plan)
    return _finish(out, origins, plan.repairs, provider, on_repair, user_tail_directive)


class WireBuilder:
    """`to_wire` for a history that grows at its end (a turn's steps), in time linear in what
    is new since the last call.

    Promise: `builder(messages, ...)` returns exactly what `to_wire(messages, ...)` returns and
    reports the same repairs. It remembers the last input that needed no repair and left no call
    waiting (a *settled* prefix): no later message can change how such a prefix goes on the
    wire, so a call whose input starts with the very same message objects only plans what
    follows. Any other input is planned whole.
    """

    def __init__(self) -> None:
        self._prefix: list[Message] = []  # the settled input, by identity
        self._out: list[Message] = []  # its wire copy (no user tail)
        self._callers: set[str] = set()  # its call ids, every one answered in place
        self._last_origin: list[int] = []  # input position of its last wire message

    def __call__(
        self,
        messages: Sequence[Message],
        provider: str | None = None,
        *,
        on_repair: Callable[[Repair], None] | None = None,
        user_tail_directive: str = DEFAULT_USER_TAIL_DIRECTIVE,
    ) -> list[Message]:
        """The same as `to_wire(messages, provider, ...)`."""
        n = len(self._prefix)
        if n > len(messages) or shared_prefix(self._prefix, messages) < n:  # identity, in C
            self._prefix, self._out, self._callers, self._last_origin = [], [], set(), []
            n = 0
        rest = messages[n:]
        plan = _plan(rest, self._callers)
        out, origins, open_calls = _emit(plan)
        repairs = [Repair(r.kind, r.call_id, r.index + n) for r in plan.repairs]
        whole = self._out + out  # the one copy of the history a call makes (its answer's)
        # Of the positions, only the last one is read (the user tail's repair index).
        last_origin = [origins[-1] + n] if origins else self._last_origin
        if not repairs and not open_calls:  # settled: kept by extending, not by copies
            self._prefix += rest
            self._out += out
            self._callers |= plan.callers
            self._last_origin = last_origin
        return _finish(whole, last_origin, repairs, provider, on_repair, user_tail_directive)


def is_wire_valid(messages: Sequence[Message]) -> bool:
    """True when a request may carry `messages` as they are: the predicate `to_wire` guarantees.

    Every tool call sits in an assistant message and has exactly one result, in the user message
    directly after; no result lacks its call there; no call id appears twice; no message is
    empty or aborted.
    """
    seen: set[str] = set()
    expected: list[str] = []
    for message in messages:
        if not message.blocks or message.aborted:
            return False
        calls = [b.id for b in message.blocks if isinstance(b, ToolCallBlock)]
        results = [b.call_id for b in message.blocks if isinstance(b, ToolResultBlock)]
        if expected and message.role != "user":
            return False
        if Counter(results) != Counter(expected):
            return False
        if calls and message.role != "assistant":
            return False
        if seen.intersection(calls) or len(set(calls)) != len(calls):
            return False
        seen.update(calls)
        expected = calls
    return not expected


__all__ = [
    "DEFAULT_USER_TAIL_DIRECTIVE",
    "SYNTHETIC_TOOL_RESULT",
    "Repair",
    "RepairKind",
    "WireBuilder",
    "is_wire_valid",
    "to_wire",
]
