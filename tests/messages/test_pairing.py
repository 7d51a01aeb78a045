"""drop_invalid_pairings against the spec's table, one row at a time, plus cascade and lanes."""

from __future__ import annotations

from wakeful.messages import (
    Message,
    PairingDrop,
    RedactedThinkingBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    drop_invalid_pairings,
    user,
)


def call(*ids: str, lane: str | None = None, extra: tuple[object, ...] = ()) -> Message:
    blocks = (*extra, *(ToolCallBlock(id=i, name="t") for i in ids))
    return Message(role="assistant", blocks=blocks, lane=lane)  # type: ignore[arg-type]


def result(*ids: str, lane: str | None = None, extra: tuple[object, ...] = ()) -> Message:
    blocks = (*(ToolResultBlock(call_id=i, output="o") for i in ids), *extra)
    return Message(role="user", blocks=blocks, lane=lane)  # type: ignore[arg-type]


def heal(messages: list[Message], **kwargs: object) -> tuple[list[Message], list[PairingDrop]]:
    drops: list[PairingDrop] = []
    out = drop_invalid_pairings(messages, on_drop=drops.append, **kwargs)  # type: ignore[arg-type]
    return out, drops


def test_clean_history_comes_back_as_the_same_objects() -> None:
    messages = [user("u"), call("c1"), result("c1")]
    out, drops = heal(messages)
    assert drops == [] and all(a is b for a, b in zip(out, messages, strict=True))


def test_duplicate_call_in_one_lane_drops_the_later_and_cascades() -> None:
    messages = [
        call("c1"),
        result("c1"),
        call("c1", extra=(TextBlock(text="again"),)),
        result("c1"),
    ]
    out, drops = heal(messages)
    assert drops == [
        PairingDrop("duplicate-tool-call", "c1", 2),
        PairingDrop("orphan-tool-result", "c1", 3),
        PairingDrop("empty-turn", None, 3),
    ]
    assert [m.id for m in out] == [messages[0].id, messages[1].id, messages[2].id]
    assert out[2].blocks == (TextBlock(text="again"),)


def test_duplicate_call_within_one_message() -> None:
    out, drops = heal([call("c1", "c1"), result("c1")])
    assert drops == [PairingDrop("duplicate-tool-call", "c1", 0)]
    assert len(out[0].blocks) == 1


def test_the_same_id_in_different_lanes_is_not_a_duplicate() -> None:
    messages = [
        call("c1", lane="parent"),
        call("c1", lane="child"),
        result("c1", lane="child"),
        result("c1", lane="parent"),
    ]
    assert heal(messages)[1] == []


def test_lane_for_widens_lanes_to_the_wire_view() -> None:
    messages = [call("c1", lane="run_1"), result("c1", lane="run_1"), call("c1", lane="run_2")]
    _, drops = heal(messages, lane_for=lambda _run: "main")
    assert drops == [
        PairingDrop("duplicate-tool-call", "c1", 2),
        PairingDrop("empty-turn", None, 2),
    ]


def test_duplicate_result_within_one_message() -> None:
    out, drops = heal([call("c1"), result("c1", "c1")])
    assert drops == [PairingDrop("duplicate-tool-result", "c1", 1)]
    assert len(out[1].blocks) == 1


def test_result_without_a_call_in_the_latest_assistant_message_is_dropped() -> None:
    messages = [call("c1"), result("c1"), call("c2"), result("c1", extra=(TextBlock(text="keep"),))]
    out, drops = heal(messages)
    assert drops == [PairingDrop("orphan-tool-result", "c1", 3)]
    assert out[3].blocks == (TextBlock(text="keep"),)


def test_a_result_after_an_intervening_user_message_is_kept() -> None:
    # Not provably invalid (the call is in the latest assistant message); to_wire moves it.
    messages = [call("c1"), user("wait"), result("c1")]
    assert heal(messages)[1] == []


def test_orphan_calls_are_kept() -> None:
    messages = [user("u"), call("c1"), user("next")]
    assert heal(messages)[1] == []


def test_reasoning_only_remainder_counts_as_empty() -> None:
    messages = [call("c1"), result("c1"), call("c1", extra=(RedactedThinkingBlock(data="x"),))]
    out, drops = heal(messages)
    assert drops[-1] == PairingDrop("empty-turn", None, 2)
    assert len(out) == 2


def test_a_message_that_was_empty_already_is_kept() -> None:
    empty = Message(role="user", blocks=())
    assert heal([empty]) == ([empty], [])
