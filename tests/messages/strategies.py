"""Hypothesis strategies: blocks, messages and conversations, well formed and corrupted.

`conversations()` mixes three sources so the properties see both realistic and hostile input:
well-formed turns (user, assistant with tool calls, user with their results), those turns put
through random corruptions (deleted, duplicated, swapped, aborted messages; tool blocks moved,
copied, deleted or misplaced; lanes changed), and a "soup" of random messages drawing call ids
from a pool of six so duplicates and orphans are common. With `placed=True` (the default) every
non-tool block sits in a role that may hold it, as the runtime writes them; tool blocks may still
be anywhere (repair is what fixes them). With `refs=False` media always carry inline data.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from wakeful.messages import (
    AudioBlock,
    Block,
    CompactSummaryBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ProviderReasoningBlock,
    RedactedThinkingBlock,
    ServerToolResultBlock,
    ServerToolUseBlock,
    TextBlock,
    TextOrigin,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)

CALL_IDS = [f"call_{k}" for k in range(6)]
POOL_IDS = st.sampled_from(CALL_IDS)
LANES = [None, None, None, "run_a", "run_b"]

texts = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=12
)
nonempty = texts.filter(bool)
b64 = st.binary(max_size=12).map(lambda raw: base64.b64encode(raw).decode())
names = st.none() | st.sampled_from(["a.png", "notes.txt", "report.pdf", "clip"])
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**31), 2**31) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
tool_inputs = st.dictionaries(texts, json_values, max_size=3)

origins = st.none() | st.builds(
    TextOrigin,
    kind=st.sampled_from(["user", "signal", "event"]),
    source=st.sampled_from(["slack", "email", "cron"]),
    sender=st.none() | nonempty,
    message_id=st.none() | nonempty,
)
text_blocks = st.builds(TextBlock, text=texts, origin=origins)
plain_text_blocks = st.builds(TextBlock, text=texts)


def _source(refs: bool) -> st.SearchStrategy[dict[str, str]]:
    data = b64.map(lambda d: {"data": d})
    if not refs:
        return data
    return data | nonempty.map(lambda r: {"ref": f"sha256:{r}"})


def media_blocks(refs: bool = True) -> st.SearchStrategy[Block]:
    """Images, audio, video and documents, in media types every provider does and does not take."""
    image = st.builds(
        lambda mt, src, name: ImageBlock(media_type=mt, name=name, **src),
        st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"]),
        _source(refs),
        names,
    )
    audio = st.builds(
        lambda mt, src, name: AudioBlock(media_type=mt, name=name, **src),
        st.sampled_from(["audio/wav", "audio/mpeg", "audio/ogg"]),
        _source(refs),
        names,
    )
    video = st.builds(
        lambda src, name: VideoBlock(media_type="video/mp4", name=name, **src), _source(refs), names
    )
    pdf = st.builds(
        lambda src, name, enc: DocumentBlock(
            media_type="application/pdf", name=name, encoding=enc, **src
        ),
        _source(refs),
        names,
        st.sampled_from([None, "base64"]),
    )
    plain = st.builds(
        lambda text, name: DocumentBlock(
            media_type="text/plain", data=base64.b64encode(text.encode()).decode(), name=name
        ),
        texts,
        names,
    )
    other = st.builds(
        lambda src, name: DocumentBlock(media_type="application/msword", name=name, **src),
        _source(refs),
        names,
    )
    return st.one_of(image, audio, video, pdf, plain, other)


def tool_calls(ids: st.SearchStrategy[str] = POOL_IDS) -> st.SearchStrategy[Block]:
    return st.builds(
        ToolCallBlock, id=ids, name=st.sampled_from(["read", "write", "search"]), input=tool_inputs
    )


def tool_results(
    ids: st.SearchStrategy[str] = POOL_IDS, refs: bool = True
) -> st.SearchStrategy[Block]:
    parts = st.one_of(text_blocks, media_blocks(refs))
    output = texts | st.lists(parts, max_size=3).map(tuple)
    return st.builds(
        ToolResultBlock,
        call_id=ids,
        output=output,
        is_error=st.booleans(),
        metadata=st.none() | st.dictionaries(texts, json_values, max_size=2),
    )


provider_reasoning = st.one_of(
    texts.map(
        lambda t: ProviderReasoningBlock(
            provider="openrouter",
            data={"reasoning_details": [{"type": "reasoning.text", "text": t}]},
        )
    ),
    texts.map(
        lambda t: ProviderReasoningBlock(
            provider="openai-responses",
            data={
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": t}],
            },
        )
    ),
    texts.map(lambda t: ProviderReasoningBlock(provider="vllm", data={"reasoning_content": t})),
)
thinking = st.builds(ThinkingBlock, text=texts, signature=st.none() | nonempty)
redacted = st.builds(RedactedThinkingBlock, data=nonempty)
server_use = st.builds(
    lambda k, q: ServerToolUseBlock(id=f"srvtoolu_{k}", name="web_search", input={"query": q}),
    st.integers(0, 3),
    texts,
)
server_result = st.builds(
    lambda k, title: ServerToolResultBlock(
        tool_use_id=f"srvtoolu_{k}",
        content=[
            {
                "type": "web_search_result",
                "url": "https://example.com",
                "title": title,
                "encrypted_content": "enc",
            }
        ],
    ),
    st.integers(0, 3),
    texts,
)
summaries = st.builds(
    CompactSummaryBlock, summary=texts, through_seq=st.none() | st.integers(0, 99)
)


def role_blocks(role: str, refs: bool = True) -> st.SearchStrategy[Block]:
    """Non-tool blocks a message of `role` may hold (media in assistant messages is rare)."""
    if role == "system":
        return st.one_of(text_blocks, summaries)
    if role == "user":
        return st.one_of(text_blocks, text_blocks, media_blocks(refs), summaries)
    return st.one_of(
        text_blocks,
        text_blocks,
        thinking,
        redacted,
        provider_reasoning,
        server_use,
        server_result,
        summaries,
        media_blocks(refs),
    )


def _renumber(messages: list[Message]) -> list[Message]:
    return [m.model_copy(update={"id": f"m{k}"}) for k, m in enumerate(messages)]


@st.composite
def well_formed(draw: st.DrawFn, refs: bool = True) -> list[Message]:
    """Turns of user input, assistant output with tool calls, and a user message of results."""
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message(role="system", blocks=tuple(draw(st.lists(text_blocks, max_size=2)))))
    counter = 0
    for _ in range(draw(st.integers(0, 4))):
        user_blocks = draw(st.lists(role_blocks("user", refs), min_size=1, max_size=3))
        out.append(Message(role="user", blocks=tuple(user_blocks)))
        ids = [f"call_{counter + k}" for k in range(draw(st.integers(0, 3)))]
        counter += len(ids)
        calls = [draw(tool_calls(st.just(i))) for i in ids]
        extra = draw(st.lists(role_blocks("assistant", refs), max_size=3))
        blocks = extra + calls if extra or calls else [TextBlock(text="ok")]
        out.append(Message(role="assistant", blocks=tuple(blocks)))
        if ids:
            results = [draw(tool_results(st.just(i), refs)) for i in ids]
            out.append(Message(role="user", blocks=tuple(results)))
    return _renumber(out)


def _tool_positions(messages: list[Message]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, m in enumerate(messages)
        for j, b in enumerate(m.blocks)
        if isinstance(b, ToolCallBlock | ToolResultBlock)
    ]


def _replace(messages: list[Message], i: int, blocks: list[Block]) -> None:
    messages[i] = messages[i].model_copy(update={"blocks": tuple(blocks)})


@st.composite
def corrupted(draw: st.DrawFn, refs: bool = True) -> list[Message]:
    """A well-formed conversation after one to five random corruptions."""
    messages = list(draw(well_formed(refs)))
    for _ in range(draw(st.integers(1, 5))):
        if not messages:
            break
        op = draw(st.sampled_from(["delete", "dup", "swap", "abort", "lane", "tool", "tool"]))
        i = draw(st.integers(0, len(messages) - 1))
        if op == "delete":
            del messages[i]
        elif op == "dup":
            messages.insert(draw(st.integers(0, len(messages))), messages[i])
        elif op == "swap" and i + 1 < len(messages):
            messages[i], messages[i + 1] = messages[i + 1], messages[i]
        elif op == "abort":
            messages[i] = messages[i].model_copy(update={"aborted": True})
        elif op == "lane":
            messages[i] = messages[i].model_copy(update={"lane": draw(st.sampled_from(LANES))})
        elif op == "tool":
            _corrupt_tool_block(draw, messages)
    return _renumber(messages)


def _corrupt_tool_block(draw: st.DrawFn, messages: list[Message]) -> None:
    positions = _tool_positions(messages)
    if not positions:
        return
    i, j = draw(st.sampled_from(positions))
    block = messages[i].blocks[j]
    how = draw(st.sampled_from(["remove", "copy", "move", "move"]))
    if how != "copy":
        _replace(messages, i, [b for k, b in enumerate(messages[i].blocks) if k != j])
    if how != "remove":
        target = draw(st.sampled_from([i, draw(st.integers(0, len(messages) - 1))]))
        blocks = list(messages[target].blocks)
        blocks.insert(draw(st.integers(0, len(blocks))), block)
        _replace(messages, target, blocks)


@st.composite
def soup(draw: st.DrawFn, placed: bool = True, refs: bool = True) -> list[Message]:
    """Random messages; tool blocks draw ids from a pool of six, so collisions are common."""
    out: list[Message] = []
    for _ in range(draw(st.integers(0, 8))):
        role = draw(st.sampled_from(["user", "assistant", "assistant", "user", "system"]))
        own = role_blocks(role, refs) if placed else role_blocks("assistant", refs)
        tools = tool_calls() if role == "assistant" else tool_results(refs=refs)
        pool = st.one_of(own, tools, tools) if role != "system" else own
        if not placed:
            pool = st.one_of(pool, tool_calls(), tool_results(refs=refs), role_blocks("user", refs))
        blocks = draw(st.lists(pool, max_size=4))
        lane = draw(st.sampled_from(LANES))
        aborted = draw(st.integers(0, 9)) == 0
        out.append(Message(role=role, blocks=tuple(blocks), lane=lane, aborted=aborted))
    return _renumber(out)


def conversations(placed: bool = True, refs: bool = True) -> st.SearchStrategy[list[Message]]:
    """Well-formed, corrupted and random conversations (see the module docstring)."""
    return st.one_of(
        well_formed(refs), corrupted(refs), corrupted(refs), soup(placed, refs), soup(placed, refs)
    )


def placed_conversations(refs: bool = False) -> st.SearchStrategy[list[Message]]:
    """Conversations whose every block sits where the converters accept it (no repair needed)."""
    return st.one_of(well_formed(refs), soup(True, refs))


PROPERTY = settings(
    max_examples=int(os.environ.get("WAKEFUL_EXAMPLES", "35")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
"""Settings for the property tests: enough examples to hit corruptions, no per-example deadline."""
