"""to_wire on each corruption it repairs, and is_wire_valid on what it must refuse."""

from __future__ import annotations

from wakeful.messages import (
    DEFAULT_USER_TAIL_DIRECTIVE,
    SYNTHETIC_TOOL_RESULT,
    Message,
    Repair,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    is_wire_valid,
    system,
    to_wire,
    user,
)


def call(*ids: str, mid: str = "a") -> Message:
    return Message(
        id=mid, role="assistant", blocks=tuple(ToolCallBlock(id=i, name="t") for i in ids)
    )


def result(*ids: str, mid: str = "r", extra: tuple[TextBlock, ...] = ()) -> Message:
    blocks = tuple(ToolResultBlock(call_id=i, output=f"out {i}") for i in ids) + extra
    return Message(id=mid, role="user", blocks=blocks)


def run(messages: list[Message], provider: str | None = None) -> tuple[list[Message], list[Repair]]:
    repairs: list[Repair] = []
    out = to_wire(messages, provider, on_repair=repairs.append)
    assert is_wire_valid(out)
    return out, repairs


def test_a_valid_conversation_is_returned_as_is() -> None:
    messages = [system("s"), user("u"), call("c1"), result("c1"), assistant("done")]
    out, repairs = run(messages)
    assert repairs == [] and all(a is b for a, b in zip(out, messages, strict=True))


def test_orphan_call_gets_a_placeholder_in_the_next_user_message() -> None:
    out, repairs = run([call("c1", "c2"), result("c1", extra=(TextBlock(text="hi"),))])
    assert repairs == [Repair("synthetic-tool-result", "c2", 0)]
    assert out[1].blocks == (
        ToolResultBlock(call_id="c1", output="out c1"),
        ToolResultBlock(call_id="c2", output=SYNTHETIC_TOOL_RESULT, is_error=True),
        TextBlock(text="hi"),
    )


def test_orphan_call_before_a_non_user_message_gets_a_new_user_message() -> None:
    messages = [call("c1", mid="a1"), system("s"), assistant("x")]
    out, repairs = run(messages)
    assert [m.role for m in out] == ["assistant", "user", "system", "assistant"]
    assert out[1].id == "a1~tool-results"
    assert repairs == [Repair("synthetic-tool-result", "c1", 0)]
    assert to_wire(list(messages)) == out  # deterministic ids: pure


def test_orphan_result_is_removed_and_its_emptied_message_too() -> None:
    out, repairs = run([user("u"), result("zz", mid="r1"), assistant("x")])
    assert [m.id for m in out][1:] != ["r1"]
    assert Repair("orphan-tool-result", "zz", 1) in repairs
    assert Repair("empty-message", None, 1) in repairs


def test_a_late_result_is_moved_right_after_its_call() -> None:
    messages = [call("c1"), user("wait"), assistant("hm"), result("c1", mid="late")]
    out, repairs = run(messages)
    assert out[1].blocks[0] == ToolResultBlock(call_id="c1", output="out c1")
    assert out[1].blocks[1] == TextBlock(text="wait")
    assert [m.id for m in out] == ["a", messages[1].id, messages[2].id]
    assert repairs == [Repair("moved-tool-result", "c1", 3), Repair("empty-message", None, 3)]


def test_duplicates_keep_the_first_instance() -> None:
    messages = [
        call("c1", mid="a1"),
        result("c1", "c1", mid="r1"),
        call("c1", mid="a2"),
        result("c1", mid="r2"),
    ]
    out, repairs = run(messages)
    assert [m.id for m in out] == ["a1", "r1"]
    assert repairs == [
        Repair("duplicate-tool-result", "c1", 1),
        Repair("duplicate-tool-call", "c1", 2),
        Repair("duplicate-tool-result", "c1", 3),
        Repair("empty-message", None, 2),
        Repair("empty-message", None, 3),
    ]


def test_a_tool_call_outside_an_assistant_message_is_removed() -> None:
    misplaced = Message(role="user", blocks=(TextBlock(text="x"), ToolCallBlock(id="c", name="t")))
    out, repairs = run([misplaced])
    assert out[0].blocks == (TextBlock(text="x"),)
    assert repairs == [Repair("misplaced-tool-call", "c", 0)]


def test_aborted_messages_are_left_out_and_their_results_orphaned() -> None:
    cut = call("c1").model_copy(update={"aborted": True})
    out, repairs = run([user("u"), cut, result("c1")])
    assert [m.role for m in out] == ["user"]
    assert Repair("orphan-tool-result", "c1", 2) in repairs


def test_reasoning_left_alone_by_repair_counts_as_empty() -> None:
    thinking = Message(
        role="assistant", blocks=(ThinkingBlock(text="t"), ToolCallBlock(id="c1", name="t"))
    )
    out, _ = run([call("c1", mid="a0"), result("c1"), thinking])
    assert [m.id for m in out] == ["a0", "r"]
    kept = Message(role="assistant", blocks=(ThinkingBlock(text="t"),))
    assert run([kept])[0] == [kept]  # untouched reasoning-only output stays


def test_user_tail_only_with_a_provider() -> None:
    out, repairs = run([user("u"), assistant("a")])
    assert out[-1].role == "assistant" and repairs == []
    out, repairs = run([user("u"), assistant("a")], provider="anthropic")
    assert out[-1].role == "user" and out[-1].text() == DEFAULT_USER_TAIL_DIRECTIVE
    assert repairs == [Repair("user-tail", None, 1)]
    custom = to_wire([assistant("a")], "openai", user_tail_directive="Go on.")
    assert custom[-1].text() == "Go on."


def test_input_is_not_mutated_and_system_messages_stay() -> None:
    messages = [system("s"), call("c1")]
    snapshot = [m.model_copy(deep=True) for m in messages]
    out = to_wire(messages, "x")
    assert messages == snapshot
    assert out[0] is messages[0]


def test_is_wire_valid_refuses_each_violation() -> None:
    assert is_wire_valid([user("u"), call("c1"), result("c1")])
    assert is_wire_valid([])
    assert not is_wire_valid([call("c1")])  # unanswered
    assert not is_wire_valid([call("c1"), user("u"), result("c1")])  # not directly after
    assert not is_wire_valid([call("c1"), result("c1", "c1")])  # answered twice
    assert not is_wire_valid([user("u"), result("c1")])  # result without call
    assert not is_wire_valid([call("c1"), result("c1"), call("c1"), result("c1")])  # id reused
    assert not is_wire_valid([call("c1", "c1"), result("c1", "c1")])
    assert not is_wire_valid(
        [Message(role="user", blocks=(ToolCallBlock(id="c", name="t"),)), result("c")]
    )
    assert not is_wire_valid(
        [call("c1"), Message(role="system", blocks=(ToolResultBlock(call_id="c1", output=""),))]
    )
    assert not is_wire_valid([Message(role="user", blocks=())])
    assert not is_wire_valid([user("u").model_copy(update={"aborted": True})])
