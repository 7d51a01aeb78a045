"""Properties of converters and pairing repair over generated (and corrupted) conversations."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from wakeful.messages import (
    REASONING_TYPES,
    Message,
    PairingDrop,
    Repair,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    WireBuilder,
    drop_invalid_pairings,
    dump_messages,
    from_anthropic,
    from_openai_chat,
    from_openai_responses,
    is_wire_valid,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
    to_wire,
)

from .carried import carried_anthropic, carried_chat, carried_responses, flat, shape
from .sdk import (
    ANTHROPIC_SYSTEM_BLOCK,
    RESPONSES_ITEM,
    assert_anthropic_valid,
    assert_chat_valid,
    assert_sdk_valid,
)
from .strategies import PROPERTY, conversations, placed_conversations

providers = st.sampled_from([None, "anthropic", "openai"])


# --- round trips: every block the target can carry comes back unchanged ------------------------


@PROPERTY
@given(placed_conversations())
def test_anthropic_round_trip_keeps_what_it_carries(messages: list[Message]) -> None:
    carried = carried_anthropic(messages)
    payload = to_anthropic(carried)
    assert payload.system == []
    assert shape([from_anthropic(w) for w in payload.messages]) == shape(carried)


@PROPERTY
@given(placed_conversations(), st.sampled_from(["openai", "openrouter", "vllm"]))
def test_chat_round_trip_keeps_what_it_carries(messages: list[Message], provider: str) -> None:
    carried = carried_chat(messages, provider)
    back = [
        from_openai_chat(w, provider=provider) for w in to_openai_chat(carried, provider=provider)
    ]
    assert flat(back) == flat(carried)


@PROPERTY
@given(placed_conversations())
def test_responses_round_trip_keeps_what_it_carries(messages: list[Message]) -> None:
    carried = carried_responses(messages)
    assert flat(from_openai_responses(to_openai_responses(carried))) == flat(carried)


@PROPERTY
@given(placed_conversations())
def test_carried_subsets_are_not_trivial(messages: list[Message]) -> None:
    # Guards the round trips against a carried subset that silently became empty.
    kept = sum(len(m.blocks) for m in carried_anthropic(messages))
    non_system = [b for m in messages if m.role != "system" for b in m.blocks]
    if any(isinstance(b, TextBlock) and b.text and b.origin is None for b in non_system):
        assert kept > 0


# --- converter output is what the official SDKs accept -----------------------------------------


@PROPERTY
@given(conversations(refs=False))
def test_anthropic_output_validates_against_the_sdk(messages: list[Message]) -> None:
    payload = to_anthropic(to_wire(messages, "anthropic"))
    for block in payload.system:
        assert_sdk_valid(ANTHROPIC_SYSTEM_BLOCK, block)
    for wire in payload.messages:
        assert_anthropic_valid(wire)


@PROPERTY
@given(conversations(refs=False), st.sampled_from(["openai", "openrouter", "vllm"]))
def test_chat_output_validates_against_the_sdk(messages: list[Message], provider: str) -> None:
    for wire in to_openai_chat(to_wire(messages, provider), provider=provider):
        assert_chat_valid(wire)


@PROPERTY
@given(conversations(refs=False))
def test_responses_output_validates_against_the_sdk(messages: list[Message]) -> None:
    for item in to_openai_responses(to_wire(messages, "openai")):
        assert_sdk_valid(RESPONSES_ITEM, item)


@PROPERTY
@given(placed_conversations())
def test_converters_do_not_mutate_their_input(messages: list[Message]) -> None:
    before = dump_messages(messages)
    payload = to_anthropic(messages)
    chat = to_openai_chat(messages, provider="openrouter")
    items = to_openai_responses(messages)
    # Mutating the output must not reach the messages either (no shared mutable data).
    for wire in [*payload.messages, *chat, *items]:
        wire.clear()
    assert dump_messages(messages) == before


# --- to_wire ---------------------------------------------------------------------------------


@PROPERTY
@given(conversations(placed=False), providers)
def test_to_wire_output_is_always_wire_valid(messages: list[Message], provider: str | None) -> None:
    out = to_wire(messages, provider)
    assert is_wire_valid(out)
    if provider is not None and out:
        assert out[-1].role != "assistant"


@PROPERTY
@given(conversations(placed=False), providers)
def test_to_wire_is_idempotent_and_reports_nothing_the_second_time(
    messages: list[Message], provider: str | None
) -> None:
    once = to_wire(messages, provider)
    repairs: list[Repair] = []
    twice = to_wire(once, provider, on_repair=repairs.append)
    assert twice == once
    assert repairs == []
    assert to_wire(messages, provider) == once  # deterministic


@PROPERTY
@given(conversations(placed=False))
def test_to_wire_does_not_mutate_and_keeps_all_text(messages: list[Message]) -> None:
    before = dump_messages(messages)
    snapshot = list(messages)
    out = to_wire(messages)
    assert dump_messages(messages) == before
    assert all(a is b for a, b in zip(messages, snapshot, strict=True))
    live_text = [b for m in messages if not m.aborted for b in m.blocks if isinstance(b, TextBlock)]
    assert [b for m in out for b in m.blocks if isinstance(b, TextBlock)] == live_text


@PROPERTY
@given(conversations(placed=False))
def test_to_wire_keeps_the_first_call_of_every_id(messages: list[Message]) -> None:
    wanted: list[str] = []
    for m in messages:
        if m.role == "assistant" and not m.aborted:
            for call in m.tool_calls():
                wanted += [call.id] if call.id not in wanted else []
    assert [b.id for m in to_wire(messages) for b in m.tool_calls()] == wanted


@PROPERTY
@given(conversations(placed=False))
def test_valid_input_passes_through_untouched(messages: list[Message]) -> None:
    repairs: list[Repair] = []
    out = to_wire(messages, on_repair=repairs.append)
    if is_wire_valid(messages):
        assert repairs == []
        assert all(a is b for a, b in zip(out, messages, strict=True))
    else:
        assert repairs or any(m.aborted for m in messages)


# --- drop_invalid_pairings ---------------------------------------------------------------------


def _block_multiset(messages: list[Message]) -> Counter[str]:
    return Counter(b.model_dump_json() for m in messages for b in m.blocks)


@PROPERTY
@given(conversations(placed=False))
def test_drop_invalid_pairings_only_deletes(messages: list[Message]) -> None:
    before = dump_messages(messages)
    drops: list[PairingDrop] = []
    out = drop_invalid_pairings(messages, on_drop=drops.append)
    assert dump_messages(messages) == before
    assert not _block_multiset(out) - _block_multiset(messages)
    by_id = {m.id: m for m in messages}
    for m in out:  # each output message is its input message with some blocks removed
        source = by_id[m.id]
        assert m.model_copy(update={"blocks": source.blocks}) == source
        rest = iter(source.blocks)
        assert all(any(b is s for s in rest) for b in m.blocks)
    removed = sum(len(m.blocks) for m in messages) - sum(len(m.blocks) for m in out)
    empty = {d.index for d in drops if d.kind == "empty-turn"}
    reasoning = sum(1 for i in empty for b in messages[i].blocks if b.type in REASONING_TYPES)
    assert removed == reasoning + sum(1 for d in drops if d.kind != "empty-turn")


@PROPERTY
@given(conversations(placed=False))
def test_drop_invalid_pairings_is_idempotent(messages: list[Message]) -> None:
    once = drop_invalid_pairings(messages)
    drops: list[PairingDrop] = []
    twice = drop_invalid_pairings(once, on_drop=drops.append)
    assert drops == []
    assert all(a is b for a, b in zip(twice, once, strict=True)) and len(twice) == len(once)


@PROPERTY
@given(conversations(placed=False))
def test_drop_invalid_pairings_keeps_orphan_calls(messages: list[Message]) -> None:
    out = drop_invalid_pairings(messages)
    seen: dict[object, set[str]] = {}
    first_calls = []
    for m in messages:
        lane = seen.setdefault(m.lane, set())
        for b in m.blocks:
            if isinstance(b, ToolCallBlock) and b.id not in lane:
                lane.add(b.id)
                first_calls.append((m.lane, b.id))
    assert [(m.lane, b.id) for m in out for b in m.tool_calls()] == first_calls


@PROPERTY
@given(conversations(placed=False))
def test_healed_history_needs_no_more_than_placeholders_on_the_wire(
    messages: list[Message],
) -> None:
    # After the persisted heal, the wire repair never has to strip a duplicate call.
    healed = [
        m for m in drop_invalid_pairings(messages, lane_for=lambda _l: "one") if not m.aborted
    ]
    repairs: list[Repair] = []
    to_wire(healed, on_repair=repairs.append)
    assert not [r for r in repairs if r.kind == "duplicate-tool-call"]


# --- WireBuilder: the incremental to_wire of a growing history ---------------------------------


@PROPERTY
@given(conversations(), st.lists(st.integers(0, 40), min_size=1, max_size=6), providers)
def test_wire_builder_equals_to_wire_at_every_length(
    messages: list[Message], cuts: list[int], provider: str | None
) -> None:
    """Fed the growing prefixes of a conversation (and, now and then, a shorter one: a reset),
    the builder answers exactly what `to_wire` answers, repairs included."""
    builder = WireBuilder()
    for cut in [*cuts, len(messages)]:
        seen = messages[: min(cut, len(messages))]
        built: list[Repair] = []
        plain: list[Repair] = []
        assert builder(seen, provider, on_repair=built.append) == to_wire(
            seen, provider, on_repair=plain.append
        )
        assert built == plain


def test_wire_builder_plans_only_what_follows_a_settled_prefix() -> None:
    call = ToolCallBlock(id="c1", name="t", input={})
    history = [
        Message(role="user", blocks=(TextBlock(text="go"),)),
        Message(role="assistant", blocks=(call,)),
        Message(role="user", blocks=(ToolResultBlock(call_id="c1", output="ok"),)),
    ]
    builder = WireBuilder()
    first = builder(history, "anthropic")
    more = [*history, Message(role="assistant", blocks=(TextBlock(text="done"),))]
    second = builder(more, "anthropic")
    assert second == to_wire(more, "anthropic")
    assert all(a is b for a, b in zip(first, second[:3], strict=True))  # reused, not rebuilt
