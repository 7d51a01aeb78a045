"""A transcript's `message.added` bodies are decoded in one pass (issue 36 item 6): the same
messages as one decode per body, in log order among deliveries and edits, on both backends; in
a session of today's shapes built as stored with no validation (`test_built_messages.py`),
else with one; a body the fast pass refuses is decoded alone and its error is the one
`load_event` names."""

from __future__ import annotations

import pytest

from wakeful.errors import StoreError
from wakeful.events import (
    MESSAGE_ADDED_HEAD,
    MessageAdded,
    _codec,
    dump_event,
    load_event,
    load_messages_added,
)
from wakeful.messages import Message, TextBlock, ToolCallBlock, assistant, user
from wakeful.store import SqlStore


def _session(store: SqlStore) -> str:
    sid = store.create_session(title="typed").id
    call = ToolCallBlock(id="c1", name="shell", input={"command": "ls"})
    store.append(
        sid,
        [
            MessageAdded(message=user("first")),
            MessageAdded(
                message=Message(role="assistant", blocks=(TextBlock(text="x"), call)), turn_id="t1"
            ),
        ],
    )
    store.admit(sid, "in1", "user", {"text": "delivered"})
    store.promote(sid, idle=True)
    store.append(sid, [MessageAdded(message=assistant(f"reply {i}")) for i in range(5)])
    return sid


def _one_by_one(store: SqlStore, sid: str) -> list[Message]:
    """The transcript decoded event by event with `load_event` (what the store did before)."""
    out: list[Message] = []
    for ev in store.events(sid):
        message = getattr(ev.event, "message", None)
        if isinstance(message, Message):
            out.append(message)
        elif ev.event.type == "inbox.delivered":
            out.append(next(m for m in store.messages(sid) if m.id == ev.event.message_id))
    return out


def test_a_transcript_decodes_its_added_bodies_in_one_pass(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = _session(store)
    expected = _one_by_one(store, sid)
    calls: list[int] = []
    real = _codec._added_adapter

    class Counting:
        def validate_json(self, data: str) -> list[MessageAdded]:
            calls.append(data.count(MESSAGE_ADDED_HEAD))  # (the bodies, lean: `_codec`)
            return real().validate_json(data)

    monkeypatch.setattr(_codec, "_added_adapter", Counting)
    monkeypatch.setattr(_codec, "load_event", lambda _data: pytest.fail("decoded one by one"))
    got = store.messages(sid)
    assert got == expected and [m.text() for m in got][2] == "delivered"
    assert calls == []  # a session of today's shapes: built as stored
    with store.backend.transaction(write=True) as tx:  # bodies of other shapes may be mixed in
        tx.send("UPDATE sessions SET message_shapes = '-' WHERE id = ?", (sid,))
    assert store.messages(sid) == expected
    assert calls == [7]  # the seven added bodies, one validation


def test_a_body_the_fast_pass_refuses_is_named_as_load_event_names_it() -> None:
    good = dump_event(MessageAdded(message=user("ok")))
    bad = good.replace('"role":"user"', '"role":"nobody"')
    assert [e.message.text() for e in load_messages_added([good, good])] == ["ok", "ok"]
    with pytest.raises(StoreError) as batch:
        load_messages_added([good, bad])
    with pytest.raises(StoreError) as single:
        load_event(bad)
    assert str(batch.value) == str(single.value)
    assert load_messages_added([]) == []
