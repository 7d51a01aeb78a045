"""The request digest: the SHA-256 of the exact body, however it is encoded."""

from __future__ import annotations

import hashlib

from hypothesis import given

from wakeful.messages import Message, to_wire
from wakeful.providers import ModelRequest, ScriptedProvider, ToolSpec
from wakeful.runner._prompt import canonical_json, request_digest

from ..messages.strategies import PROPERTY, conversations

SCRIPT = {"rules": [{"match": ".", "replies": [{"text": "ok"}]}]}


def plain_digest(provider: ScriptedProvider, request: ModelRequest) -> str:
    return hashlib.sha256(canonical_json(provider.wire_request(request)).encode()).hexdigest()


@PROPERTY
@given(conversations())
def test_memoized_digest_is_the_digest_of_the_canonical_body(messages: list[Message]) -> None:
    provider = ScriptedProvider.from_dict(SCRIPT)
    assert provider.stable_wire_messages
    tools = (ToolSpec("t", "a tool", {"type": "object", "properties": {"é": {"type": "string"}}}),)
    wire = tuple(to_wire(messages, provider.name))
    for cut in (len(wire) // 2, len(wire), len(wire)):  # repeated: the memo answers
        request = ModelRequest(model="m", system="sys ✓", messages=wire[:cut], tools=tools)
        assert request_digest(provider, request) == plain_digest(provider, request)


def test_a_changed_message_changes_the_digest() -> None:
    provider = ScriptedProvider.from_dict(SCRIPT)
    a = Message(role="user", blocks=({"type": "text", "text": "one"},))  # type: ignore[arg-type]
    b = Message(role="user", blocks=({"type": "text", "text": "two"},))  # type: ignore[arg-type]
    first = request_digest(provider, ModelRequest(model="m", system="", messages=(a,)))
    second = request_digest(provider, ModelRequest(model="m", system="", messages=(b,)))
    assert first != second


def test_prefix_memo_reuses_the_shared_start_of_a_history():
    """A history whose newest message was replaced by its stored copy costs the changed tail
    only; a message changed in the middle is measured again from there (values stay right)."""
    from wakeful.messages import PrefixMemo, assistant, user

    calls: list[str] = []

    def size(m):
        calls.append(m.id)
        return len(m.blocks[0].text)

    memo = PrefixMemo(size)
    a, b, c = user("one"), assistant("two two"), user("three")
    assert memo((a, b, c)) == [3, 7, 5] and len(calls) == 3
    c2, d = user("three!"), assistant("four")
    assert memo((a, b, c2, d)) == [3, 7, 6, 4]
    assert calls[3:] == [c2.id, d.id]  # a and b were not measured again
    b2 = assistant("2")
    assert memo((a, b2, c2, d)) == [3, 1, 6, 4]
    assert calls[5:] == [b2.id, c2.id, d.id]


def test_the_digest_hashed_on_from_the_last_request_is_the_digest_of_the_body() -> None:
    """A turn's requests: the history grows, its newest message is replaced by an equal copy,
    a volatile note follows it, the attempt changes, a message in the middle changes, the
    temperature is -0.0; each digest is the plain one (hashed on where the last request allows
    it, whole where it does not)."""
    from wakeful.messages import assistant, user

    provider = ScriptedProvider.from_dict(SCRIPT)
    history = [user("go")]
    requests = []
    note = Message(role="system", blocks=({"type": "text", "text": "work"},))  # type: ignore[arg-type]
    for k in range(6):
        history.append(assistant(f"step {k}"))
        requests.append(ModelRequest(model="m", system="s", messages=tuple(history)))
        history[-1] = history[-1].model_copy()  # the stored copy: equal, not the same object
        history.append(user(f"result {k}"))
        requests.append(ModelRequest(model="m", system="s", messages=tuple(history)))
        notes = (*history, note)  # a volatile note after the history, as a work state is sent
        requests.append(ModelRequest(model="m", system="s", messages=notes, volatile=1))
    requests.append(ModelRequest(model="m", system="s", messages=notes, volatile=99))
    grown = requests[-1].messages
    requests.append(ModelRequest(model="m", system="s", messages=grown, attempt=2))
    changed = (*grown[:3], user("another"), *grown[4:])
    requests.append(ModelRequest(model="m", system="s", messages=changed))
    requests.append(ModelRequest(model="m", system="s", messages=grown[:5]))  # = requests[4]
    requests.append(ModelRequest(model="m", system="s", messages=grown, temperature=-0.0))
    requests.append(ModelRequest(model="m", system="s", messages=grown, temperature=0.0))
    requests.append(ModelRequest(model="m", system="s", messages=()))
    digests = [request_digest(provider, r) for r in requests]
    assert digests == [plain_digest(provider, r) for r in requests]
    assert digests[4] == digests[-4]  # the same body: the same digest
    assert digests[17] == digests[18]  # the same messages, volatile or not
    assert len(set(digests)) == len(digests) - 2
