"""Prompt assembly and prompt receipts (invariant 7).

A prompt is built from sections with stable ids, each with its exact source and the SHA-256
digest of its content; section contents are blobs (stored once, shared by every attempt that
uses them). A receipt lists the sections, the ids of the persisted messages the request was
built from (only those after the prefix it shares with the runner's previous receipt, which it
names as its base), and the digest of the exact request body. It never copies the transcript: a
receipt can be verified by rebuilding the request from the blobs and the stored messages.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter, eq, is_
from typing import Literal

from pydantic import JsonValue

from ..events import ReceiptRecorded
from ..messages import IdentityMemo, Message, TextBlock, shared_prefix, to_wire
from ..providers import ModelRequest, Provider, ToolSpec
from ..store import ReceiptReads
from ._media import MediaResolver
from ._tail import TAIL_SECTION, apply_tail

SYSTEM_PREFIX = "system."
# A section whose id starts with this is a request-only user message, sent after the history
# (the summary request of a compaction): it is never a transcript message, so it lives in a blob.
INPUT_PREFIX = "input."
# A section whose id starts with this is a request-only system note sent after the history and
# after any `input.` message (the work state): what changes during a session goes after the
# cached prefix, never into it (`ModelRequest.volatile`).
NOTE_PREFIX = "note."


@dataclass(frozen=True, slots=True)
class Section:
    """One prompt section: stable id, exact source, content, and the SHA-256 hex digest of the
    content (computed once)."""

    id: str
    source: str
    content: str
    digest: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        content = self.content
        digest = _digest(content) if len(content) <= _MEMO_CHARS else _digest.__wrapped__(content)
        object.__setattr__(self, "digest", digest)


_MEMO_CHARS = 65_536  # longer texts (a compaction's input) are hashed, not kept


@lru_cache(maxsize=128)
def _digest(content: str) -> str:
    """The SHA-256 hex digest of `content`, hashed once per distinct text while it stays in
    the cache: every step rebuilds its sections from mostly the same texts (the system prompt,
    the instructions, the tools: alike across sessions), and hashing them again each time was
    ~1.5% of a worker's CPU (issue 24)."""
    return hashlib.sha256(content.encode()).hexdigest()


def input_message(section: Section) -> Message:
    """The user message an `input.` section stands for (its id derives from the content)."""
    return Message(
        id=f"msg_sec_{section.digest[:32]}", role="user", blocks=(TextBlock(text=section.content),)
    )


@lru_cache(maxsize=64)
def _note_message(digest: str, content: str) -> Message:
    return Message(id=f"msg_note_{digest[:32]}", role="system", blocks=(TextBlock(text=content),))


def note_message(section: Section) -> Message:
    """The system message a `note.` section stands for (the same object while it lasts)."""
    return _note_message(section.digest, section.content)


def canonical_json(value: object) -> str:
    """The one canonical JSON encoding used for digests."""
    return _CANONICAL.encode(value)


# What `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)` builds on
# each call, built once (an encoder keeps no state between calls).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_digest(provider: Provider, request: ModelRequest) -> str:
    """SHA-256 of the exact JSON body `provider` sends for `request` (its `canonical_json`).

    A provider whose `wire_request` hands out the same read-only object for the same message
    every time (`stable_wire_messages = True`: the scripted one) has each message's JSON encoded
    once and the body hashed on from the hash of the last request of the same history, so a
    step encodes and hashes only what is new; the text hashed is the same either way.
    """
    body = provider.wire_request(request)
    if getattr(provider, "stable_wire_messages", False):
        return _body_digest(body, request.volatile)
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def _body_digest(body: dict[str, JsonValue], volatile: int) -> str:
    """`sha256(canonical_json(body))`, hashing the `messages` entries on from an earlier
    request's state (`_messages_hash`) and the other members from memoized encodings (the
    same scalars and list objects request after request)."""
    messages = body.get("messages")
    if not isinstance(messages, list):  # no list to hash on: the body's text, hashed whole
        return hashlib.sha256(canonical_json(body).encode()).hexdigest()
    opening, closing = _frame(body)
    digest = _messages_hash(opening, messages, volatile)
    digest.update(closing)
    return digest.hexdigest()


# The last body's members besides `messages` (the very objects) and the texts around its
# messages: a session's next request has the same ones (its system prompt, tools and
# parameters), so they are encoded once, not every step.
_FRAMED: list[tuple[tuple[str, ...], tuple[object, ...], str, bytes]] = []


def _frame(body: dict[str, JsonValue]) -> tuple[str, bytes]:
    """The canonical JSON of `body` before its `messages` entries (through `"messages":[`) and
    after them (encoded), from the last body's when every other member is the same object."""
    keys = tuple(body)
    values = tuple(body.values())
    at = keys.index("messages")
    values = values[:at] + values[at + 1 :]
    if _FRAMED:
        last_keys, last_values, opening, closing = _FRAMED[0]
        if last_keys == keys and all(map(is_, last_values, values)):
            return opening, closing
    head: list[str] = []
    tail: list[str] = []
    for key in sorted(body):
        if key != "messages":
            value = body[key]
            text = _entry_json(value) if isinstance(value, list) else _member_json(value)
            (head if key < "messages" else tail).append(f"{_member_json(key)}:{text}")
    opening = "{" + "".join(f"{part}," for part in head) + '"messages":['
    closing = ("]" + "".join(f",{part}" for part in tail) + "}").encode()
    _FRAMED[:] = [(keys, values, opening, closing)]
    return opening, closing


def _member_json(value: JsonValue) -> str:
    """`canonical_json(value)`; a string, integer, boolean or null from a memo (a float is
    encoded each time: -0.0 equals 0.0 as a memo key but not as JSON)."""
    if value is None or isinstance(value, (str, int)):  # bool is an int
        return _scalar_json(value)
    return canonical_json(value)


@lru_cache(maxsize=256, typed=True)
def _scalar_json(value: str | int | None) -> str:
    return canonical_json(value)


# An entry's canonical JSON, once per entry object (the scripted provider hands out the same
# read-only objects request after request).
_entry_json: IdentityMemo[JsonValue, str] = IdentityMemo(canonical_json)


@dataclass(slots=True)
class _Hashed:
    """The `messages` entries of a history's last request: the entries (the list as the
    provider handed it out, read-only; kept alive, so their ids stay theirs), their JSON
    texts, and the hash of `head` followed by the first `mark` texts joined by commas (the
    history, without the request's volatile entries after it)."""

    entries: list[JsonValue]
    texts: list[str]
    head: str
    mark: int
    state: hashlib._Hash


# id(first entry) -> the last request of that history (at most 64 histories).
_HASHED: OrderedDict[int, _Hashed] = OrderedDict()


def _messages_hash(head: str, entries: list[JsonValue], volatile: int) -> hashlib._Hash:
    """The SHA-256 of `head` followed by the JSON texts of `entries` joined by commas (a copy,
    for the caller to finish); the last `volatile` entries follow the history (a request's
    `input.` and `note.` messages, `ModelRequest.volatile`). A request whose head and first
    texts are an earlier request's of the same history (the same entry objects, or entries of
    the same text: the newest message of a history is replaced by its stored copy each step)
    hashes only what follows that request's history; the texts kept for the next request
    change where this one differs (in place)."""
    if not entries:
        return hashlib.sha256(head.encode())
    settled = max(0, len(entries) - max(0, volatile))
    key = id(entries[0])
    last = _HASHED.get(key)
    if last is None:
        texts = [_entry_json(v) for v in entries]
        state = hashlib.sha256((head + ",".join(texts[:settled])).encode())
        last = _HASHED[key] = _Hashed(entries, texts, head, settled, state)
    else:
        kept = len(entries) if entries is last.entries else shared_prefix(last.entries, entries)
        new = [_entry_json(v) for v in entries[kept:]]
        mark = last.mark  # texts hashed so far
        extends = last.head == head and mark <= settled
        extends = extends and (kept >= mark or new[: mark - kept] == last.texts[kept:mark])
        last.texts[kept:] = new
        if not extends:  # the hashed history is not where this one starts: hash it whole
            last.state = hashlib.sha256((head + ",".join(last.texts[:settled])).encode())
        elif settled > mark:
            last.state.update(("," * (mark > 0) + ",".join(last.texts[mark:settled])).encode())
        last.entries, last.head, last.mark = entries, head, settled
    _HASHED.move_to_end(key)
    if len(_HASHED) > 64:
        _HASHED.popitem(last=False)
    state = last.state.copy()
    if len(entries) > settled:
        state.update(("," * (settled > 0) + ",".join(last.texts[settled:])).encode())
    return state


def tools_section(tools: Sequence[ToolSpec], source: str) -> Section:
    """The tool specs as a section (canonical JSON)."""
    specs = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in tools
    ]
    return Section("tools", source, canonical_json(specs))


@lru_cache(maxsize=256)
def params_section(
    model: str, max_output_tokens: int | None, attempt: int, cache_key: str | None = None
) -> Section:
    """Request parameters as a section (`cache_key`: the prompt-cache key, the session id);
    the same section object while the same parameters stay in the cache (every step of a
    session asks for its first attempt's)."""
    params: dict[str, JsonValue] = {
        "model": model,
        "max_output_tokens": max_output_tokens,
        "attempt": attempt,
    }
    if cache_key is not None:
        params["cache_key"] = cache_key
    return Section("params", "runtime", canonical_json(params))


def build_request(
    sections: Sequence[Section],
    history: Sequence[Message],
    provider_name: str,
    wire: Callable[[Sequence[Message], str], list[Message]] = to_wire,
) -> ModelRequest:
    """Build the request from sections and persisted history (`to_wire` repairs a copy; a
    turn passes its `WireBuilder`, which gives the same messages).

    The history is the cacheable prefix; `input.` messages and then `note.` system messages
    follow it, counted in `ModelRequest.volatile`. A `tail` section hides the tool results
    before its hide point (`_tail.py`)."""
    system = _system_prompt(tuple(s.content for s in sections if s.id.startswith(SYSTEM_PREFIX)))
    tools: tuple[ToolSpec, ...] = ()
    params: dict[str, JsonValue] = {}
    for s in sections:
        if s.id == "tools":
            tools = _tool_specs(s.digest, s.content)
        elif s.id == "params":
            params = _params(s.content)
    hide_before = next((s.content for s in sections if s.id == TAIL_SECTION), None)
    if hide_before is not None:  # the `tail` strategy's hide point (`_tail.py`)
        history = apply_tail(history, hide_before)
    extra = [input_message(s) for s in sections if s.id.startswith(INPUT_PREFIX)]
    if extra:
        history = [*history, *extra]
    notes = tuple(note_message(s) for s in sections if s.id.startswith(NOTE_PREFIX))
    max_out = params.get("max_output_tokens")
    attempt = params.get("attempt", 1)
    key = params.get("cache_key")
    return ModelRequest(
        model=str(params.get("model", "")),
        system=system,
        messages=(*wire(history, provider_name), *notes),
        tools=tools,
        max_output_tokens=max_out if isinstance(max_out, int) else None,
        attempt=attempt if isinstance(attempt, int) else 1,
        volatile=len(extra) + len(notes),
        cache_key=key if isinstance(key, str) else None,
    )


@lru_cache(maxsize=64)
def _system_prompt(contents: tuple[str, ...]) -> str:
    """The system prompt of the `system.` sections' contents (the same text object step after
    step: a digest then finds it by identity, `_frame`)."""
    return "\n\n".join(contents)


@lru_cache(maxsize=64)
def _params(content: str) -> dict[str, JsonValue]:
    """The parameters of a params section (the same text step after step: decoded once; the
    caller only reads the dict)."""
    value = json.loads(content)
    assert isinstance(value, dict)
    return value


@lru_cache(maxsize=64)
def _tool_specs(digest: str, content: str) -> tuple[ToolSpec, ...]:
    """The tool specs of a tools section (by digest: the same tuple while the tools last)."""
    return tuple(
        ToolSpec(t["name"], t["description"], t["input_schema"]) for t in json.loads(content)
    )


def section_blobs(sections: Sequence[Section]) -> dict[str, bytes]:
    """The blob of each section by its digest (stored in the receipt's own transaction; the
    port sends only those it did not store before). A text is encoded once while it stays in
    the cache, as it is hashed once (`_digest`): every step sends mostly the same sections."""
    return {
        s.digest: _blob(s.content) if len(s.content) <= _MEMO_CHARS else s.content.encode()
        for s in sections
    }


@lru_cache(maxsize=128)
def _blob(content: str) -> bytes:
    return content.encode()


def make_receipt(
    sections: Sequence[Section],
    history: Sequence[Message],
    digest: str,
    *,
    receipt_id: str,
    turn_id: str | None,
    step: int,
    attempt: int,
    model: str,
    purpose: Literal["step", "compaction"] = "step",
    base: ReceiptBase | None = None,
    options: dict[str, JsonValue] | None = None,
) -> ReceiptRecorded:
    """Build the receipt event; the caller appends it with `section_blobs(sections)`, fenced.
    `options`: the run options in force besides the model (a step's, for its run record).

    With a `base` (an earlier durable receipt of the session) whose messages start the history,
    the receipt names that base and lists only the ids after the shared prefix; otherwise it
    lists every id. Either way it names exactly `history`."""
    ids, kept = _ids_after(history, base)
    return ReceiptRecorded(
        purpose=purpose,
        receipt_id=receipt_id,
        turn_id=turn_id,
        step=step,
        attempt=attempt,
        model=model,
        request_digest=digest,
        sections=tuple((s.id, s.source, s.digest) for s in sections),
        message_ids=ids[kept:],
        base=(base.receipt_id, kept) if base is not None and kept else None,
        options=options,
    )


def _ids_after(history: Sequence[Message], base: ReceiptBase | None) -> tuple[tuple[str, ...], int]:
    """The ids of `history` and how many of them start `base`'s. A history that starts with
    the base's very messages (a step's history extends the last step's: compared by identity,
    in C) reads the ids of the rest only; any other is compared id by id."""
    if base is None:
        return message_ids(history), 0
    n = len(base.messages)
    if n and len(history) >= n and shared_prefix(base.messages, history) == n:
        return base.message_ids + message_ids(history[n:]), n  # the same messages: their ids
    ids = message_ids(history)
    return ids, shared_prefix(base.message_ids, ids, same=eq)


@dataclass(frozen=True, slots=True)
class ReceiptBase:
    """A receipt already committed to the session, with its complete message ids: what the next
    receipt of the same runner is recorded against; `messages`, when known, are the messages
    those ids name, as the receipt's request carried them (the next step's history starts with
    them)."""

    receipt_id: str
    message_ids: tuple[str, ...]
    messages: tuple[Message, ...] = ()


class ReceiptChain:
    """The newest receipt a runner committed, shared by its steps and its compactions: the base
    the next receipt is recorded against (None before the first, so that one lists every id)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: ReceiptBase | None = None

    def committed(self, receipt: ReceiptRecorded, history: Sequence[Message]) -> None:
        """`receipt`, built from `history`, is durable: the next receipt may name it (one whose
        commit failed never is, or its base would not resolve)."""
        last, base = self.last, receipt.base
        if base is not None and last is not None and base[0] == last.receipt_id:
            ids = last.message_ids[: base[1]] + receipt.message_ids  # what make_receipt split
        else:
            ids = message_ids(history)
        self.last = ReceiptBase(receipt.receipt_id, ids, tuple(history))


_ID = attrgetter("id")


def message_ids(history: Sequence[Message]) -> tuple[str, ...]:
    """The ids of `history`'s messages, in order (in C: this runs on every step's history)."""
    return tuple(map(_ID, history))


def rebuild_request(
    store: ReceiptReads, session_id: str, receipt: ReceiptRecorded, provider_name: str
) -> ModelRequest:
    """Rebuild the exact request of a receipt from its blobs and the stored messages (a receipt
    recorded against a base is expanded through the store's chain of receipts)."""
    sections = [
        Section(sid, source, store.get_blob(digest).decode())
        for sid, source, digest in receipt.sections
    ]
    ids = (
        receipt.message_ids
        if receipt.base is None
        else store.receipt_message_ids(session_id, receipt.receipt_id)
    )
    by_id = store.receipt_messages(session_id, receipt.receipt_id)  # as they read then
    history = MediaResolver(store.get_blob)([by_id[mid] for mid in ids])
    return build_request(sections, history, provider_name)


def verify_receipt(
    store: ReceiptReads, session_id: str, receipt: ReceiptRecorded, provider: Provider
) -> bool:
    """True when rebuilding the receipt's request gives exactly the recorded digest."""
    request = rebuild_request(store, session_id, receipt, provider.name)
    return request_digest(provider, request) == receipt.request_digest
