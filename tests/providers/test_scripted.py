"""The scripted provider's public contract (docs/design.md, "The scripted provider")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wakeful.errors import (
    AuthenticationError,
    ContentFilterError,
    ContextOverflowError,
    IncompleteStreamError,
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    TransportError,
    UsageError,
)
from wakeful.messages import (
    Message,
    TextBlock,
    TextOrigin,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    user,
)
from wakeful.providers import (
    Finish,
    ModelRequest,
    Provider,
    ReasoningDelta,
    ScriptedProvider,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    UsageReport,
    estimate_request_tokens,
    load_script,
    scripted_call_id,
)


def request(*messages: Message, attempt: int = 1, system: str = "") -> ModelRequest:
    return ModelRequest(model="scripted", system=system, messages=messages, attempt=attempt)


def provider(rules: list[dict], **top: object) -> ScriptedProvider:
    return ScriptedProvider.from_dict({"rules": rules, **top})


async def collect(p: ScriptedProvider, req: ModelRequest) -> list:
    return [event async for event in p.stream(req)]


async def collect_until_error(p: ScriptedProvider, req: ModelRequest) -> tuple[list, ProviderError]:
    events: list = []
    with pytest.raises(ProviderError) as info:
        async for event in p.stream(req):
            events.append(event)
    return events, info.value


def finish_of(events: list) -> Finish:
    assert isinstance(events[-1], Finish)
    assert sum(isinstance(e, Finish) for e in events) == 1
    return events[-1]


def test_is_a_provider():
    p = provider([{"match": ".", "replies": [{}]}])
    assert isinstance(p, Provider)
    assert (p.name, p.context_window, p.max_output_tokens) == ("scripted", 200_000, 8_000)


async def test_text_streams_in_chunks_of_16_and_finishes_with_the_whole_message():
    text = "The quick brown fox jumps over the lazy dog."
    p = provider([{"match": "fox", "replies": [{"text": text}]}])
    events = await collect(p, request(user("tell me about the fox")))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == [text[0:16], text[16:32], text[32:]]
    finish = finish_of(events)
    assert finish.reason == "stop"
    assert finish.message.role == "assistant"
    assert finish.message.blocks == (TextBlock(text=text),)


async def test_reasoning_streams_before_text_with_the_configured_chunk_size():
    p = provider(
        [{"match": "", "replies": [{"reasoning": "think hard", "text": "answer"}]}], chunk_chars=4
    )
    events = await collect(p, request(user("q")))
    kinds = [(type(e).__name__, getattr(e, "text", None)) for e in events[:-2]]
    assert kinds == [
        ("UsageReport", None),  # the input side first, as Anthropic's message_start
        ("ReasoningDelta", "thin"),
        ("ReasoningDelta", "k ha"),
        ("ReasoningDelta", "rd"),
        ("TextDelta", "answ"),
        ("TextDelta", "er"),
    ]
    assert isinstance(events[-2], UsageReport)
    assert finish_of(events).message.blocks == (
        ThinkingBlock(text="think hard"),
        TextBlock(text="answer"),
    )


async def test_the_first_matching_rule_wins_and_match_is_a_search():
    p = provider(
        [
            {"match": "^deploy", "replies": [{"text": "deploying"}]},
            {"match": "oy", "replies": [{"text": "second"}]},
            {"match": ".*", "replies": [{"text": "fallback"}]},
        ]
    )
    assert (await collect(p, request(user("deploy now"))))[-1].message.text() == "deploying"
    assert (await collect(p, request(user("please deploy"))))[-1].message.text() == "second"
    assert (await collect(p, request(user("hello"))))[-1].message.text() == "fallback"


async def test_reply_k_counts_assistant_messages_after_the_newest_user_input_and_repeats_last():
    p = provider([{"match": "go", "replies": [{"text": "r0"}, {"text": "r1"}, {"text": "r2"}]}])
    tool_call = Message(role="assistant", blocks=(ToolCallBlock(id="c1", name="ls", input={}),))
    tool_result = Message(role="user", blocks=(ToolResultBlock(call_id="c1", output="a b"),))
    history = [user("old input"), assistant("old reply"), user("go")]
    answers = []
    for extra in ([], [tool_call, tool_result], [tool_call, tool_result, assistant("x")]):
        events = await collect(p, request(*history, *extra))
        answers.append(finish_of(events).message.text())
    more = [tool_call, tool_result] * 5
    answers.append(finish_of(await collect(p, request(*history, *more))).message.text())
    assert answers == ["r0", "r1", "r2", "r2"]


async def test_synthetic_text_and_tool_results_are_not_user_inputs():
    p = provider(
        [
            {"match": "^original$", "replies": [{"text": "first"}, {"text": "after one"}]},
            {"match": ".", "replies": [{"text": "wrong rule"}]},
        ]
    )
    synthetic = Message(
        role="user",
        blocks=(TextBlock(text="continue", origin=TextOrigin(kind="signal", source="runtime")),),
    )
    events = await collect(p, request(user("original"), assistant("partial"), synthetic))
    assert finish_of(events).message.text() == "after one"


async def test_the_input_text_joins_only_the_users_own_text_blocks():
    p = provider([{"match": "^ab$", "replies": [{"text": "ok"}]}])
    mixed = Message(
        role="user",
        blocks=(
            TextBlock(text="a"),
            TextBlock(text="ignored", origin=TextOrigin(kind="event", source="cron")),
            TextBlock(text="b", origin=TextOrigin(kind="user", source="slack")),
        ),
    )
    assert finish_of(await collect(p, request(mixed))).message.text() == "ok"


async def test_no_matching_rule_is_an_invalid_request_naming_the_input():
    p = provider([{"match": "^yes$", "replies": [{"text": "y"}]}])
    with pytest.raises(InvalidRequestError, match="no rule matches the user input 'maybe'"):
        await collect(p, request(user("maybe")))


async def test_a_request_without_user_input_is_an_invalid_request():
    p = provider([{"match": "", "replies": [{"text": "y"}]}])
    with pytest.raises(InvalidRequestError, match="no user input"):
        await collect(p, request(assistant("hi")))


async def test_tool_calls_have_deterministic_ids_and_stream_their_json_input():
    calls = [
        {"name": "read_file", "input": {"path": "/etc/hosts", "lines": [1, 2, 3]}},
        {"name": "ls"},
    ]
    p = provider([{"match": "files", "replies": [{"text": "Looking.", "tool_calls": calls}]}])
    prompt = user("list files")
    events = await collect(p, request(prompt))
    finish = finish_of(events)
    assert finish.reason == "tool_calls"
    ids = [scripted_call_id(prompt.id, 0, 0), scripted_call_id(prompt.id, 0, 1)]
    assert all(i.startswith("call_") and len(i) == 17 for i in ids)
    assert len(set(ids)) == 2
    assert finish.message.blocks == (
        TextBlock(text="Looking."),
        ToolCallBlock(id=ids[0], name="read_file", input=calls[0]["input"]),
        ToolCallBlock(id=ids[1], name="ls", input={}),
    )
    for call_id, call in zip(ids, calls, strict=True):
        fragments = [
            e.input_json_fragment
            for e in events
            if isinstance(e, ToolCallDelta) and e.call_id == call_id
        ]
        assert all(len(f) <= 16 for f in fragments)
        assert json.loads("".join(fragments)) == call.get("input", {})
    again = await collect(ScriptedProvider(p.script), request(prompt))
    assert again == events


async def test_call_ids_differ_between_replies_and_between_inputs():
    p = provider([{"match": "", "replies": [{"tool_calls": [{"name": "t"}]}]}])
    first, second = user("same"), user("same")
    a = finish_of(await collect(p, request(first))).message.tool_calls()[0].id
    b = finish_of(await collect(p, request(second))).message.tool_calls()[0].id
    c = finish_of(await collect(p, request(first, assistant("x")))).message.tool_calls()[0].id
    assert len({a, b, c}) == 3


async def test_usage_is_estimated_as_chars_over_4_when_absent():
    p = provider([{"match": "", "replies": [{"reasoning": "abcd", "text": "efghi"}]}])
    req = request(user("x" * 40), system="s" * 8)
    finish = finish_of(await collect(p, req))
    assert finish.usage == Usage(input_tokens=12, output_tokens=3)
    assert estimate_request_tokens(req) == 12


async def test_usage_given_in_the_script_is_reported_and_missing_counts_are_estimated():
    p = provider(
        [
            {
                "match": "full",
                "replies": [
                    {
                        "text": "t",
                        "usage": {"input_tokens": 7, "output_tokens": 9, "cache_read_tokens": 5},
                    }
                ],
            },
            {"match": "half", "replies": [{"text": "abcdefgh", "usage": {"input_tokens": 100}}]},
        ]
    )
    full = await collect(p, request(user("full")))
    assert finish_of(full).usage == Usage(7, 9, cache_read_tokens=5)
    assert full[-2] == UsageReport(usage=Usage(7, 9, cache_read_tokens=5))
    assert finish_of(await collect(p, request(user("half")))).usage == Usage(100, 2)


@pytest.mark.parametrize("reason", ["stop", "length", "content_filter"])
async def test_finish_reason_comes_from_the_reply(reason):
    p = provider([{"match": "", "replies": [{"text": "cut", "finish": reason}]}])
    assert finish_of(await collect(p, request(user("q")))).reason == reason


ERROR_KINDS = [
    ("rate_limit", RateLimitError),
    ("overloaded", OverloadedError),
    ("transport_unsent", TransportError),
    ("transport_unknown", TransportError),
    ("incomplete_stream", IncompleteStreamError),
    ("context_overflow", ContextOverflowError),
    ("content_filter", ContentFilterError),
    ("authentication", AuthenticationError),
    ("invalid_request", InvalidRequestError),
]


@pytest.mark.parametrize(("kind", "error_type"), ERROR_KINDS)
async def test_every_error_kind_raises_its_typed_error(kind, error_type):
    error = {"kind": kind, "times": 1, "retry_after_ms": 1500}
    p = provider([{"match": "", "replies": [{"text": "ok", "error": error}]}])
    events, err = await collect_until_error(p, request(user("q")))
    assert events == []
    assert type(err) is error_type
    assert err.retry_after_ms == 1500
    if kind.startswith("transport"):
        assert err.delivered is (False if kind == "transport_unsent" else None)


async def test_the_first_times_attempts_fail_and_the_next_succeeds():
    error = {"kind": "overloaded", "times": 2}
    p = provider([{"match": "", "replies": [{"text": "finally", "error": error}]}])
    prompt = user("q")
    for attempt in (1, 2):
        _, err = await collect_until_error(p, request(prompt, attempt=attempt))
        assert isinstance(err, OverloadedError)
    events = await collect(p, request(prompt, attempt=3))
    assert finish_of(events).message.text() == "finally"


async def test_times_defaults_to_one_and_zero_never_fails():
    p = provider(
        [
            {"match": "once", "replies": [{"text": "a", "error": {"kind": "rate_limit"}}]},
            {
                "match": "never",
                "replies": [{"text": "b", "error": {"kind": "rate_limit", "times": 0}}],
            },
        ]
    )
    await collect_until_error(p, request(user("once")))
    assert finish_of(await collect(p, request(user("once"), attempt=2))).message.text() == "a"
    assert finish_of(await collect(p, request(user("never")))).message.text() == "b"


async def test_after_chars_streams_that_much_text_then_fails():
    error = {"kind": "incomplete_stream", "after_chars": 20}
    p = provider(
        [{"match": "", "replies": [{"reasoning": "hmm", "text": "x" * 50, "error": error}]}],
        chunk_chars=8,
    )
    events, err = await collect_until_error(p, request(user("q")))
    assert isinstance(err, IncompleteStreamError)
    assert isinstance(events[0], UsageReport)  # the input side, before anything streams
    assert events[1] == ReasoningDelta(text="hmm")
    assert [e.text for e in events[2:]] == ["x" * 8, "x" * 8, "x" * 4]
    assert not any(isinstance(e, Finish) for e in events)


async def test_the_same_request_gives_the_same_events_after_a_restart(tmp_path: Path):
    script = {
        "chunk_chars": 3,
        "rules": [
            {
                "match": "build",
                "replies": [
                    {
                        "reasoning": "plan",
                        "text": "Building",
                        "tool_calls": [{"name": "make", "input": {"target": "all"}}],
                    },
                    {
                        "text": "Done",
                        "error": {"kind": "rate_limit", "times": 1, "retry_after_ms": 10},
                    },
                ],
            }
        ],
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    first_run = ScriptedProvider.from_file(path)
    prompt = user("build it")
    req = request(prompt)
    events = await collect(first_run, req)
    restarted = ScriptedProvider.from_file(path)
    assert await collect(restarted, req) == events
    call = finish_of(events).message
    result = Message(
        role="user", blocks=(ToolResultBlock(call_id=call.tool_calls()[0].id, output="ok"),)
    )
    step2 = request(prompt, call, result)
    _, err1 = await collect_until_error(first_run, step2)
    _, err2 = await collect_until_error(restarted, step2)
    assert type(err1) is type(err2) is RateLimitError
    assert (
        finish_of(await collect(restarted, request(prompt, call, result, attempt=2))).message.text()
        == "Done"
    )


async def test_a_request_larger_than_the_context_window_overflows():
    p = provider([{"match": "", "replies": [{"text": "ok"}]}], context_window=10)
    assert finish_of(await collect(p, request(user("x" * 40)))).message.text() == "ok"
    with pytest.raises(ContextOverflowError, match="exceeds the context window of 10"):
        await collect(p, request(user("x" * 41)))


async def test_tools_count_toward_the_estimate():
    p = provider([{"match": "", "replies": [{"text": "ok"}]}], context_window=10)
    tool = ToolSpec(name="t", description="d" * 100, input_schema={"type": "object"})
    req = ModelRequest(model="m", system="", messages=(user("hi"),), tools=(tool,))
    with pytest.raises(ContextOverflowError):
        await collect(p, req)


async def test_chunk_delay_sleeps_between_chunks_only():
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    p = ScriptedProvider.from_dict(
        {
            "chunk_chars": 2,
            "chunk_delay_ms": 250,
            "rules": [{"match": "", "replies": [{"text": "abcdef"}]}],
        },
        sleep=fake_sleep,
    )
    events = await collect(p, request(user("q")))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ab", "cd", "ef"]
    assert slept == [0.25, 0.25]


async def test_top_level_keys_configure_the_provider():
    p = provider([{"match": "", "replies": [{}]}], context_window=1234, max_output_tokens=56)
    assert (p.context_window, p.max_output_tokens) == (1234, 56)
    events = await collect(p, request(user("q")))
    assert len(events) == 3  # input usage, usage, finish
    assert finish_of(events).reason == "stop"
    assert finish_of(events).message.blocks == ()


def test_wire_request_is_json_and_names_the_attempt():
    p = provider([{"match": "", "replies": [{}]}])
    tool = ToolSpec(name="t", description="d", input_schema={"type": "object"})
    req = ModelRequest(
        model="m", system="sys", messages=(user("q"),), tools=(tool,), attempt=3, temperature=0.5
    )
    wire = p.wire_request(req)
    assert json.loads(json.dumps(wire)) == wire
    assert wire["attempt"] == 3
    assert wire["messages"][0]["role"] == "user"
    assert wire["tools"] == [{"name": "t", "description": "d", "input_schema": {"type": "object"}}]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "is not valid JSON"),
        ("[]", "(top level)"),
        ('{"rules": [{"match": "(", "replies": [{}]}]}', "rules.0: Value error, bad regex '('"),
        (
            '{"rules": [{"match": "", "replies": [{"error": {"kind": "explode"}}]}]}',
            "rules.0.replies.0.error.kind",
        ),
        ('{"rules": [{"match": "", "replies": []}]}', "rules.0.replies"),
        ('{"rules": [{"match": "", "replies": [{"txt": "typo"}]}]}', "rules.0.replies.0.txt"),
        ('{"rules": [], "chunk_chars": 0}', "chunk_chars"),
        ('{"context_window": 100}', "rules"),
        (
            '{"rules": [{"match": "", "replies": [{"finish": "maybe"}]}]}',
            "rules.0.replies.0.finish",
        ),
    ],
)
def test_bad_script_files_raise_usage_errors_naming_the_problem(tmp_path, content, reason):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UsageError) as info:
        load_script(path)
    assert reason in str(info.value)
    assert not isinstance(info.value, ProviderError)


def test_a_missing_script_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no script file at"):
        ScriptedProvider.from_file(tmp_path / "absent.json")


async def test_aclose_is_harmless():
    p = provider([{"match": "", "replies": [{}]}])
    await p.aclose()
    await p.aclose()


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=200), chunk=st.integers(min_value=1, max_value=40))
async def test_text_deltas_always_rebuild_the_text(text, chunk):
    p = provider([{"match": "", "replies": [{"text": text}]}], chunk_chars=chunk)
    events = await collect(p, request(user("q")))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(deltas) == text
    assert all(0 < len(d) <= chunk for d in deltas)
    assert finish_of(events).message.text() == text


# -- the turn located from what is new (`TurnLocator`) ----------------------------------------

_POOL = [
    user("first"),
    user("second"),
    assistant("reply"),
    assistant("another reply"),
    Message(role="user", blocks=(ToolResultBlock(call_id="c1", output="ok"),)),
    Message(
        role="user",
        blocks=(TextBlock(text="go on", origin=TextOrigin(kind="event", source="wakeful")),),
    ),
    Message(role="system", blocks=(TextBlock(text="a note"),)),
]

_edits = st.one_of(
    st.tuples(st.just("extend"), st.lists(st.integers(0, len(_POOL) - 1), max_size=4)),
    st.tuples(st.just("cut"), st.integers(0, 8)),
    st.tuples(st.just("swap"), st.integers(0, 8), st.integers(0, len(_POOL) - 1)),
    st.tuples(st.just("copy"), st.integers(0, 8)),
)


def _edit(messages: list[Message], edit: tuple) -> None:
    """Apply one of `_edits` to a history (its first message stays); other edits change nothing."""
    if edit[0] == "extend":
        messages += [_POOL[i] for i in edit[1]]
    elif edit[0] == "cut":
        del messages[max(1, len(messages) - edit[1]) :]
    elif edit[0] == "swap" and len(messages) > 1:
        messages[1 + edit[1] % (len(messages) - 1)] = _POOL[edit[2]]
    elif edit[0] == "copy" and len(messages) > 1:
        i = 1 + edit[1] % (len(messages) - 1)
        messages[i] = messages[i].model_copy()


@settings(max_examples=300, deadline=None)
@given(
    start=st.lists(st.integers(0, len(_POOL) - 1), max_size=6),
    edits=st.lists(_edits),
    opens_with_input=st.booleans(),
)
def test_the_turn_located_from_what_is_new_is_the_one_a_whole_walk_finds(
    start, edits, opens_with_input
):
    """A request after request of one history, each an edit of the last (messages added, the
    end cut, one replaced by another or by an equal copy): `TurnLocator`, which reads only what
    a request does not share with the last, locates what `locate_turn` does, errors included."""
    from wakeful.providers._scripted import TurnLocator, locate_turn

    # one history: its first message stays (a user input or not)
    head = user("the first message") if opens_with_input else assistant("the first message")
    messages = [head, *(_POOL[i] for i in start)]
    locator = TurnLocator()
    for edit in [("extend", []), *edits]:
        _edit(messages, edit)
        request_messages = tuple(messages)
        try:
            expected = locate_turn(request_messages)
        except InvalidRequestError:
            with pytest.raises(InvalidRequestError):
                locator(request_messages)
            continue
        assert locator(request_messages) == expected


def test_a_request_without_user_input_located_from_what_is_new_is_an_invalid_request():
    from wakeful.providers._scripted import TurnLocator

    locator = TurnLocator()
    with pytest.raises(InvalidRequestError):
        locator((assistant("alone"),))
    with pytest.raises(InvalidRequestError):
        locator(())


# -- the size estimate from what is new (`PrefixTotal`) ---------------------------------------

_TOOLS = (
    ToolSpec(name="read", description="reads", input_schema={"type": "object"}),
    ToolSpec(name="write", description="w" * 30, input_schema={"properties": {"x": {}}}),
)


def _whole_estimate(request: ModelRequest) -> int:
    """The estimate's rule applied to the whole request, with no memo."""
    from wakeful.providers._base import _tool_chars, block_chars

    chars = len(request.system) + sum(_tool_chars(tool) for tool in request.tools)
    chars += sum(block_chars(block) for message in request.messages for block in message.blocks)
    return -(-chars // 4)


@settings(max_examples=300, deadline=None)
@given(
    start=st.lists(st.integers(0, len(_POOL) - 1), max_size=6),
    edits=st.lists(st.one_of(_edits, st.just(("retry",)), st.just(("tools",)))),
)
def test_the_estimate_kept_per_history_is_the_whole_requests(start, edits):
    """Request after request of one history, each an edit of the last (messages added, the end
    cut as a compaction does, one replaced by another or by its stored copy, the same messages
    sent again as a retry, the tools changed): the running estimate is the whole walk's."""
    messages = [user("the first message"), *(_POOL[i] for i in start)]
    tools: tuple[ToolSpec, ...] = _TOOLS
    last: tuple[Message, ...] = ()
    for attempt, edit in enumerate([("extend", []), *edits], start=1):
        _edit(messages, edit)
        if edit[0] == "tools":
            tools = tools[1:] if tools else _TOOLS
        sent = last if edit[0] == "retry" and last else tuple(messages)
        req = ModelRequest(
            model="m", system="s" * attempt, messages=sent, tools=tools, attempt=attempt
        )
        assert estimate_request_tokens(req) == _whole_estimate(req)
        last = sent
