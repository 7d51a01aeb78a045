"""A send keeps its result under its input id: the admitted item and the id of the message it
becomes, the same when the input id is sent again (issue 37 item 9). Every input id of a session
stays deduplicated, however many came after it (docs/hosts.md, "Idempotent sends")."""

from __future__ import annotations

import json
from pathlib import Path

from wakeful.execution import Runtime
from wakeful.store import memory_store


async def test_a_send_names_its_message_and_a_resend_returns_the_same(tmp_path: Path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "ok"}]}]}))
    rt = Runtime(str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=tmp_path)
    sid = rt.create_session().id
    first = rt.send("hello", session_id=sid, input_id="req-1", resume=False)
    assert first.created and first.status == "pending" and first.item is not None
    assert first.item.payload == {"text": "hello"} and first.message_id is not None
    await rt.drive(sid)
    [hello, _reply] = rt.store.messages(sid)
    assert hello.id == first.message_id  # named at admission, before the delivery
    again = rt.send("hello", session_id=sid, input_id="req-1", resume=False)
    assert not again.created and again.status == "delivered"
    assert again.message_id == first.message_id and again.item is not None
    assert again.item.seq == first.item.seq and again.item.message_id == first.message_id
    compacting = rt.compact(sid, resume=False)  # a control item becomes no message
    assert compacting.message_id is None
    await rt.aclose()


def test_every_input_id_stays_deduplicated():
    # The seed keeps 256 request ids per session; wakeful keeps every one (invariant 3).
    store = memory_store()
    sid = store.create_session().id
    for n in range(300):
        store.admit(sid, f"in-{n}", "user", {"text": f"prompt {n}"}, "queue")
    again = store.admit(sid, "in-0", "user", {"text": "prompt 0"}, "queue")
    assert not again.created and again.item.seq == 2
    assert len(store.pending(sid)) == 300
    store.close()
