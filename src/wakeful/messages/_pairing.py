"""The drop-only pairing heal of persisted history: delete tool blocks that are provably invalid.

This is the only heal that may be written back to the store (DESIGN invariant 8), so it owns one
promise above all: it fabricates nothing. It deletes duplicate tool calls (later instance, per
lane), duplicate tool results (later instance, per message), results with no matching call in the
most recent same-lane assistant message, and messages those deletions emptied (a reasoning-only
remainder counts as empty). Orphan tool calls are kept: they are authentic model output, and the
wire-time `to_wire` gives them a placeholder result on every send without touching history.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ._blocks import REASONING_TYPES, Block, Message, ToolCallBlock, ToolResultBlock

PairingDropKind: TypeAlias = Literal[
    "duplicate-tool-call", "duplicate-tool-result", "orphan-tool-result", "empty-turn"
]


@dataclass(frozen=True)
class PairingDrop:
    """One deletion made by `drop_invalid_pairings`.

    `index` is the position in the *input* sequence; `call_id` is None for an `empty-turn` drop.
    """

    kind: PairingDropKind
    call_id: str | None
    index: int


@dataclass
class _Lane:
    seen_calls: set[str]
    last_calls: frozenset[str] = frozenset()


def _heal_blocks(
    message: Message, index: int, lane: _Lane, drops: list[PairingDrop]
) -> list[Block]:
    kept: list[Block] = []
    results_here: set[str] = set()
    for block in message.blocks:
        if isinstance(block, ToolCallBlock):
            if block.id in lane.seen_calls:
                drops.append(PairingDrop("duplicate-tool-call", block.id, index))
                continue
            lane.seen_calls.add(block.id)
        elif isinstance(block, ToolResultBlock):
            if block.call_id not in lane.last_calls:
                drops.append(PairingDrop("orphan-tool-result", block.call_id, index))
                continue
            if block.call_id in results_here:
                drops.append(PairingDrop("duplicate-tool-result", block.call_id, index))
                continue
            results_here.add(block.call_id)
        kept.append(block)
    return kept


def drop_invalid_pairings(
    messages: Sequence[Message],
    *,
    on_drop: Callable[[PairingDrop], None] | None = None,
    lane_for: Callable[[str | None], str] | None = None,
) -> list[Message]:
    """Delete provably invalid tool blocks from persisted history; safe to write back.

    Promises: only deletes (the output's blocks are a sub-multiset of the input's, in order);
    deterministic; idempotent (a second run deletes nothing and returns the same message
    objects); does not mutate its input; unchanged messages are returned as the same objects.
    Deletions cascade: a dropped duplicate call orphans its results, which are dropped too, and
    a message the deletions emptied (or left reasoning-only) is dropped whole. A message that was
    empty before is kept. `on_drop` is called once per deletion. A message's lane is
    `lane_for(message.lane)` when given, else `message.lane`; ids only collide within a lane.
    """
    lanes: dict[Hashable, _Lane] = {}
    out: list[Message] = []
    drops: list[PairingDrop] = []
    for index, message in enumerate(messages):
        key: Hashable = lane_for(message.lane) if lane_for is not None else message.lane
        lane = lanes.setdefault(key, _Lane(seen_calls=set()))
        before = len(drops)
        kept = _heal_blocks(message, index, lane, drops)
        if message.role == "assistant":
            lane.last_calls = frozenset(b.id for b in kept if isinstance(b, ToolCallBlock))
        if len(drops) == before:
            out.append(message)
        elif all(b.type in REASONING_TYPES for b in kept):
            drops.append(PairingDrop("empty-turn", None, index))
        else:
            out.append(message.model_copy(update={"blocks": tuple(kept)}))
    if on_drop is not None:
        for drop in drops:
            on_drop(drop)
    return out


__all__ = ["PairingDrop", "PairingDropKind", "drop_invalid_pairings"]
